"""::figure NAME (one figure, placed next to its prose) and ::figures (all of them).

A figure is drawn twice by the kit, for light and dark pages; Material shows
the variant that matches the reader's scheme (#only-light, #only-dark).
"""

from __future__ import annotations

from verified_triton.core.kit import Figure
from verified_triton.judge.evidence import Record, read_figure
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import Page, directive, notebook_form
from verified_triton.site.directives.common import (
    STALE_MARK,
    gpu_first,
    mode_label,
    require_recorded,
    run_words,
    stale_note,
)
from verified_triton.site.door import Md, text, url
from verified_triton.site.render import SECOND_COPY, admonition


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its header (read_figure has checked the magic bytes)."""
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def figure_html(page: Page, st: LessonStatus, record: Record, fig: Figure) -> Md:
    caption = text(fig.caption or fig.name)
    alt = text(fig.caption or fig.name, SECOND_COPY)  # the caption is shown in full once, under the figure
    base = f"{page.root}evidence/{st.lesson.name}/{record.key}/"  # names and keys the schema checked
    # Each image is a link to itself: a tap opens it full size (GLightbox, loaded on that first tap by
    # assets/javascripts/reader.js; without scripts the link opens the PNG).
    variants = [(fig.file, "#only-light" if fig.dark_file else "")]
    if fig.dark_file:
        variants.append((fig.dark_file, "#only-dark"))
    # Its pixel size, so that the page keeps its height before a lazy image loads (no layout shift, and a
    # page measured as it opens is as tall as the one a reader scrolls).
    images = [Md("  [![{alt}]({src}){{ loading=lazy width={w} height={h} }}]({src}){{ .vt-zoom }}").format(
        alt=alt, src=url(f"{base}{file}{scheme}"), w=str(w), h=str(h))
        for file, scheme in variants for w, h in [png_size(read_figure(page.site.evidence_dir, record, file))]]
    # which run drew it; the machine and date are the page's status line's (a stale figure's note says its own)
    where = text(run_words(record) if st.is_current(record) else f"{mode_label(record)}, {record.date}")
    block = Md('<figure markdown="span" class="vt-figure">\n{}\n  <figcaption>{} ({})</figcaption>\n</figure>').format(
        Md("\n").join(images), caption, where)
    note = stale_note(st, record)
    return admonition("vt-stale", STALE_MARK, Md("{}\n\n{}").format(note, block)) if note else block


@directive("figure", "one recorded figure, placed next to the prose about it (light and dark variants)",
           args=("NAME",))
def figure(page: Page, name: str) -> Md:
    st = page.lesson
    for record in gpu_first(st):
        for fig in record.figures:
            if fig.name == name:
                return figure_html(page, st, record, fig)
    require_recorded(st, "figure", name, lambda r: (f.name for f in r.figures))
    return Md("_Figure {} is drawn by the GPU run of this source, which has not been recorded yet._").format(name)


@directive("figures", "every figure the runs recorded")
def figures(page: Page) -> Md:
    st = page.lesson
    out = [figure_html(page, st, record, fig) for record in gpu_first(st) for fig in record.figures]
    return Md("\n\n").join(out) or Md("_No figures recorded yet._")


@notebook_form("figure")
def figure_notebook(page: Page, name: str) -> Md:
    """The light variant, embedded in the cell as an attachment (the notebook needs no other file)."""
    st = page.lesson
    for record in gpu_first(st):
        for fig in record.figures:
            if fig.name == name:
                page.attachments[fig.file] = read_figure(page.site.evidence_dir, record, fig.file)
                where = text(f"{mode_label(record)}, {record.date}")
                older = "" if st.is_current(record) else " ⚠ older source"
                caption = text(fig.caption or fig.name)
                return Md("![{}](attachment:{})\n\n*{} ({}){}*").format(caption, url(fig.file), caption, where, older)
    return Md("")
