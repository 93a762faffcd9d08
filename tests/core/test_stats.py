"""The one geometric mean and median (kernelevo.core.stats) and the places that use them: the search's logbook, the
bench's
summary, the intervals over search seeds."""
import math
from types import SimpleNamespace

import pytest

from kernelevo.core.stats import geometric_mean, median
from evo.reports.intervals import Bootstrap, geomean_interval, median_interval
from evo.evolution.toolbox import statistics


def test_the_median_of_an_even_count_is_the_mean_of_the_two_middle_values():
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5 and median([3.0, 1.0, 2.0]) == 2.0
    assert median([None, 5.0, None, 1.0]) == 3.0 and median([]) is None and median([None]) is None


def test_the_geometric_mean_is_over_the_measured_speedups():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([None, 0.0, 2.0, 8.0]) == pytest.approx(4.0)  # not measured: left out
    assert geometric_mean([]) is None and geometric_mean([None, 0.0]) is None


def test_the_logbook_median_is_the_true_median():
    """Issue 46: evo/evolution/toolbox.py took the upper middle for an even count (3 of 1, 2, 3, 4)."""
    population = [SimpleNamespace(fitness=SimpleNamespace(values=(t,))) for t in (4.0, 1.0, 3.0, 2.0)]
    record = statistics().compile(population)
    assert record["median"] == 2.5 and record["best"] == 1.0 and record["correct"] == 4
    failed = [SimpleNamespace(fitness=SimpleNamespace(values=(t,))) for t in (1.0, math.inf)]
    assert statistics().compile(failed)["median"] == math.inf  # half of them failed: no finite median


def test_the_intervals_use_the_same_median_and_geometric_mean():
    boot = Bootstrap(resamples=200)
    assert median_interval([1.0, 2.0, 3.0, 10.0], boot).value == 2.5
    assert geomean_interval([[2.0, 8.0], [1.0]], boot).value == pytest.approx(geometric_mean([4.0, 1.0]))
