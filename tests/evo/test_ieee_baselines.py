"""A compiled baseline whose own kernels fail a TF32 policy is timed again with IEEE fp32 dot products, after the
search (evo/runs/run.py's measure_ieee_baselines, fitness/evaluation/evaluator.py's baseline_ieee), and the best
Triton-expressible baseline counts that time (fitness/measure/baselines.py's triton_best): level3/49's kernel was
0.79x of a TF32 max-autotune whose kernels fail the policy, and 1.00x of max-autotune with TF32 off throughout.
Baseline jobs are faked here (no GPU): what is asked of them, what is kept and what the tables say."""
import dataclasses

import pytest

from conftest import SCALE_SHIFT
from evo.benchmark.bench_report import tf32_note
from evo.records.store import RunStore
from evo.records.meta import BASELINES_IEEE, TF32_INCORRECT
from evo.reports.outcome import RunOutcome, summarise
from evo.runs.run import measure_ieee_baselines
from evo.service.replay import RecordedEvaluator
from fakes import FakeEvaluator
from fitness.comparison.policy import load_policy
from fitness.evaluation.evaluator import EvalSettings, Evaluator
from fitness.measure.baselines import Baseline, speedup_rows, triton_best
from fitness.measure.timing import TimingStats
from fitness.problems.problem import resolve_problem
from fitness.workers.sandbox import JobOutcome
from hardware_profiles import load_profile


def stats(seconds: float) -> TimingStats:
    return TimingStats.from_samples("cuda-events", [seconds] * 3)


class FakeSandbox:
    """A sandbox on the CPU whose baseline jobs answer at once, each baseline asked for at `seconds`; keeps the jobs."""
    device = "cpu"

    def __init__(self, seconds: float):
        self.seconds, self.jobs = seconds, []

    def run(self, job, timeout, **options):
        self.jobs.append(job)
        timing = {name: stats(self.seconds).to_dict() for name in job.baselines}
        return JobOutcome("finished", {"status": "ok", "timing": timing, "failed": {}, "notes": []}, 0, "", 1.0)


def evaluator(tmp_path, sandbox, policy="triton") -> Evaluator:
    ev = Evaluator(resolve_problem(SCALE_SHIFT, size_preset="test"), load_policy(policy),
                   load_profile("cpu_interpreter"), EvalSettings(prestart_worker=False, warm_judge=False),
                   device="cpu", cache_dir=tmp_path, sandbox=sandbox)
    ev.on_gpu = True  # what a GPU's evaluator does with the jobs; the jobs themselves are the fake sandbox's
    return ev


def test_the_ieee_retiming_asks_for_the_named_compiled_baselines_with_tf32_off_once_per_machine(tmp_path):
    sandbox = FakeSandbox(2e-3)
    ev = evaluator(tmp_path, sandbox)
    assert load_policy("triton").tf32  # the policy the baselines are first timed under allows TF32
    baseline = ev.baseline_ieee(["max_autotune", "eager"])  # eager is no compiled baseline: never re-timed
    assert [job.baselines for job in sandbox.jobs] == [["max_autotune"]] * 2  # BASELINE_PROCESSES fresh workers
    assert all(job.policy["tf32"] is False and job.policy["name"] == "triton" for job in sandbox.jobs)
    assert baseline.stats("max_autotune").median_s == pytest.approx(2e-3) and baseline.eager is None
    again = evaluator(tmp_path, FakeSandbox(5e-3)).baseline_ieee(["max_autotune"])  # the machine's cache
    assert again.stats("max_autotune").median_s == pytest.approx(2e-3) and again.cached
    tf32 = evaluator(tmp_path, FakeSandbox(1e-3)).baseline()  # the policy's own baselines: another cache key
    assert tf32.stats("max_autotune").median_s == pytest.approx(1e-3)


def test_no_ieee_retiming_off_a_gpu_nor_under_a_policy_without_tf32(tmp_path):
    sandbox = FakeSandbox(2e-3)
    off_gpu = evaluator(tmp_path, sandbox)
    off_gpu.on_gpu = False
    assert off_gpu.baseline_ieee(["max_autotune"]) is None
    strict = dataclasses.replace(load_policy("triton"), tf32=False)
    ieee_already = evaluator(tmp_path, sandbox)
    ieee_already.policy = strict
    assert ieee_already.baseline_ieee(["max_autotune"]) is None and sandbox.jobs == []


def test_the_run_retimes_what_its_seeding_found_once_and_the_summary_keeps_it(tmp_path):
    store = RunStore(tmp_path / "run")
    fake = FakeEvaluator(on_gpu=True)
    fake.ieee = Baseline(None, None, [], stats(0.98e-3), {"max_autotune": "ok"})
    service = type("Service", (), {"evaluators": [fake]})()
    measure_ieee_baselines(service, store)
    assert fake.asked_ieee == [] and store.get_meta(BASELINES_IEEE) is None  # no baseline failed with TF32
    store.set_meta(TF32_INCORRECT, ["max_autotune"])
    measure_ieee_baselines(service, store)
    measure_ieee_baselines(service, store)  # a resume: kept, not measured again
    assert fake.asked_ieee == [["max_autotune"]]
    assert store.get_meta(BASELINES_IEEE) == {"max_autotune": pytest.approx(0.98e-3)}
    assert summarise(store, None).baselines_ieee_s == {"max_autotune": pytest.approx(0.98e-3)}
    store.close()
    none = RunStore(tmp_path / "cpu")
    none.set_meta(TF32_INCORRECT, ["max_autotune"])
    measure_ieee_baselines(type("Service", (), {"evaluators": [FakeEvaluator()]})(), none)  # nothing measured
    assert none.get_meta(BASELINES_IEEE) is None
    none.close()


def test_a_replay_keeps_the_recorded_ieee_retiming(tmp_path):
    record = RunStore(tmp_path / "record")
    record.set_meta(BASELINES_IEEE, {"max_autotune": 0.98e-3})
    replaying = RecordedEvaluator(FakeEvaluator(on_gpu=True), record)
    assert replaying.baseline_ieee(["compile"]) is None  # the record re-timed no such baseline
    replay = RunStore(tmp_path / "replay")
    replay.set_meta(TF32_INCORRECT, ["max_autotune"])  # the replayed seeding found it again
    measure_ieee_baselines(type("Service", (), {"evaluators": [replaying]})(), replay)
    assert replay.get_meta(BASELINES_IEEE) == {"max_autotune": pytest.approx(0.98e-3)}  # nothing measured
    replay.close()
    replaying.close()


def test_the_best_triton_expressible_baseline_counts_the_ieee_time_and_the_tables_say_both():
    # shaped as level3/49's (figures of its own): the kernel (IEEE dots) 1.24 ms, max-autotune 0.98 ms with TF32 and
    # 1.23 ms with IEEE fp32 dots, torch.compile (TF32 kernels that pass) 1.12 ms
    record = {"best_s": 1.24e-3, "speedup_vs_eager": 6.0, "speedup_vs_compile": 0.9,
              "speedup_vs_max_autotune": 0.98 / 1.24, "speedup_vs_best": 0.98 / 1.24, "best_baseline": "max_autotune",
              "baseline_library": {"compile": [], "max_autotune": []},
              "baseline_status": dict.fromkeys(("eager", "compile", "max_autotune"), "ok")}
    assert triton_best(record) == ("max_autotune", pytest.approx(0.79, abs=0.01))  # not re-timed: as timed
    ieee = {**record, "baselines_tf32_incorrect": ["max_autotune"], "baselines_ieee_s": {"max_autotune": 1.23e-3}}
    assert triton_best(ieee) == ("compile", pytest.approx(0.9))  # max-autotune at IEEE: 0.99x, compile the best
    rows = dict(speedup_rows(ieee))
    assert rows["speed-up vs torch.compile max-autotune"] == "0.79x"  # what a user would ship stays said
    assert rows["speed-up vs torch.compile max-autotune with IEEE fp32 dots"] == "0.99x"
    assert "with IEEE fp32 dots" not in " ".join(dict(speedup_rows(record)))
    outcome = RunOutcome(**ieee)
    assert tf32_note(outcome) == ("torch.compile max-autotune: Inductor's kernels for it were incorrect with TF32 "
                                  "dot products (as seeds), yet it is timed with TF32; with IEEE fp32 dots: 0.99x "
                                  "over torch.compile max-autotune (1.23 ms)")
