"""::releases (the Triton releases a lesson was checked under, in one line) and ::release-table (lesson x release).

The line is what a reader on another Triton wants to know first: "Checked under the interpreter with
Triton 3.4, 3.5, 3.6, 3.7, 3.8 and 3.9; on an NVIDIA H200 with Triton 3.6.", the releases it fails under
named, their reasons in a fold beside it. ::status puts both in the lesson's status line; the status
page shows every lesson under every release. All of it comes from the release records as
judge/matrix.py judged them (current source only) and, for the GPU, from the GPU record the badge rests
on; none of it changes the badge.
"""

from __future__ import annotations

from verified_triton.core.numfmt import seconds
from verified_triton.judge.matrix import DECLINED, FAILED, PASSED, ReleaseMatrix, ReleaseResult
from verified_triton.judge.releases import minor, release_tuple
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import Page, directive
from verified_triton.site.directives.common import STALE_MARK
from verified_triton.site.door import Md, text, url
from verified_triton.site.render import admonition, md_table, unindexed

MARK = {PASSED: Md("✓ passed"), DECLINED: Md("– declined by design"), FAILED: Md("✗ **failed**")}
COLUMNS = 12  # minor releases the status page's table shows, the newest (LIMITS.releases bounds the rest)


def english(items: list[str]) -> str:
    """'3.4', '3.4 and 3.5', '3.4, 3.5 and 3.6'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


def release_line(st: LessonStatus) -> Md:
    """One sentence, as escaped Markdown: the releases the interpreter runs passed, declined or failed under,
    and the GPU run the badge rests on; '' when no release has been recorded."""
    m = st.releases
    if m is None or not (m.results or m.stale):
        return Md("")
    if not m.results:
        dates = sorted({r.date for r in m.stale})
        return text(f"Checked under other Triton releases for an older source only (last on {dates[-1]}); not "
                    "repeated since the change.")
    by_state = {state: [r for r in m.results if r.state == state] for state in (PASSED, DECLINED, FAILED)}
    within = [r.minor for r in by_state[PASSED] if not r.below_requires]
    lifted = [r.minor for r in by_state[PASSED] if r.below_requires]
    parts = []
    if within:
        parts.append(f"Checked under the interpreter with Triton {english(within)}")
    if by_state[DECLINED]:
        declined = english([r.minor for r in by_state[DECLINED]])
        parts.append(f"under the interpreter with Triton {declined} it checks what a CPU can, then declines by "
                     "design" if not parts else f"declines by design under {declined}")
    if lifted:
        parts.append(f"passes under {english(lifted)} too, below the Triton {m.claimed} it requires (the kit's "
                     "version check lifted)")
    if by_state[FAILED]:
        failed = by_state[FAILED]
        below = all(r.below_requires for r in failed)
        parts.append(f"fails under {english([r.minor for r in failed])}"
                     + (f", below the Triton {m.claimed} it requires" if below and m.claimed else ""))
    sentence = ", ".join(parts)
    return text(sentence[:1].upper() + sentence[1:] + gpu_clause(st) + ".")


def gpu_clause(st: LessonStatus) -> str:
    """'; on an NVIDIA H200 with Triton 3.6' from the current GPU record the badge rests on, else ''."""
    gpu = st.modes["gpu"]
    record = gpu.record
    if record is None or not st.is_current(record) or gpu.state not in ("passed", "by-design"):
        return "; not yet on a GPU for this source" if gpu.state in ("none", "stale") else ""
    where = f"{record.env.device_name} with Triton {minor(record.env.triton)}"
    return f"; on an {where}" if gpu.state == "passed" else f"; declined by design on an {where}"


def release_rows(m: ReleaseMatrix) -> list[list[Md]]:
    return [[text(r.release), outcome_cell(r), text(f"{r.record.checks_passed} passed, {r.record.checks_failed} "
                                                     f"failed, {r.record.checks_skipped} skipped"),
             text(seconds(r.record.wall_s)),
             text(f"{r.record.date}, torch {r.record.env.torch}, numpy {r.record.env.numpy}")] for r in m.results]


def outcome_cell(r: ReleaseResult) -> Md:
    said = MARK[r.state]
    if r.below_requires:
        said += text(" (below [requires]: the kit's version check lifted)")
    if r.record.reason and r.state != PASSED:
        said += Md(": {}").format(r.record.reason)
    return said


def release_fold(st: LessonStatus, root: str, folded: bool | None = True) -> Md:
    """The per-release table under a fold beside the status line ('' when no release is recorded)."""
    m = st.releases
    if m is None or not m.results:
        return Md("")
    need = (f"lesson.toml's [requires] triton: {m.claimed}" + (f" ({m.why})" if m.why else "") if m.claimed
            else "lesson.toml states no [requires] triton")
    body = [md_table(["Release", "Interpreter run", "Checks", "Time", "Recorded, with"], release_rows(m)), Md(""),
            Md("<small>{}. Each release ran in an environment of its own: that Triton, with this machine's torch "
               "and the numpy shown. These runs are information; the badge never depends on them. "
               "[How the releases are checked]({}verification.md#other-triton-releases)</small>").format(
                need, url(root))]
    return admonition("vt-why vt-releases", Md("Triton releases"), Md("\n").join(body), folded=folded)


@directive("releases", "the Triton releases the lesson was checked under, in one line, each run folded below it "
                       "(open: shown)", flags=("open",))
def releases(page: Page, flags: frozenset[str] = frozenset()) -> Md:
    line = release_line(page.lesson)
    if not line:
        return unindexed(text("Not yet checked under other Triton releases "
                              "(.venv/bin/python tools/verify.py --matrix)."))
    fold = release_fold(page.lesson, page.root, folded=None if "open" in flags else True)
    return unindexed(Md("{}\n\n{}").format(line, fold).rstrip())


@directive("release-table", "every lesson under every Triton release of the matrix, and what it says of "
           "[requires] triton", needs_lesson=False)
def release_table(page: Page) -> Md:
    statuses = list(page.site.statuses.values())
    every = sorted({r.minor for st in statuses if st.releases for r in st.releases.results}, key=release_tuple)
    if not every:
        return Md("_{}_").format("No lesson has been checked under other Triton releases yet "
                                 "(.venv/bin/python tools/verify.py --matrix).")
    minors = every[-COLUMNS:]  # the newest: a table of every release ever recorded would not end
    rows, failures = [], []
    for st in statuses:
        m = st.releases
        results = {r.minor: r for r in (m.results if m else [])}
        cells = []
        for key in minors:
            r = results.get(key)
            if r is None:
                stale = m is not None and any(minor(s.release) == key for s in m.stale)
                cells.append(text(STALE_MARK) if stale else Md(""))
                continue
            cells.append(text(str(MARK[r.state]).split(" ")[0] + ("*" if r.below_requires else "")))
            if r.state == FAILED:
                failures.append(Md("- **{}** under Triton {}: {}").format(st.lesson.title, r.release,
                                                                           r.record.reason))
        claimed = m.claimed if m else st.lesson.requires.triton
        says = minor(m.lowest) if m and m.lowest else ""
        refused = bool(m and m.refusals)
        mark = " ✗ refused" if refused else " ≠" if says and claimed and _differs(says, claimed) else ""
        rows.append([Md("[{}]({}{})").format(st.lesson.title, url(page.root), url(st.lesson.page)), *cells,
                     text(claimed or "none"), text(says + mark)])
    table = md_table(["Lesson", *(f"Triton {k}" for k in minors), "[requires] triton", "Matrix says"], rows)
    legend = (text("✓ passed, – declined by design (the interpreter cannot run its kernels), ✗ failed; * below the "
                   f"lesson's [requires] triton, run with the kit's version check lifted; {STALE_MARK}: recorded "
                   "for an older source only.") + Md(" **Matrix says:** ")
              + text("the lowest release from which every newer one passes; ≠ where it differs from [requires] "
                     "triton; ✗ refused: verify.py --check refuses the claim, since the lesson fails under a release "
                     "it claims."))
    out = [table, Md(""), legend]
    if len(every) > len(minors):
        out += [Md(""), text(f"{len(every) - len(minors)} older release(s) recorded ({english(every[:-COLUMNS])}) are "
                         "not shown here; each lesson's page lists its own.")]
    if failures:
        out += [Md(""), admonition("abstract", Md("Why each failure failed ({})").format(len(failures)),
                                   Md("\n").join(failures), True)]
    return unindexed(Md("\n").join(out))


def _differs(says: str, claimed: str) -> bool:
    """'3.4' against lesson.toml's '3.0' or '3.4.1' (the matrix speaks in minor releases)."""
    return release_tuple(says) != (release_tuple(claimed) + (0,))[:2]
