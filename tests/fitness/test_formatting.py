"""One way to write each figure (``fitness.common.formatting``): times, speed-ups, percentages, counts; a missing figure
(None, not finite) reads as the caller's placeholder."""
import math

from fitness.common import formatting as fmt


def test_times_keep_the_precision_each_unit_needs():
    assert [fmt.seconds(v) for v in (2.5, 0.0021, 3.4e-6)] == ["2.500 s", "2.100 ms", "3.4 us"]
    assert [fmt.short_seconds(v) for v in (12.5, 0.1234, 12.5e-6)] == ["12 s", "123 ms", "12 us"]
    assert fmt.microseconds(1.2345e-3) == "1,234.5"


def test_speed_ups_percentages_and_numbers():
    assert fmt.speedup(1.234) == "1.23x" and fmt.ratio(0.004, 0.002) == "2.00x"
    assert fmt.percent(0.125) == "12%" and fmt.percent(0.125, 1) == "12.5%"
    assert fmt.number(1234.5) == "1,234" and fmt.number(0.5, "{:.2f}") == "0.50"


def test_a_missing_figure_reads_as_the_placeholder_given():
    for missing in (None, math.inf, math.nan):
        assert fmt.seconds(missing) == fmt.NA and fmt.seconds(missing, "-") == "-"
        assert fmt.speedup(missing) == fmt.DASH and fmt.percent(missing, missing="?") == "?"
        assert fmt.microseconds(missing) == fmt.DASH and fmt.number(missing) == fmt.DASH
    assert fmt.speedup(0.0, "none") == "none" and fmt.ratio(None, 1.0) == fmt.NA  # no time: no ratio
