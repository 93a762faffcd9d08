"""Figures for people, one way each: times, speed-ups, percentages, counts. Every table, report, prompt and
experiment formats through here; a figure that is missing (None, or not finite) reads as `missing`.

    seconds(0.0021)        2.100 ms       (s, ms or us with the precision each needs)
    short_seconds(0.0021)  2.1 ms         (two significant digits: what an LLM prompt shows)
    microseconds(2.1e-5)   21.0           (a table's column in us)
    speedup(1.234)         1.23x
    percent(0.125)         12%            (digits=1: 12.5%)
    number(1234.5)         1,234          (or any format: number(x, "{:.1f}"))
"""
from __future__ import annotations

import math
from decimal import Decimal

NA = "n/a"  # a missing figure in a sentence or a run's own table
DASH = "-"  # a missing figure in a cell of a table of many runs


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def seconds(value: float | None, missing: str = NA) -> str:
    """A time: s, ms or us with the precision each needs."""
    if _missing(value):
        return missing
    if value >= 1:
        return f"{value:.3f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3f} ms"
    return f"{value * 1e6:.1f} us"


def two_digits(value: float) -> str:
    """Two significant digits, and never an exponent (410, not 4.1e+02)."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    return format(Decimal(f"{value:.2g}"), "f")


def short_seconds(value: float | None, missing: str = NA) -> str:
    """A time to two significant digits: s, ms or us."""
    if _missing(value):
        return missing
    if value >= 1:
        return f"{two_digits(value)} s"
    return f"{two_digits(value * 1e6)} us" if value < 1e-3 else f"{two_digits(value * 1e3)} ms"


def microseconds(value: float | None, missing: str = DASH) -> str:
    """A time in microseconds, for a column headed (us)."""
    return missing if _missing(value) else f"{value * 1e6:,.1f}"


def speedup(value: float | None, missing: str = DASH) -> str:
    """A speed-up (a ratio of times): 1.23x. A zero is no speed-up at all: missing."""
    return missing if _missing(value) or not value else f"{value:.2f}x"


def ratio(base: float | None, new: float | None, missing: str = NA) -> str:
    """How many times faster `new` is than `base` (times), as a speed-up; missing without both."""
    return speedup(base / new if base and new else None, missing)


def percent(value: float | None, digits: int = 0, missing: str = DASH) -> str:
    """A fraction as a percentage: 0.125 -> 12% (digits=1: 12.5%)."""
    return missing if _missing(value) else f"{value:.{digits}%}"


def number(value, form: str = "{:,.0f}", missing: str = DASH) -> str:
    """A count or a rate, in `form` (thousands separated, no decimals by default)."""
    return missing if _missing(value) else form.format(value)
