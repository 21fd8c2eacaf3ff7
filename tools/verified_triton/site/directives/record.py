"""The record page's own directives (site/record_page.py): ::record-verdict, ::record-runs, ::record-predictions.

The rest of the record page is the directives the lesson pages carried (::checks, ::output,
::benchmarks history, ::memory-check open, ::releases open). None of these has a notebook form: a notebook
follows the lesson page, never its record.
"""

from __future__ import annotations

import posixpath

from verified_triton.core.numfmt import seconds
from verified_triton.judge.evidence import Record
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import DirectiveError, Page, directive
from verified_triton.site.directives.common import STALE_MARK, gpu_first
from verified_triton.site.directives.predictions import authored_explanations, prediction_block
from verified_triton.site.door import Md, code, text, url
from verified_triton.site.render import admonition, badge, md_table, unindexed

MODE_WORDS = {"interpreter": "Interpreter (CPU)", "gpu": "GPU", "sanitize": "Memory check (GPU)"}


@directive("record-verdict", "the record page's verdict: the badge, the status line, its whole reason and the "
                             "source it was judged for")
def record_verdict(page: Page) -> Md:
    st = page.lesson
    back = url(posixpath.relpath(st.lesson.page, posixpath.dirname(page.src_uri) or "."))
    lines = [Md("{} {}").format(badge(st.status, st.by_design), st.headline), Md(""),
             Md("**Why this badge.** {}").format(st.sentence), Md(""),
             Md("**What was verified:** {}.").format(st.summary), Md(""),
             Md("**Source:** SHA-256 {}: the lesson file, the local modules it imports and what `lesson.toml` "
                "says about running it.").format(code(st.source_hash)), Md("")]
    if st.stale:
        lines += [Md("Rows and figures from a run of an older source are marked {}, here and on the lesson "
                     "page: they count for nothing, and are shown for reference.").format(STALE_MARK), Md("")]
    lines.append(Md("[← Back to the lesson]({}) · [How verification works]({})").format(
        back, url(page.root + "verification.md")))
    return unindexed(Md("\n").join(lines))


def run_row(st: LessonStatus, record: Record) -> list[Md]:
    env = record.env
    machine = "the CPU" if record.mode == "interpreter" else env.device_name or "an unnamed GPU"
    if env.capability:
        machine += f" (compute capability {env.capability})"
    versions = [f"Python {env.python}", f"torch {env.torch}", f"Triton {env.triton}"]
    versions += [f"CUDA {env.cuda}"] if env.cuda else []
    versions += [f"driver {env.driver}"] if env.driver else []
    if record.sanitizer is not None:
        versions.append(f"compute-sanitizer {record.sanitizer.version.split(' ')[0]}")
    outcome = record.outcome + (f" (exit {record.exit_code})" if record.exit_code is not None else "")
    source = code(record.source_hash[:12]) + (Md("") if st.is_current(record) else Md(" {}").format(STALE_MARK))
    return [text(MODE_WORDS.get(record.mode, record.mode)), text(outcome),
            text(record.started_utc.replace("T", " ").replace("Z", " UTC")), text(machine),
            text(", ".join(versions)), text(seconds(record.wall_s, 1)), source]


@directive("record-runs", "every recorded run of the lesson (interpreter, GPU, memory check): outcome, date, "
                          "machine, versions, time and the source hash it ran")
def record_runs(page: Page) -> Md:
    st = page.lesson
    records = gpu_first(st) + sorted(st.sanitize_records, key=lambda r: (not st.is_current(r), r.key))
    if not records:
        return Md("_Nothing has been recorded for this lesson yet._")
    table = md_table(["Run", "Outcome", "Started", "Machine", "Versions", "Took", "Source"],
                     [run_row(st, r) for r in records])
    commands = Md("\n").join(Md("- {}: {}").format(MODE_WORDS.get(r.mode, r.mode), code(r.command))
                             for r in records if r.command)
    return unindexed(Md("{}\n\n{}").format(table, admonition("abstract", "The command of each run", commands,
                                                                folded=True) if commands else Md("")))


@directive("record-predictions", "every prediction the lesson made, against what the GPU run measured, with the "
                                 "lesson page's explanation of a miss")
def record_predictions(page: Page) -> Md:
    st = page.lesson
    names = list(dict.fromkeys(p.name for r in gpu_first(st) for p in r.predictions))
    if not names:
        return Md("_This lesson makes no prediction._")
    explained = authored_explanations(page)
    out = []
    for name in names:
        page.shown.add(f"prediction:{name}")
        try:
            kind, title, block = prediction_block(page, name, explained.get(name, ""), machine=True)
        except DirectiveError:  # a miss the lesson page does not explain: its own page check names it
            kind, title, block = prediction_block(page, name, "The lesson page does not explain this miss yet.",
                                                 machine=True)
        out.append(admonition(kind, title, block))
    return Md("\n\n").join(out)
