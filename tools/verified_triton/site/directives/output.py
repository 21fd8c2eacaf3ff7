"""::output — what each recorded run printed, in tabs (the GPU run first), with machine and date.

`::output folded` puts the tabs one click away, under "What each run printed" (a page whose steps show
their own output needs the whole log only on purpose).
"""

from __future__ import annotations

from verified_triton.core.numfmt import seconds
from verified_triton.site.directives import Page, directive
from verified_triton.site.directives.common import gpu_first, mode_label, stale_note
from verified_triton.site.door import Md, clean_output, code_block, indent, text, url
from verified_triton.site.render import admonition

# Recorded output is evidence, not prose: kept out of the search index (it filled it with logs). The mark
# sits on the code block itself: Material's indexer compares elements by tag, so an excluded <div> stops
# being excluded at the first inner </div> (the tabs' own), and a wrapper would not survive md_in_html.
OUTPUT_ATTRS = Md('{ .text .vt-output data-search-exclude="1" }')
# A run that kept its output step by step shows each step's part under the section of that step: here,
# at the end, only the tail of the whole log, and a link to all of it as a text file the site publishes
# (mkdocs_hooks.on_files), so the page does not carry every line twice.
TAIL_LINES = 12


def log_uri(record) -> str:
    """Where the site publishes a record's whole standard output as text."""
    return f"evidence/{record.lesson}/{record.key}.stdout.txt"


def log_text(record) -> str:
    return (clean_output(record.stdout) or "(nothing)") + "\n"


def stdout_body(page: Page, record) -> list[Md]:
    whole = clean_output(record.stdout) or "(nothing)"
    lines = whole.split("\n")
    if page.notebook or not record.steps or len(lines) <= TAIL_LINES:
        return [Md("Standard output:\n"), code_block(whole, "", OUTPUT_ATTRS)]
    return [Md("Standard output: each step's part is under its section of the lesson; here its last {} of {} "
               "lines, and [all of it as text]({}).\n").format(TAIL_LINES, len(lines),
                                                                url(page.root + log_uri(record))),
            code_block("\n".join(lines[-TAIL_LINES:]), "", OUTPUT_ATTRS)]


def environment_line(record) -> Md:
    env = record.env
    parts = [f"Ran {record.started_utc.replace('T', ' ').replace('Z', ' UTC')}",
             f"on {env.device_name}" + (f" (compute capability {env.capability})" if env.capability else ""),
             f"Python {env.python}", f"torch {env.torch}", f"Triton {env.triton}"]
    if env.cuda:
        parts.append(f"CUDA {env.cuda}")
    if env.driver:
        parts.append(f"driver {env.driver}")
    parts.append(f"outcome {record.outcome}" + (f" (exit {record.exit_code})" if record.exit_code is not None else ""))
    parts.append(seconds(record.wall_s, 1))
    return Md("{}  \nCommand: <code>{}</code>").format(" · ".join(parts), record.command)


def filtered_warnings(record) -> Md:
    """The warnings the lesson expected and kept out of stderr: each with its count and why."""
    items = []
    for w in record.filtered_warnings:
        times = "once" if w.count == 1 else f"{w.count} times"
        shown = w.example or w.text
        items.append(Md("- {}: <code>{}</code>  \n  {}").format(times, shown, w.why))
    total = sum(w.count for w in record.filtered_warnings)
    return Md("Expected warnings the lesson counted instead of printing ({} in all; `lesson.expect_warning`):"
              "\n\n{}").format(total, Md("\n").join(items))


@directive("output", "what each recorded run printed, in tabs, GPU first, with machine, versions and date "
           "(folded: one click away)", flags=("folded",))
def output(page: Page, flags: frozenset[str] = frozenset()) -> Md:
    shown = output_markdown(page)
    if "folded" not in flags or not page.lesson.records:
        return shown
    return admonition("abstract", "What each run printed: its machine, versions and output", shown, folded=True)


def output_markdown(page: Page) -> Md:
    st = page.lesson
    records = gpu_first(st)
    if not records:
        return Md('!!! vt-unverified "No recorded runs"\n    Nothing has been recorded for this lesson yet.')
    out = []
    for record in records:
        label = text(mode_label(record)) + ("" if st.is_current(record) else " (older source)")
        out.append(Md('=== "{}"\n').format(label))
        body = [environment_line(record), Md("")]
        note = stale_note(st, record)
        if note:
            body += [note, Md("")]
        if record.skipped_parts:
            items = "; ".join(f"{p.part} ({p.reason})" for p in record.skipped_parts)
            body += [Md("Not run here: {}").format(items), Md("")]
        body += stdout_body(page, record)
        if record.stdout_omitted:
            body.append(Md("\n{} bytes of standard output were not kept.").format(record.stdout_omitted))
        if record.stderr.strip():
            body += [Md(""), Md("Standard error:\n"), code_block(clean_output(record.stderr), "", OUTPUT_ATTRS)]
        if record.filtered_warnings:
            body += [Md(""), filtered_warnings(record)]
        out.append(indent(Md("\n").join(body), "    "))
        out.append(Md(""))
    interp = st.lesson.modes["interpreter"]
    if not interp.supported:
        out.append(Md('!!! note "Interpreter"\n    This lesson does not run under the interpreter: {}').format(
            interp.reason))
    if not any(r.mode == "gpu" for r in records):
        out.append(Md('!!! note "GPU"\n    No GPU run has been recorded for this lesson.'))
    # Not wrapped in <div markdown data-search-exclude>: md_in_html parses that div's content as HTML
    # before the tabs' fenced blocks are read, so a recorded "</div>" closed it and the rest of the
    # output became page markup (tests/test_hostile.py).
    return Md("\n").join(out).rstrip() + Md("\n")
