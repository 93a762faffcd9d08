"""The baselines speed-ups are measured against (eager, torch.compile, torch.compile max-autotune) and the best of
them: measured from baseline jobs (here fake ones), a compiled baseline that fails or is too slow to compile reported
as such while the others stand, the speed-up over each and over the fastest named; the worker's baseline job on the
CPU, and the evaluator's on the interpreter (no compiled baseline there: not measured)."""
import pytest

from conftest import SCALE_SHIFT
from kernelevo.core.errors import KernelevoError
from fitness.measure import baselines
from fitness.workers import worker
from fitness.measure.baselines import (BASELINES, Baseline, best_text, compiling, jobs_text, measure, speedup_rows,
                                       speedup_text, stage_of, verdict)
from fitness.evaluation.evaluator import EvalSettings, Evaluator
from fitness.comparison.policy import load_policy
from fitness.problems.problem import resolve_problem
from kernelevo.core.evaluation_record import EvalResult
from fitness.measure import verdict_text
from fitness.measure.result import WorkerJob
from fitness.workers.sandbox import JobOutcome
from fitness.measure.timing import TimingStats
from hardware_profiles import load_profile


def reading(**medians) -> dict:
    return {name: TimingStats.from_samples("cuda-events", [m] * 3).to_dict() for name, m in medians.items()}


class FakeJobs:
    """Baseline jobs scripted per call: each answer is a JobOutcome, or a function of the names asked for."""

    def __init__(self, *answers):
        self.answers, self.asked = list(answers), []

    def __call__(self, names):
        self.asked.append(names)
        answer = self.answers.pop(0)
        return answer(names) if callable(answer) else answer


def ok(timing: dict, failed: dict | None = None) -> JobOutcome:
    return JobOutcome("finished", {"status": "ok", "timing": timing, "failed": failed or {}, "notes": []}, 0, "", 1.0)


def stuck(name: str, status: str = "compile_timeout") -> JobOutcome:
    return JobOutcome(status, None, -9, "", 300.0, stage=stage_of(name), compile_timeout_s=300.0)


def run_measure(jobs, names=BASELINES, processes=2):
    return measure(jobs, list(names), processes, lambda outcome: f"job {outcome.status}", 300.0)


@pytest.mark.parametrize("max_autotune_s, best", [(60e-6, "max_autotune"), (90e-6, "compile")])
def test_each_baseline_is_measured_and_the_fastest_is_the_best(max_autotune_s, best):
    jobs = FakeJobs(ok(reading(eager=130e-6, compile=85e-6, max_autotune=max_autotune_s + 5e-6)),
                    ok(reading(eager=120e-6, compile=80e-6, max_autotune=max_autotune_s)))
    baseline = run_measure(jobs)
    assert jobs.asked == [list(BASELINES)] * 2 and baseline.status == dict.fromkeys(BASELINES, "ok")
    figures = baseline.figures(40e-6)
    assert figures["eager_s"] == 120e-6 and figures["max_autotune_s"] == max_autotune_s  # the faster process's
    assert figures["speedup_vs_eager"] == pytest.approx(3.0) and figures["speedup_vs_compile"] == pytest.approx(2.0)
    assert figures["speedup_vs_max_autotune"] == pytest.approx(max_autotune_s / 40e-6)
    assert figures["best_baseline"] == best
    assert figures["speedup_vs_best"] == pytest.approx(min(80e-6, max_autotune_s) / 40e-6)


def test_a_baseline_that_fails_to_compile_is_reported_and_the_others_stand():
    jobs = FakeJobs(ok(reading(eager=120e-6, compile=80e-6), {"max_autotune": "BackendCompilerFailed: no"}),
                    ok(reading(eager=121e-6, compile=81e-6)))
    baseline = run_measure(jobs)
    assert jobs.asked == [list(BASELINES), ["eager", "compile"]]  # not compiled again in the second process
    assert baseline.status == {"eager": "ok", "compile": "ok", "max_autotune": "failed"}
    assert "baseline max_autotune (torch.compile max-autotune) failed: BackendCompilerFailed: no" in baseline.notes
    figures = baseline.figures(40e-6)
    assert figures["speedup_vs_max_autotune"] is None and figures["max_autotune_s"] is None
    assert figures["best_baseline"] == "compile" and figures["speedup_vs_best"] == pytest.approx(2.0)


@pytest.mark.parametrize("how", ["compile_timeout", "timeout"])
def test_a_baseline_too_slow_to_compile_is_stopped_and_the_job_run_again_without_it(how):
    jobs = FakeJobs(stuck("max_autotune", how), ok(reading(eager=120e-6, compile=80e-6)),
                    ok(reading(eager=119e-6, compile=82e-6)))
    baseline = run_measure(jobs)
    assert jobs.asked == [list(BASELINES), ["eager", "compile"], ["eager", "compile"]]
    assert baseline.status["max_autotune"] == "compile_timeout" and baseline.max_autotune is None
    assert baseline.eager.median_s == 119e-6 and baseline.compile.median_s == 80e-6
    (note,) = [n for n in baseline.notes if n.startswith("baseline max_autotune")]
    assert ("fitness.baseline_compile_timeout_s=300" in note) == (how == "compile_timeout") and "stand" in note
    assert speedup_text(None, baseline.status["max_autotune"]) == "too slow to compile"
    assert [job["status"] for job in baseline.jobs] == [how, "finished", "finished"]  # where the time went
    assert jobs_text(baseline.jobs[:1]).startswith(f"job 1 300 s: {how} in: {stage_of('max_autotune')[:60]}")


def test_where_each_baseline_jobs_time_went_is_kept_and_said():
    # level1/90 on an H200: 384 s of baselines for a 4 GiB cumprod, and nothing said which compile or wait it was
    result = {"status": "ok", "timing": reading(eager=1e-4, compile=8e-5), "failed": {}, "notes": [],
              "compile_s": {"compile": 41.5},
              "phases_s": {"import": 4.2, "setup": 2.0, "wait_exclusive": 30.4, "timing": 12.0, "idle": 0.3}}
    baseline = run_measure(FakeJobs(JobOutcome("finished", result, 0, "", 95.0)), ["eager", "compile"], 1)
    assert baseline.jobs == [{"wall_s": 95.0, "status": "finished", "compile_s": {"compile": 41.5}, "import": 4.2,
                              "setup": 2.0, "wait_exclusive": 30.4, "timing": 12.0}]
    assert jobs_text(baseline.jobs) == ("job 1 95 s: compile compile 42 s, import 4 s, setup 2 s, "
                                        "wait_exclusive 30 s, timing 12 s")


def test_a_job_that_fails_otherwise_ends_the_measurement_with_what_was_read():
    crashed = JobOutcome("crashed", None, -11, "", 1.0, stage="timing the baselines eager, compile")
    baseline = run_measure(FakeJobs(ok(reading(eager=120e-6, compile=80e-6, max_autotune=70e-6)), crashed))
    assert baseline.status == dict.fromkeys(BASELINES, "ok") and baseline.best() == ("max_autotune", 70e-6)
    assert "baseline timing failed in a later process: job crashed" in baseline.notes
    nothing = run_measure(FakeJobs(crashed))
    assert nothing.status == dict.fromkeys(BASELINES, "failed") and nothing.best() is None
    assert nothing.figures(1e-6)["speedup_vs_best"] is None and compiling(crashed.stage) is None


def test_the_result_and_its_texts_give_every_baseline_and_the_best_or_why_not():
    baseline = Baseline(TimingStats.from_samples("cuda-events", [1e-4]), None, [],
                        TimingStats.from_samples("cuda-events", [5e-5]),
                        {"eager": "ok", "compile": "failed", "max_autotune": "ok"})
    result = EvalResult(status="ok", timer="cuda-events", time_s=25e-6, **baseline.figures(25e-6))
    assert result.speedup_vs_eager == pytest.approx(4.0) and result.speedup_vs_best == pytest.approx(2.0)
    assert best_text(result.to_dict()) == "2.00x (torch.compile max-autotune)"
    assert ("speedup: 4.00x vs eager, failed vs torch.compile, 2.00x vs torch.compile max-autotune; 2.00x "
            "(torch.compile max-autotune) vs the best\nverdict: faster than every baseline measured") in verdict_text.summary(result)
    cpu = EvalResult(status="ok", timer="interpreter", baseline_status=dict.fromkeys(BASELINES, "not_measured"))
    assert best_text(cpu.to_dict()) == "not measured" and "speedup" not in verdict_text.summary(cpu)


@pytest.mark.parametrize("value, said", [
    (1.53, "faster than every baseline measured (1.53x over torch.compile max-autotune, the fastest)"),
    (0.86, "slower than torch.compile max-autotune (0.86x): torch.compile max-autotune is the better choice"),
    (0.993, "ties torch.compile max-autotune (0.99x, within 1%)"),
    (1.004, "ties torch.compile max-autotune (1.00x, within 1%)"),
])
def test_the_verdict_names_the_baseline_to_ship_when_the_kernel_does_not_beat_it(value, said):
    record = {"speedup_vs_best": value, "best_baseline": "max_autotune", "speedup_vs_max_autotune": value}
    assert verdict(record).startswith(said)
    assert speedup_rows(record)[-1] == ("verdict", verdict(record))


def test_no_verdict_where_no_baseline_was_measured():
    record = {"speedup_vs_best": None, "baseline_status": dict.fromkeys(BASELINES, "not_measured")}
    assert verdict(record) is None and [k for k, _ in speedup_rows(record)][-1] == "speed-up vs the best baseline"


def test_the_baselines_are_one_setting_checked_with_a_clear_error():
    assert EvalSettings().baselines == ["eager", "compile", "max_autotune"]
    with pytest.raises(KernelevoError, match=r"fitness.baselines=\['eager', 'autotune'\]: name each baseline once"):
        EvalSettings(baselines=["eager", "autotune"])
    with pytest.raises(KernelevoError, match="once"):
        EvalSettings(baselines=["eager", "eager"])
    # a run saved before fitness.baselines: its config, typed (issue 46: one place)
    from kernelevo.config.schema import run_config

    assert run_config({"fitness": {"compile_baseline": False}}).fitness.baselines == ["eager"]
    assert run_config({"fitness": {"compile_baseline": None}}).fitness.baselines == list(BASELINES)
    assert baselines.measured_here(list(BASELINES), on_gpu=False) == ["eager"]


def job(tmp_path, names) -> WorkerJob:
    spec = resolve_problem(SCALE_SHIFT, size_preset="test")
    return WorkerJob("baseline", "cpu", problem=spec.to_dict(), policy=load_policy("triton").to_dict(),
                     settings=EvalSettings(timing={"interpreter_reps": 1}, seed=0), baselines=names)


def test_the_workers_baseline_job_times_what_it_is_asked_and_names_a_compile_that_failed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the job writes its stage file in its directory

    def fake_compile(model, mode=None):
        if mode == "max-autotune-no-cudagraphs":
            raise RuntimeError("autotuning found no valid choice")
        return model

    monkeypatch.setattr(worker.torch, "compile", fake_compile)
    result = worker.run_baseline_job(job(tmp_path, list(BASELINES)))
    assert result["status"] == "ok" and set(result["timing"]) == {"eager", "compile"}
    assert result["timing"]["eager"]["timer"] == "interpreter" and result["timing"]["eager"]["median_s"] > 0
    assert result["failed"] == {"max_autotune": "RuntimeError: autotuning found no valid choice"}
    assert any("fp32 matmul precision 'high'" in n for n in result["notes"])  # TF32 as the policy says
    only_eager = worker.run_baseline_job(job(tmp_path, ["eager"]))
    assert set(only_eager["timing"]) == {"eager"} and only_eager["failed"] == {}


def test_on_the_interpreter_the_evaluator_times_eager_alone_and_no_compiled_baseline(tmp_path, sandbox):
    spec = resolve_problem(SCALE_SHIFT, size_preset="test")
    settings = EvalSettings(trials=1, timing={"interpreter_reps": 1}, prestart_worker=False, warm_judge=False)
    with Evaluator(spec, load_policy("triton"), load_profile("cpu_interpreter"), settings, device="cpu",
                   cache_dir=tmp_path, sandbox=sandbox) as ev:  # the pytest worker's fork server
        assert ev.baseline_names == ["eager"]
        baseline = ev.baseline()
    assert baseline.eager is not None and baseline.eager.timer == "interpreter"
    assert baseline.status == {"eager": "ok", "compile": "not_measured", "max_autotune": "not_measured"}
    assert "baseline max_autotune: not measured on Triton's CPU interpreter" in baseline.notes
