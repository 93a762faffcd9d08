"""Uncertainty over repeated search seeds (evo/reports/intervals.py): the median's percentile-bootstrap interval and the
two-stage interval of the geometric mean, seeded and shrinking with more seeds; one seed says it has no interval.
A bench over seeds (`--seeds N`: its tasks, rows and table) and a multirun over `search.seed` group their runs per
problem. The anytime curve (evo/reports/anytime.py) on a hand-made history and from a run store, and in the reports."""
import json

import numpy as np
import pytest

from kernelevo.core.errors import KernelevoError
from evo.benchmark import bench, selection
from evo.reports.anytime import Step, best_so_far, curve, llm_axis, run_curve
from evo.benchmark.bench import Row
from evo.benchmark.bench_report import write_bench_report
from evo.reports.intervals import Bootstrap, Interval, geomean_interval, median_interval, seed_summary
from evo.benchmark.multirun import write_multirun_report
from evo.reports.outcome import RunOutcome
from evo.records.store import RunStore
from kernelevo.core.evaluation_record import EvalResult
from kernelevo.cli import seed_sweep, seeds_option

BOOT = Bootstrap(confidence=0.95, resamples=2000, seed=0)


def width(interval: Interval) -> float:
    return interval.high - interval.low


def test_the_median_s_interval_holds_the_median_is_seeded_and_shrinks_with_more_seeds():
    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 9):
        values = np.exp(rng.normal(0.4, 0.3, size=n))
        found = median_interval(values, BOOT)
        assert found.low <= found.value <= found.high and found.n == n
        assert found.value == pytest.approx(np.median(values))
        assert found.low >= values.min() and found.high <= values.max()  # a median never leaves the sample
    values = np.exp(rng.normal(0.4, 0.3, size=40))
    assert median_interval(values, BOOT) == median_interval(values, BOOT)  # the same seed, the same interval
    other = median_interval(values, Bootstrap(0.95, 2000, seed=1))
    assert other != median_interval(values, BOOT) and other.value == median_interval(values, BOOT).value
    few, many = median_interval(values[:4], BOOT), median_interval(values, BOOT)
    assert width(many) < width(few) / 2
    assert width(median_interval(values, Bootstrap(0.5, 2000, 0))) < width(many)  # less confidence, narrower


def test_one_seed_has_no_interval_and_says_so():
    one = median_interval([1.7], BOOT)
    assert (one.value, one.low, one.high, one.n) == (1.7, None, None, 1)
    assert one.text() == "1.70x (one seed: no interval)"
    assert median_interval([], BOOT) is None
    alone = geomean_interval([[2.0], [8.0]], BOOT)  # two problems, one seed each: the seeds' spread is unknown
    assert alone.value == pytest.approx(4.0) and alone.low is None and alone.high is None


def test_the_geometric_mean_is_over_problems_and_its_interval_resamples_problems_then_seeds():
    found = geomean_interval([[2.0, 8.0], [1.0]], BOOT)  # per problem 4x and 1x: 2x over the table
    assert found.value == pytest.approx(2.0) and found.n == 3 and found.low <= 2.0 <= found.high
    assert geomean_interval([[2.0, 2.0], [2.0, 2.0]], BOOT).low == pytest.approx(2.0)  # nothing varies
    problems = geomean_interval([[1.0, 1.0], [4.0, 4.0]], BOOT)  # the seeds agree; which problems were drawn counts
    assert (problems.low, problems.high) == (pytest.approx(1.0), pytest.approx(4.0))
    seeds = geomean_interval([[1.0, 4.0]], BOOT)  # one problem: its seeds' spread alone
    assert (seeds.low, seeds.high) == (pytest.approx(1.0), pytest.approx(4.0))
    assert geomean_interval([[], [3.0, 3.0]], BOOT).value == pytest.approx(3.0)  # no correct seed: left out
    assert geomean_interval([[], []], BOOT) is None
    rng = np.random.default_rng(3)
    runs = np.exp(rng.normal(0.3, 0.25, size=(12, 10)))
    few, many = geomean_interval(runs[:3, :2], BOOT), geomean_interval(runs, BOOT)
    assert many == geomean_interval(runs, BOOT) and width(many) < width(few)


def test_the_bootstrap_settings_live_in_conf_and_bad_ones_are_named():
    assert Bootstrap.default() == Bootstrap(0.95, 2000, 0)  # conf/intervals.yaml
    with pytest.raises(KernelevoError, match="intervals.confidence=95 is not a probability"):
        Bootstrap(95, 2000, 0)
    with pytest.raises(KernelevoError, match="intervals.resamples=10 is too few"):
        Bootstrap(0.95, 10, 0)


def gpu_summary(eager: float, compile_: float, anytime: dict | None = None, **more) -> RunOutcome:
    return RunOutcome(status="ok", timer="cuda-events", speedup_vs_eager=eager, speedup_vs_compile=compile_,
                      evaluations=10, anytime=anytime or {"columns": [], "points": []}, **more)


def point(evaluations, gpu_s, cost, calls, eager, compile_) -> dict:
    return {"evaluations": evaluations, "gpu_s": gpu_s, "llm_cost_usd": cost, "llm_calls": calls,
            "speedup_vs_eager": eager, "speedup_vs_compile": compile_}


def test_a_table_over_seeds_gives_each_problem_s_median_and_the_geometric_mean_with_intervals(tmp_path):
    curve_of = lambda best: {"columns": ["speedup_vs_eager", "speedup_vs_compile"],  # noqa: E731
                             "points": [point(1, 1.0, 0.0, 0, 1.0, 0.9), point(9, 30.0, 0.2, 4, best, best * 0.9)]}
    eager = {"softmax": [1.4, 1.5, 1.9], "matmul": [0.9, 1.1, 1.0]}
    rows = [Row(name, "ok", summary=gpu_summary(v, v * 0.8, curve_of(v), speedup_vs_max_autotune=v * 0.7),
                search_seed=seed) for name, values in eager.items() for seed, v in enumerate(values)]
    rows.append(Row("broken", "failed", "exit code 1", search_seed=0))
    summary = write_bench_report(tmp_path, rows, "over seeds", {}, boot=BOOT)
    intervals = json.loads((tmp_path / "bench.json").read_text())["summary"]["intervals"]
    assert intervals == summary["intervals"] and intervals["seeds"] == 3 and intervals["resamples"] == 2000
    # every speed-up column the rows carry, a baseline added later included
    assert intervals["columns"] == ["speedup_vs_eager", "speedup_vs_compile", "speedup_vs_max_autotune"]
    softmax, matmul, broken = intervals["problems"]
    assert softmax["speedup_vs_eager"]["value"] == 1.5 and softmax["seeds"] == [0, 1, 2] and softmax["correct"] == 3
    assert softmax["speedup_vs_eager"]["low"] <= 1.5 <= softmax["speedup_vs_eager"]["high"]
    assert broken["correct"] == 0 and broken["speedup_vs_eager"] is None
    mean = intervals["geomean"]["speedup_vs_eager"]
    assert mean["value"] == pytest.approx(geomean_interval([eager["softmax"], eager["matmul"]], BOOT).value)
    table = (tmp_path / "bench.md").read_text()
    assert "| softmax seed 1 | ok |" in table and "## Speed-ups over 3 search seeds" in table
    assert "- correct: 6 of 7 runs (3 problems x up to 3 search seeds) (86%)" in table
    assert f"| softmax | 3 of 3 | {Interval(**softmax['speedup_vs_eager']).text()} |" in table
    assert "| broken | 0 of 1 | - | - | - |" in table
    assert f"geometric mean vs eager: {Interval(**mean).text()}" in table
    assert "resamples the problems with replacement and, for each problem drawn, its seeds" in table
    page = (tmp_path / "bench.html").read_text()
    assert "<h2>Speed-ups over 3 search seeds</h2>" in page and "vs max-autotune: median [interval]" in page
    assert page.count("<h3>") == 2 and "<h3>softmax</h3><img alt='softmax: best speed-up so far'" in page

    one = [Row(name, "ok", summary=gpu_summary(values[0], values[0])) for name, values in eager.items()]
    write_bench_report(tmp_path, one, "one seed", {}, boot=BOOT)
    table = (tmp_path / "bench.md").read_text()
    assert "one search seed per problem: no confidence interval" in table and "Speed-ups over" not in table
    assert "[" not in table.split("|")[0]  # no interval printed anywhere in the notes


def test_a_bench_over_seeds_runs_each_problem_once_per_seed_in_its_own_folders(tmp_path):
    tasks = selection.select(None, None, ["row_softmax", "rmsnorm"], ("search=tiny", "search.seed=9"))
    assert selection.with_seeds(tasks, 1, 0) == tasks  # one seed: the bench as before
    seeded = selection.with_seeds(tasks, 2, 5)
    assert [(t.name, t.seed, t.slug) for t in seeded] == [
        ("row_softmax", 5, "row_softmax__seed5"), ("row_softmax", 6, "row_softmax__seed6"),
        ("rmsnorm", 5, "rmsnorm__seed5"), ("rmsnorm", 6, "rmsnorm__seed6")]
    assert seeded[1].overrides == ("search=tiny", "search.seed=6")  # the seed the bench gives, and only it
    for bad in (0, 2.5, "2", True):
        with pytest.raises(bench.BenchError, match=f"bench.seeds={bad}: give the number of search seeds"):
            selection.with_seeds(tasks, bad, 0)
    ran = []

    class Backend:
        def describe(self):
            return "fake"

        def run(self, todo, bench_dir, done):
            for t in todo:
                ran.append(t.slug)
                done(t, Row(t.name, "ok", summary=gpu_summary(1.0 + t.seed, 1.0)))

    rows = bench.execute_bench(seeded, Backend(), tmp_path)
    assert [(r.label, r.search_seed) for r in rows] == [("row_softmax seed 5", 5), ("row_softmax seed 6", 6),
                                                        ("rmsnorm seed 5", 5), ("rmsnorm seed 6", 6)]
    assert sorted(p.name for p in (tmp_path / "rows").iterdir()) == sorted(f"{t.slug}.json" for t in seeded)
    assert bench.execute_bench(seeded, Backend(), tmp_path) == rows and len(ran) == 4  # all finished: none again


def test_the_seeds_option_of_bench_and_run(tmp_path):
    assert seeds_option("bench", ["a=1", "--seeds", "3", "b=2"]) == (["a=1", "b=2"], 3)
    assert seeds_option("run", ["--seeds=2", "-m"]) == (["-m"], 2)
    assert seeds_option("bench", ["a=1"]) == (["a=1"], None)
    for args, message in ((["--seeds", "0"], "--seeds 0: give the number"), (["--seeds"], "--seeds : give"),
                          (["--seeds", "x=1"], "--seeds x=1: give")):
        with pytest.raises(KernelevoError, match=message):
            seeds_option("bench", args)
    with pytest.raises(KernelevoError, match="--seeds is an option of kernelevo bench and kernelevo run"):
        seeds_option("evaluate", ["--seeds", "2"])
    # a run: a multirun over the seeds from its own (a search.seed given is where they start)
    assert seed_sweep(4, 3, [], ["search.seed=4", "search=tiny"]) == (["--multirun"], ["search=tiny",
                                                                                      "search.seed=4,5,6"])
    assert seed_sweep(0, 2, ["-m"], []) == (["-m"], ["search.seed=0,1"])


def sweep_job(folder, overrides: list[str], summary: RunOutcome | None) -> None:
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    RunStore(folder).close()
    if summary is not None:
        summary.write(folder)


def test_a_multirun_over_search_seeds_is_one_row_group_per_configuration(tmp_path):
    sweep = tmp_path / "sweep"
    jobs = [(p, s) for p in ("rmsnorm", "row_softmax") for s in (0, 1)]
    for i, (problem, seed) in enumerate(jobs):
        sweep_job(sweep / f"{i}-{problem}", [f"problem={problem}", f"search.seed={seed}", "search=tiny"],
                  None if i == 3 else gpu_summary(1.0 + i, 1.0, problem=problem))
    write_multirun_report(sweep, BOOT)
    report = json.loads((sweep / "multirun.json").read_text())
    assert [(r["name"], r["search_seed"], r["status"]) for r in report["rows"]] == [
        ("problem=rmsnorm", 0, "ok"), ("problem=rmsnorm", 1, "ok"), ("problem=row_softmax", 0, "ok"),
        ("problem=row_softmax", 1, "failed")]
    rms = report["summary"]["intervals"]["problems"][0]
    assert rms["speedup_vs_eager"]["value"] == 1.5 and rms["speedup_vs_eager"]["low"] is not None
    assert "| problem=rmsnorm seed 1 | ok |" in (sweep / "multirun.md").read_text()  # no report.html to link

    alone = tmp_path / "alone"  # the seed alone sets the runs apart: they are named after their problem
    for seed in (0, 1, 2):
        sweep_job(alone / f"{seed}-rmsnorm", [f"search.seed={seed}"], gpu_summary(1.0 + seed, 1.0, problem="rmsnorm"))
    write_multirun_report(alone, BOOT)
    rows = json.loads((alone / "multirun.json").read_text())["rows"]
    assert [(r["name"], r["search_seed"]) for r in rows] == [("rmsnorm", 0), ("rmsnorm", 1), ("rmsnorm", 2)]


def judged(eager, compile_, wall_s, status="ok") -> EvalResult:
    return EvalResult(status=status, timer="cuda-events", eval_wall_s=wall_s, speedup_vs_eager=eager,
                      speedup_vs_compile=compile_, time_s=1e-3 if status == "ok" else None)


HISTORY = [(1.0, judged(1.0, 0.8, 2.0)), (2.0, judged(None, None, 3.0, "incorrect")), (3.0, judged(1.5, 1.2, 1.0)),
           (4.0, judged(1.2, 0.9, 4.0)), (5.0, judged(2.0, 1.6, 2.0))]
SPEND = [(0.5, 0.01), (2.5, 0.02), (6.0, 0.05)]  # the last after the last evaluation


def test_the_anytime_curve_steps_at_each_improvement_and_counts_what_was_spent_by_then():
    found = curve(HISTORY, SPEND)
    assert found["columns"] == ["speedup_vs_eager", "speedup_vs_compile"]
    assert found["points"] == [point(1, 2.0, 0.01, 1, 1.0, 0.8), point(3, 6.0, 0.03, 2, 1.5, 1.2),
                               point(5, 12.0, 0.03, 2, 2.0, 1.6), point(5, 12.0, 0.08, 3, 2.0, 1.6)]
    for key in ("evaluations", "gpu_s", "llm_cost_usd", "llm_calls", *found["columns"]):
        values = [p[key] for p in found["points"]]
        assert values == sorted(values), key  # every axis and every best only grows
    late = curve([(1.0, judged(None, None, 1.0, "compile_error")), *HISTORY[2:]], [])
    assert late["points"][0] == point(1, 1.0, 0.0, 0, None, None)  # no best before the first correct kernel
    interpreter = [(1.0, EvalResult(status="ok", timer="interpreter", time_s=0.1, eval_wall_s=3.0))]
    assert curve(interpreter, SPEND) == {"columns": [], "points": []}  # no speed-up: nothing to draw
    assert llm_axis([found]) == ("llm_cost_usd", "LLM cost ($)")
    assert llm_axis([curve(HISTORY, [(0.5, 0.0)])]) == ("llm_calls", "LLM calls (no price known)")
    assert llm_axis([curve(HISTORY, [])]) is None  # offline operators


def test_a_curve_of_steps_says_what_was_spent_even_before_any_speed_up():
    steps = [Step({}, 1, 0.5, 2, 0.01), Step({"speedup_vs_seed": None}, 2, 1.0), Step({"speedup_vs_seed": 2.0}, 1, 0.25)]
    spent = [(1, 0.5, 0.01, 2), (3, 1.5, 0.01, 2)]
    assert best_so_far(steps[:2], ["speedup_vs_seed"])["points"] == [
        {"evaluations": e, "gpu_s": g, "llm_cost_usd": c, "llm_calls": n, "speedup_vs_seed": None}
        for e, g, c, n in spent]  # the first step and the end: the seed failed, nothing gained
    assert [p["speedup_vs_seed"] for p in best_so_far(steps, ["speedup_vs_seed"])["points"]] == [None, 2.0]
    assert best_so_far([], ["speedup_vs_seed"]) == {"columns": ["speedup_vs_seed"], "points": []}


def test_the_anytime_curve_is_read_from_the_run_store(tmp_path, monkeypatch):
    import evo.records.store

    class Clock:  # when the store records each evaluation and LLM call
        times = iter([1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0])
        time = staticmethod(lambda: next(Clock.times))

    monkeypatch.setattr(evo.records.store, "time", Clock)
    store = RunStore(tmp_path)
    stored = [*HISTORY[:2], ("llm", 0.02), *HISTORY[2:], ("llm", 0.05)]
    for i, (_, item) in enumerate(stored):
        if isinstance(item, EvalResult):
            store.add_evaluation(f"k{i}", item)
        else:
            store.add_llm_call({"role": "coder", "cost_usd": item})
    store.add_llm_call({"role": "coder", "cost_usd": 0.4, "cached": True})  # a replay costs nothing
    monkeypatch.undo()
    assert run_curve(store) == curve(HISTORY, [(2.5, 0.02), (6.0, 0.05)])
    store.close()


@pytest.mark.parametrize("timer", ["cuda-events", "interpreter"])
def test_a_run_s_report_draws_its_anytime_curve(tmp_path, timer):
    from evo.reports.report_html import write_report
    from fakes import write_run

    write_run(tmp_path, timer)
    page, markdown = write_report(tmp_path).read_text(), (tmp_path / "report.md").read_text()
    section = page[page.index("<h2>Best speed-up so far</h2>"):page.index("<h2>Lineage")]
    drawn = "The best correct kernel&#39;s speed-up so far" in section  # escaped as jinja2 autoescape does
    assert drawn == (timer == "cuda-events") and ("alt='best speed-up so far'" in page) == drawn
    assert ("| evaluations | GPU-seconds | LLM cost | LLM calls | best vs eager | best vs compile |" in markdown
            ) == drawn
    said = "No speed-up: the kernel is correct, but its times are Triton&#39;s CPU interpreter&#39;s"
    assert (said in section) != drawn  # the one reason that holds: the interpreter's, its kernel correct
