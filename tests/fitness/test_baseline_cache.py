"""Nothing timed twice: a problem's baselines are measured once per problem, sizes, GPU model, policy, settings and
torch/Triton versions on a machine, kept under the kernelevo cache dir, read back by later runs and measured again
when any of those change; processes measuring the same key at once measure it once."""
import threading
import time

from conftest import SCALE_SHIFT
from fitness.measure import baseline_cache
from fitness.measure.baselines import Baseline
from fitness.evaluation.evaluator import Evaluator
from fitness.comparison.policy import load_policy
from fitness.problems.problem import resolve_problem
from fitness.settings import EvalSettings
from fitness.measure.timing import TimingStats
from hardware_profiles import load_profile

SETTINGS = EvalSettings(trials=1, timing={"interpreter_reps": 1}, prestart_worker=False, warm_judge=False)


def evaluator(cache_dir, sizes=None, policy="triton", sandbox=None) -> Evaluator:
    """An evaluator keeping its baselines in `cache_dir`; its jobs in `sandbox` (the pytest worker's) when given."""
    spec = resolve_problem(SCALE_SHIFT, sizes=sizes or {}, size_preset="test")
    return Evaluator(spec, load_policy(policy), load_profile("cpu_interpreter"), SETTINGS, device="cpu",
                     cache_dir=cache_dir, sandbox=sandbox)


def measured(ev: Evaluator) -> tuple[Baseline, int]:
    """The evaluator's baselines and how many times it measured them itself."""
    calls, measure = [], ev._measure_baseline
    ev._measure_baseline = lambda: calls.append(1) or measure()
    return ev.baseline(), len(calls)


def test_a_second_evaluator_reads_the_baselines_the_first_measured_and_a_changed_size_or_policy_measures_again(
        tmp_path, monkeypatch, sandbox):
    # each evaluator as a later run's on the same machine; one fork server for their five measurements (the
    # baselines are kept by the evaluator, in its cache_dir, not by the sandbox)
    with evaluator(tmp_path, sandbox=sandbox) as first:
        one, calls = measured(first)
    assert calls == 1 and one.cached == "" and one.eager.median_s > 0
    files = list((tmp_path / baseline_cache.FOLDER).glob("*.json"))
    assert len(files) == 1 and files[0].name.startswith("scale_shift-")
    with evaluator(tmp_path, sandbox=sandbox) as second:  # a later run on the same machine
        two, calls = measured(second)
    assert calls == 0 and two.eager == one.eager and two.status == one.status and two.notes == one.notes
    assert str(files[0]) in two.cached and "measured" in two.cached
    with evaluator(tmp_path, sizes={"batch_size": 3}, sandbox=sandbox) as resized:
        assert measured(resized)[1] == 1
    with evaluator(tmp_path, policy="strict-fp32", sandbox=sandbox) as other_policy:
        assert measured(other_policy)[1] == 1
    monkeypatch.setattr(baseline_cache, "versions", lambda: {"torch": "9.9", "triton": "9.9"})
    with evaluator(tmp_path, sandbox=sandbox) as upgraded:  # a new torch or Triton: measured again
        assert measured(upgraded)[1] == 1
    assert len(list((tmp_path / baseline_cache.FOLDER).glob("*.json"))) == 4


def fake(status="ok") -> Baseline:
    stats = TimingStats.from_samples("cuda-events", [1e-4, 2e-4])
    return Baseline(stats, stats if status == "ok" else None, ["a note"], None,
                    {"eager": "ok", "compile": status, "max_autotune": "not_measured"})


FACTS = {"problem": "level1/23_Softmax", "gpu": "NVIDIA H100", "sizes": {"dim": 4}}


def test_processes_measuring_one_key_at_once_measure_it_once(tmp_path):
    calls, got = [], []

    def measure():
        calls.append(1)
        time.sleep(0.5)  # the others arrive meanwhile
        return fake()

    threads = [threading.Thread(target=lambda: got.append(baseline_cache.cached_or_measured(tmp_path, FACTS, measure)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(calls) == 1 and len(got) == 3
    assert all(b.eager == got[0].eager for b in got) and sum(1 for b in got if b.cached) == 2
    path = baseline_cache.path_for(tmp_path, FACTS)
    assert path.parent.name == "baselines" and path.name.startswith("level1_23_Softmax-")
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]  # written whole


def test_a_failed_baseline_is_not_kept_and_an_unreadable_file_is_measured_again(tmp_path):
    calls = []
    for _ in range(2):  # a failed compile may be the machine's state that day: measured again next time
        baseline_cache.cached_or_measured(tmp_path, FACTS, lambda: calls.append(1) or fake("failed"))
    assert len(calls) == 2 and not baseline_cache.path_for(tmp_path, FACTS).exists()
    path = baseline_cache.path_for(tmp_path, FACTS)
    path.write_text("{not json")
    again = baseline_cache.cached_or_measured(tmp_path, FACTS, lambda: calls.append(1) or fake())
    assert len(calls) == 3 and again.cached == ""
    assert baseline_cache.cached_or_measured(tmp_path, FACTS, fake).cached  # replaced by a good one
