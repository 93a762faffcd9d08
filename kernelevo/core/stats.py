"""The two summaries the search's logbook, the bench's and the experiments' tables and the confidence intervals
share, each in one place: the geometric mean (of speed-ups) and the median (the mean of the two middle values for an
even count, as ``statistics.median``)."""
from __future__ import annotations

import statistics


def geometric_mean(values) -> float | None:
    """The geometric mean of the positive values among `values` (None, or a speed-up of 0: not measured); None when
    there is none."""
    kept = [v for v in values if v is not None and v > 0]
    return statistics.geometric_mean(kept) if kept else None


def median(values) -> float | None:
    """The median of the values among `values` that are not None; None when there is none."""
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None
