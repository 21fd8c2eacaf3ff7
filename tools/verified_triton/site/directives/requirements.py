"""::requirements — what the lesson needs, what its results were recorded with, how to run it."""

from __future__ import annotations

from verified_triton.core.numfmt import seconds
from verified_triton.site.directives import Page, directive, notebook_form
from verified_triton.site.door import Md, code, text, url
from verified_triton.site.render import admonition, md_table, unindexed
from verified_triton.site.requirements import CPU_INSTALL, INSTALL, Requirements, requirements
from verified_triton.site.sources import page_uri, site_path


def requirements_markdown(page: Page) -> Md:
    """The box's contents, in Markdown that both the site and Jupyter render."""
    req = requirements(page.lesson.lesson, page.lesson)
    return Md("{}\n\n{}").format(_run_facts(req), _commands(req))


def _run_facts(req: Requirements) -> Md:
    """What the lesson needs and the runs recorded: what every lesson says alike."""
    need = (Md("a CUDA GPU of compute capability {} or newer").format(req.capability)
            + (Md(" ({})").format(req.why) if req.why else "") if req.capability else Md("a CUDA GPU"))
    lines = [Md("**GPU run:** {}. {}").format(need, req.colab_sentence),
             Md("**Triton:** {} or newer.").format(req.triton) if req.triton else "",
             Md("**Optional:** {}").format(req.optional_sentence) if req.optional else "",
             Md("**Interpreter run:** any machine with torch and Triton; no GPU.")]
    body = Md("  \n").join(line for line in lines if line)
    if req.runs:
        rows = [[text(r.mode), text(f"{r.machine}, {r.date}"), text(r.triton), text(r.torch), text(r.python),
                 text(seconds(r.wall_s)), text(r.outcome + ("" if r.current else ", ⚠ older source"))]
                for r in req.runs]
        body += Md("\n\n") + md_table(["Run", "Where, when", "Triton", "torch", "Python", "Took", "Outcome"], rows)
    if req.skew:
        body += Md("\n\n") + text(req.skew)
    return body


def _commands(req: Requirements) -> Md:
    """The install and run lines, which name the lesson's file. A reader without a GPU gets torch's CPU build,
    as the zip's README says: on Linux the default torch is the CUDA build, gigabytes a CPU cannot use."""
    interp, gpu = req.commands()
    optional = Md("").join(Md(" · optional: {}").format(code(line)) for line in req.optional_installs)
    cpu = Md(", then ").join(code(line) for line in CPU_INSTALL)
    # The CPU line is a paragraph of its own: its index URL would make a Markdown renderer with linkify (a
    # notebook's) turn the file names of the same paragraph into links (`x.py` reads as a host).
    return Md("Install, with a GPU: {}{}  \nRun: {} (CPU, checks only) · {} (GPU)\n\n"
              "Without a GPU, install torch's CPU build first: {}").format(
        code(INSTALL), optional, code(interp), code(gpu), cpu)


@directive("requirements",                           "run, the install line, run commands and downloads")
def requirements_box(page: Page) -> Md:
    # What every lesson says alike (the runs table, "Interpreter run: any machine ...") stays out of the
    # search index, where it made every lesson match "interpreter" (a <section>: see ::checks); the install
    # and run lines, which name the lesson's file, stay in.
    req = requirements(page.lesson.lesson, page.lesson)
    body = Md("{}\n\n{}").format(unindexed(_run_facts(req)), _commands(req))
    lesson = page.lesson.lesson
    modules = [m for m in lesson.source_files() if m.suffix == ".py" and m != lesson.main]
    if modules:  # the kit (and any other local module) has a page: say so where the lesson is run
        body += Md("\n\n**Imports:** ") + Md(", ").join(
            Md("[{}]({})").format(code(m.name), url(page.root + page_uri(site_path(page.site.code_dir, m))))
            for m in modules) + Md(", which the zip puts beside the lesson.")
    links = page.site.extra.get("downloads", {}).get(lesson.name)
    if links:
        body += Md("\n\n") + Md(" · ").join(
            Md("[{}]({}){{ .vt-colab }}").format(label, url(target)) if target.startswith("https://")
            else Md("[{}]({})").format(label, url(page.root + target)) for label, target in links)
    return admonition("vt-run", "Run it yourself", body, folded=True)  # folded: the lesson comes first


@notebook_form("requirements")
def requirements_notebook(page: Page) -> Md:
    # Folded, as on the page: the notebook's first screen is the lesson, not its run table.
    return Md("<details><summary>Requirements and the recorded runs</summary>\n\n{}\n\n</details>").format(
        requirements_markdown(page))
