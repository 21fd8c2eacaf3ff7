"""::output — what each recorded run printed, in tabs (the GPU run first), with machine and date."""

from __future__ import annotations

from verified_triton.core.numfmt import seconds
from verified_triton.site.directives import Page, directive
from verified_triton.site.directives.common import gpu_first, mode_label, stale_note
from verified_triton.site.render import clean_output, code_block, indent_block, text

# Recorded output is evidence, not prose: kept out of the search index (it filled it with logs). The mark
# sits on the code block itself: Material's indexer compares elements by tag, so an excluded <div> stops
# being excluded at the first inner </div> (the tabs' own), and a wrapper would not survive md_in_html.
OUTPUT_ATTRS = '{ .text .vt-output data-search-exclude="1" }'
# A run that kept its output step by step shows each step's part under the section of that step: here,
# at the end, only the tail of the whole log, and a link to all of it as a text file the site publishes
# (mkdocs_hooks.on_files), so the page does not carry every line twice.
TAIL_LINES = 12


def log_uri(record) -> str:
    """Where the site publishes a record's whole standard output as text."""
    return f"evidence/{record.lesson}/{record.key}.stdout.txt"


def log_text(record) -> str:
    return (clean_output(record.stdout) or "(nothing)") + "\n"


def stdout_body(page: Page, record) -> list[str]:
    whole = clean_output(record.stdout) or "(nothing)"
    lines = whole.split("\n")
    if page.notebook or not record.steps or len(lines) <= TAIL_LINES:
        return ["Standard output:\n", code_block(whole, "", OUTPUT_ATTRS)]
    return [f"Standard output: each step's part is under its section above; here its last {TAIL_LINES} of "
            f"{len(lines)} lines, and [all of it as text]({page.root}{log_uri(record)}).\n",
            code_block("\n".join(lines[-TAIL_LINES:]), "", OUTPUT_ATTRS)]


def environment_line(record) -> str:
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
    return f"{text(' · '.join(parts))}  \nCommand: <code>{text(record.command)}</code>"


def filtered_warnings(record) -> str:
    """The warnings the lesson expected and kept out of stderr: each with its count and why."""
    items = []
    for w in record.filtered_warnings:
        times = "once" if w.count == 1 else f"{w.count} times"
        shown = w.example or w.text
        items.append(f"- {times}: <code>{text(shown)}</code>  \n  {text(w.why)}")
    total = sum(w.count for w in record.filtered_warnings)
    return (f"Expected warnings the lesson counted instead of printing ({total} in all; "
            "`lesson.expect_warning`):\n\n" + "\n".join(items))


@directive("output", "what each recorded run printed, in tabs, GPU first, with machine, versions and date")
def output(page: Page) -> str:
    st = page.lesson
    records = gpu_first(st)
    if not records:
        return '!!! vt-unverified "No recorded runs"\n    Nothing has been recorded for this lesson yet.'
    out = []
    for record in records:
        label = text(mode_label(record)) + ("" if st.is_current(record) else " (older source)")
        out.append(f'=== "{label}"\n')
        body = [environment_line(record), ""]
        note = stale_note(st, record)
        if note:
            body += [note, ""]
        if record.skipped_parts:
            items = "; ".join(f"{p.part} ({p.reason})" for p in record.skipped_parts)
            body += [f"Not run here: {text(items)}", ""]
        body += stdout_body(page, record)
        if record.stdout_omitted:
            body.append(f"\n{record.stdout_omitted} bytes of standard output were not kept.")
        if record.stderr.strip():
            body += ["", "Standard error:\n", code_block(clean_output(record.stderr), "", OUTPUT_ATTRS)]
        if record.filtered_warnings:
            body += ["", filtered_warnings(record)]
        out.append(indent_block("\n".join(body), "    "))
        out.append("")
    interp = st.lesson.modes["interpreter"]
    if not interp.supported:
        out.append(f'!!! note "Interpreter"\n    This lesson does not run under the interpreter: {text(interp.reason)}')
    if not any(r.mode == "gpu" for r in records):
        out.append('!!! note "GPU"\n    No GPU run has been recorded for this lesson.')
    # Not wrapped in <div markdown data-search-exclude>: md_in_html parses that div's content as HTML
    # before the tabs' fenced blocks are read, so a recorded "</div>" closed it and the rest of the
    # output became page markup (tests/test_hostile.py).
    return "\n".join(out).rstrip() + "\n"
