"""Part X of the timing-spread diagnosis decides a hardware profile's `start_up_disturbs_timing` (which sets where
workers may start up during a timing): its verdict from the rows it measured."""
from experiments.diagnostics.diagnose_timing_spread import start_up_verdict


def row(condition, medians, cv):
    return {"condition": condition, "medians_us": medians, "cv": cv}


QUIET = [row("X quiet", [35.81, 35.81, 35.79], 0.0003), row("X quiet again", [35.81, 35.84, 35.87], 0.0007)]


def test_start_ups_that_leave_the_timed_kernel_alone_are_harmless():
    """The H200's session-12 rows."""
    verdict = start_up_verdict(QUIET + [row("X start-ups one at a time", [35.84, 35.84, 35.87], 0.0005),
                                        row("X start-ups two at a time", [35.82, 35.78, 35.81], 0.0006)])
    assert verdict["start_up_disturbs_timing"] is False and verdict["worst_shift"] < 0.002
    assert verdict["profile_line"].startswith("start_up_disturbs_timing: false")


def test_a_slowed_median_or_a_wide_spread_disturbs():
    slowed = start_up_verdict(QUIET + [row("X start-ups one at a time", [44.7, 44.9, 45.1], 0.004)])  # 25 % slower
    spread = start_up_verdict(QUIET + [row("X start-ups one at a time", [35.8, 38.5, 35.8], 0.035)])
    assert slowed["start_up_disturbs_timing"] is True and slowed["worst_shift"] > 0.2
    assert spread["start_up_disturbs_timing"] is True and spread["profile_line"].startswith(
        "start_up_disturbs_timing: true")
    assert start_up_verdict(QUIET)["start_up_disturbs_timing"] is None  # nothing measured: no verdict
