"""Numbers for readers, in bounded width.

One job: print every number that reaches a page, the search index, a
notebook, an SVG or a README. A record may hold any finite number the schema
allows (|x| up to 1e300); written with a plain format spec, -9.99e299 became
400 characters of digits and commas, on every row that showed it. Here a
number is written as people write it inside a sane range and in scientific
notation outside it, so none is wider than WIDEST characters.
"""

from __future__ import annotations

import math

FIXED_BELOW = 1e6  # |x| written with fixed decimals below this; in scientific notation from here
GROUPED_BELOW = 1e9  # |x| written with thousands separators below this
WIDEST = 13  # characters of any number written here (-999,999,999; -9.99e+299; -999999.999)


def fixed(x: float, digits: int = 2) -> str:
    """`x` with `digits` decimals (1.23), or in scientific notation from FIXED_BELOW on (1.23e+07)."""
    if not math.isfinite(x):
        return "-"
    if abs(x) < FIXED_BELOW:
        return f"{x:.{min(digits, 3)}f}"
    return f"{x:.2e}"


def number(x: float | int | None) -> str:
    """3 significant digits, thousands separated (0.000362, 4.56, 1,234), scientific where that is wide
    (.3g writes 1.23e-05 below 1e-4 by itself; from GROUPED_BELOW on, 1.23e+09)."""
    if x is None or isinstance(x, bool):
        return "-" if x is None else str(x)
    if isinstance(x, int):
        return f"{x:,}" if abs(x) < GROUPED_BELOW else f"{x:.2e}"
    if not math.isfinite(x):
        return "-"
    if abs(x) >= GROUPED_BELOW:
        return f"{x:.2e}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def exact(n: int) -> str:
    """A whole number in full, thousands separated (4,294,967,296): for a message naming a size or a count that
    must be read exactly, in a terminal or an error, never on a page (where `number` keeps it narrow)."""
    return f"{n:,}"


def seconds(x: float, digits: int = 0) -> str:
    """A duration: '12 s', '301.2 s'."""
    return f"{fixed(x, digits)} s"


def counted(n: int, noun: str, plural: str = "") -> str:
    """'1 check', '2 checks', '1,234 records': a count with its noun, singular for one (`plural` where adding
    an s is wrong: counted(n, "match", "matches"))."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
