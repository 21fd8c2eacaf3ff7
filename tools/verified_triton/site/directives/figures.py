"""::figure NAME (one figure, placed next to its prose) and ::figures (all of them).

A figure is drawn twice by the kit, for light and dark pages; Material shows
the variant that matches the reader's scheme (#only-light, #only-dark).
"""

from __future__ import annotations

from verified_triton.core.kit import Figure
from verified_triton.judge.evidence import Record, read_figure
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import DirectiveError, Page, directive, notebook_form
from verified_triton.site.directives.common import STALE_MARK, gpu_first, mode_label, stale_note
from verified_triton.site.render import SECOND_COPY, admonition, text


def figure_html(page: Page, st: LessonStatus, record: Record, fig: Figure) -> str:
    caption = text(fig.caption or fig.name)
    alt = text(fig.caption or fig.name, SECOND_COPY)  # the caption is shown in full once, under the figure
    base = f"{page.root}evidence/{st.lesson.name}/{record.key}/"
    # Each image is a link to itself: a tap opens it full size (GLightbox, loaded on that first tap by
    # assets/javascripts/reader.js; without scripts the link opens the PNG).
    variants = [(fig.file, "#only-light" if fig.dark_file else "")]
    if fig.dark_file:
        variants.append((fig.dark_file, "#only-dark"))
    images = [f"  [![{alt}]({base}{file}{scheme}){{ loading=lazy }}]({base}{file}{scheme}){{ .vt-zoom }}"
              for file, scheme in variants]
    where = text(f"{mode_label(record)}, {record.date}")
    block = ('<figure markdown="span" class="vt-figure">\n' + "\n".join(images)
             + f"\n  <figcaption>{caption} ({where})</figcaption>\n</figure>")
    note = stale_note(st, record)
    return admonition("vt-stale", STALE_MARK, f"{note}\n\n{block}") if note else block


@directive("figure", "one recorded figure, placed next to the prose about it (light and dark variants)",
           args=("NAME",))
def figure(page: Page, name: str) -> str:
    st = page.lesson
    for record in gpu_first(st):
        for fig in record.figures:
            if fig.name == name:
                return figure_html(page, st, record, fig)
    if any(r.mode == "gpu" for r in st.current):
        known = sorted({f.name for r in st.records for f in r.figures})
        raise DirectiveError(f"no recorded figure named '{name}' for lesson '{st.lesson.name}' "
                             f"(recorded figures: {', '.join(known) or 'none'})")
    return f"_Figure {text(name)} is drawn by the GPU run of this source, which has not been recorded yet._"


@directive("figures", "every figure the runs recorded")
def figures(page: Page) -> str:
    st = page.lesson
    out = [figure_html(page, st, record, fig) for record in gpu_first(st) for fig in record.figures]
    return "\n\n".join(out) or "_No figures recorded yet._"


@notebook_form("figure")
def figure_notebook(page: Page, name: str) -> str:
    """The light variant, embedded in the cell as an attachment (the notebook needs no other file)."""
    st = page.lesson
    for record in gpu_first(st):
        for fig in record.figures:
            if fig.name == name:
                page.attachments[fig.file] = read_figure(page.site.evidence_dir, record, fig.file)
                where = text(f"{mode_label(record)}, {record.date}")
                older = "" if st.is_current(record) else " ⚠ older source"
                caption = text(fig.caption or fig.name)
                return f"![{caption}](attachment:{fig.file})\n\n*{caption} ({where}){older}*"
    return ""
