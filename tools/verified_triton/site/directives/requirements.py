"""::requirements — what the lesson needs, what its results were recorded with, how to run it."""

from __future__ import annotations

from verified_triton.core.numfmt import seconds
from verified_triton.site.directives import Page, directive, notebook_form
from verified_triton.site.render import admonition, md_table, text, unindexed
from verified_triton.site.requirements import INSTALL, Requirements, requirements
from verified_triton.site.sources import page_uri, site_path


def requirements_markdown(page: Page) -> str:
    """The box's contents, in Markdown that both the site and Jupyter render."""
    req = requirements(page.lesson.lesson, page.lesson)
    return f"{_run_facts(req)}\n\n{_commands(req)}"


def _run_facts(req: Requirements) -> str:
    """What the lesson needs and the runs recorded: what every lesson says alike."""
    need = (f"a CUDA GPU of compute capability {text(req.capability)} or newer"
            + (f" ({text(req.why)})" if req.why else "") if req.capability else "a CUDA GPU")
    lines = [f"**GPU run:** {need}. {text(req.colab_sentence)}",
             f"**Triton:** {text(req.triton)} or newer." if req.triton else "",
             f"**Optional:** {text(req.optional_sentence)}" if req.optional else "",
             "**Interpreter run:** any machine with torch and Triton; no GPU."]
    body = "  \n".join(line for line in lines if line)
    if req.runs:
        rows = [[text(r.mode), text(f"{r.machine}, {r.date}"), text(r.triton), text(r.torch), text(r.python),
                 text(seconds(r.wall_s)), text(r.outcome + ("" if r.current else ", ⚠ older source"))]
                for r in req.runs]
        body += "\n\n" + md_table(["Run", "Where, when", "Triton", "torch", "Python", "Took", "Outcome"], rows)
    if req.skew:
        body += f"\n\n{text(req.skew)}"
    return body


def _commands(req: Requirements) -> str:
    """The install and run lines, which name the lesson's file."""
    interp, gpu = req.commands()
    optional = "".join(f" · optional: <code>{text(line)}</code>" for line in req.optional_installs)
    return (f"Install: <code>{text(INSTALL)}</code>{optional}  \n"
            f"Run: <code>{text(interp)}</code> (CPU, checks only) · <code>{text(gpu)}</code> (GPU)")


@directive("requirements",                           "run, the install line, run commands and downloads")
def requirements_box(page: Page) -> str:
    # What every lesson says alike (the runs table, "Interpreter run: any machine ...") stays out of the
    # search index, where it made every lesson match "interpreter" (a <section>: see ::checks); the install
    # and run lines, which name the lesson's file, stay in.
    req = requirements(page.lesson.lesson, page.lesson)
    body = f"{unindexed(_run_facts(req))}\n\n{_commands(req)}"
    lesson = page.lesson.lesson
    modules = [m for m in lesson.source_files() if m.suffix == ".py" and m != lesson.main]
    if modules:  # the kit (and any other local module) has a page: say so where the lesson is run
        body += "\n\n**Imports:** " + ", ".join(
            f"[<code>{text(m.name)}</code>]({page.root}{page_uri(site_path(page.site.code_dir, m))})"
            for m in modules) + ", which the zip puts beside the lesson."
    links = page.site.extra.get("downloads", {}).get(lesson.name)
    if links:
        body += "\n\n" + " · ".join(
            f"[{label}]({target}){{ .vt-colab }}" if target.startswith("https://")
            else f"[{label}]({page.root}{target})" for label, target in links)
    return admonition("vt-run", "Run it yourself", body, folded=True)  # folded: the lesson comes first


@notebook_form("requirements")
def requirements_notebook(page: Page) -> str:
    return "**Requirements**\n\n" + requirements_markdown(page)
