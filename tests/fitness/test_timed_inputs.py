"""The candidate's timed calls each get a fresh draw of the inputs (so a result cached by input content never hits),
drawn outside the timed region, and a seeded sample of them is checked against the reference (in-process, CPU)."""
import importlib.util

import pytest
import torch

from conftest import CANDIDATES, SCALE_SHIFT
from fitness.judge.checks import Verdict
from fitness.judge.inputs import make_inputs
from fitness.comparison.policy import load_policy
from fitness.problems.problem import call_get_init_inputs, load_problem, resolve_problem
from fitness.judge.timed_inputs import SEED_OFFSET, FreshInputs
from fitness.measure.timing import Rotation, WallClockTimer


@pytest.fixture(scope="module")
def problem():
    return load_problem(resolve_problem(SCALE_SHIFT))


def feed_for(problem, checked=3, seed=7, reference=None):
    reference = reference or problem.Model(*call_get_init_inputs(problem))
    return FreshInputs(problem, "cpu", seed, reference, load_policy("triton"), checked=checked)


def fingerprint(x: torch.Tensor) -> tuple:
    flat = x.reshape(-1)
    return tuple(flat[::max(1, flat.numel() // 8)][:8].tolist())


def test_no_call_sees_inputs_an_earlier_call_or_a_correctness_trial_saw(problem):
    feed, seen = feed_for(problem), []
    WallClockTimer(reps=20, warmup_calls=5).measure(lambda x: seen.append(x.clone()) or x * 2.0 + 1.0, feed)
    trials = [make_inputs(problem, 7 + t, "cpu")[0] for t in range(5)]
    prints = [fingerprint(x) for x in trials + seen]
    assert len(seen) == 25 and len(set(prints)) == len(prints)
    assert feed.summary()["timed_calls"] == 25
    again = make_inputs(problem, 7 + SEED_OFFSET + 3, "cpu")[0]  # the job's secret seed reproduces every draw
    assert torch.equal(again, seen[3])


def test_the_draws_and_the_checks_are_outside_the_timed_region(problem, monkeypatch):
    from fitness.measure import timing

    clock = {"now": 0.0}  # the timer's clock, which only a draw moves: a timed call that held a draw would show it
    monkeypatch.setattr(timing, "_perf_counter", lambda: clock["now"])

    class SlowFeed(FreshInputs):
        def next(self):
            clock["now"] += 1.0
            return super().next()

    reference = problem.Model(*call_get_init_inputs(problem))
    feed = SlowFeed(problem, "cpu", 3, reference, load_policy("triton"), checked=4)
    stats = WallClockTimer(reps=4, warmup_calls=1).measure(lambda x: x * 2.0 + 1.0, feed)
    assert stats.n == 4 and stats.max_s == 0.0 and clock["now"] == 5.0  # five draws, none in a timed call
    assert feed.draw_s > 0
    assert feed.summary()["timed_outputs_checked"] == [0, 1, 2, 3] and feed.check_s > 0


def test_a_checked_call_allocates_nothing_an_unchecked_one_does_not(problem):
    feed, copies = feed_for(problem, checked=2), []

    def call(x):
        copies.append((id(feed.saved), feed.saved[0].data_ptr()))  # what the call could observe of the judge's copy
        return x * 2.0 + 1.0

    WallClockTimer(reps=6, warmup_calls=2).measure(call, feed)
    assert len(feed.summary()["timed_outputs_checked"]) == 2 and len(set(copies)) == 1  # one buffer, made once


def load_attack():
    spec = importlib.util.spec_from_file_location("content_cache_attack", CANDIDATES / "content_cache.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cache_keyed_by_input_content_hits_on_rotated_sets_and_never_on_fresh_draws(problem):
    attack = load_attack()
    model = attack.ModelNew(2.0)
    sets = [make_inputs(problem, 1000 + j, "cpu") for j in range(3)]
    WallClockTimer(reps=9, warmup_calls=3).measure(model, Rotation(sets))
    assert attack.HITS[0] == 9  # the three sets were seen in the warm-up: every measured call was a cache hit
    attack.HITS[0] = 0
    feed = feed_for(problem, checked=9)
    WallClockTimer(reps=9, warmup_calls=3).measure(model, feed)
    assert attack.HITS[0] == 0 and feed.summary()["timed_outputs_checked"] == list(range(9))


def test_a_wrong_answer_on_a_sampled_call_is_incorrect_and_the_sample_is_seeded(problem):
    calls = []

    def wrong_on_call_5(x):
        calls.append(x)
        return x * 2.0 + (0.0 if len(calls) == 1 + 5 + 1 else 1.0)  # warm-up, five measured calls, then wrong

    with pytest.raises(Verdict) as caught:
        WallClockTimer(reps=10, warmup_calls=1).measure(wrong_on_call_5, feed_for(problem, checked=10))
    assert caught.value.status == "incorrect"
    assert "differs from the reference (measured timed call 5)" in caught.value.reason
    samples = []
    for seed in (11, 11, 12):
        feed = feed_for(problem, checked=3, seed=seed)
        WallClockTimer(reps=30, warmup_calls=1).measure(lambda x: x * 2.0 + 1.0, feed)
        samples.append(feed.summary()["timed_outputs_checked"])
    assert len(samples[0]) == 3 and samples[0] == samples[1] != samples[2]
    quiet = feed_for(problem, checked=0)
    WallClockTimer(reps=3, warmup_calls=1).measure(lambda x: x * 0.0, quiet)  # nothing checked: nothing seen
    assert quiet.summary()["timed_outputs_checked"] == []


def test_modifying_the_inputs_on_a_sampled_call_is_rejected(problem):
    def zeroes_input(x):
        y = x * 2.0 + 1.0
        x.zero_()
        return y

    with pytest.raises(Verdict) as caught:
        WallClockTimer(reps=2, warmup_calls=1).measure(zeroes_input, feed_for(problem, checked=1))
    assert caught.value.status == "rejected" and "modified its input(s) [0] while timed" in caught.value.reason


def test_rotation_feeds_the_sets_in_turn_and_restarts_for_the_measured_calls():
    feed = Rotation([["a"], ["b"], ["c"]])
    assert [feed.next() for _ in range(4)] == [["a"], ["b"], ["c"], ["a"]] and len(feed) == 3
    feed.begin(2)
    assert feed.next() == ["a"]
    with pytest.raises(ValueError, match="at least one input set"):
        Rotation([])
