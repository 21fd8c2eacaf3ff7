"""A stand-in for the judge's status headline, until helper `trust` lands `LessonStatus.headline` and
`LessonStatus.by_design` (tools/verified_triton/judge/status.py). Delete this module after that merge and
read the two attributes directly; nothing else depends on it.

Once the judge has them, its values are used as they are; until then a rough headline is made here from
the judgement, in the same shape (at most 30 words, without the link to the record).
"""

from __future__ import annotations

from verified_triton.judge.status import PARTIAL, VERIFIED, LessonStatus

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def by_design(st: LessonStatus) -> bool:
    """Whether a PARTIALLY VERIFIED lesson is partial by design (no evidence missing)."""
    given = getattr(st, "by_design", None)
    if given is not None:
        return bool(given)
    states = {st.modes["interpreter"].state, st.modes["gpu"].state}
    return st.status is PARTIAL and "by-design" in states and "passed" in states \
        and st.modes["sanitize"].state in ("passed", "not-supported", "not-required", "by-design")


def headline(st: LessonStatus) -> str:
    given = getattr(st, "headline", None)
    if given:
        return str(given)
    gpu = st.modes["gpu"].record if st.modes["gpu"].state == "passed" else None
    model = gpu.env.device_name.replace("NVIDIA ", "").split(" ")[0] if gpu else ""
    ran = [f"on an {model}" if model else "", "under the interpreter"
           if st.modes["interpreter"].state == "passed" else ""]
    dates = [r.date for r in st.current]
    when = f", {MONTHS[int(max(dates)[5:7]) - 1]} {max(dates)[:4]}" if dates else ""
    checks = sum(c.status == "pass" for r in st.current for c in r.checks)
    word = {VERIFIED: "Verified", PARTIAL: "Partly verified"}.get(st.status, st.status.label.capitalize())
    where = " and ".join(w for w in ran if w)
    line = f"{word}: ran {where}{when}; {checks} checks passed." if where else f"{word}: {st.summary}."
    if st.status is PARTIAL and not by_design(st):
        line += " Memory check incomplete." if st.modes["sanitize"].state != "passed" else ""
    return " ".join(line.split()[:30])
