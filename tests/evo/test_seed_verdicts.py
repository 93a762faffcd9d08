"""Generation 0's verdicts kept once per machine (evo/service/seed_verdicts.py): a second run of the same problem on the
same machine reads the seeds' verdicts back instead of judging them again (issue 65: a 15 s search's generation 0
took the whole window), counts none of them as its own evaluations, and says so in its summary and bench row; the
cache lives where ``fitness.cache_dir`` says."""
import json
from pathlib import Path
from types import SimpleNamespace

from conftest import kernelevo, read_store, run_dir_of
from evo.benchmark.bench import Row
from evo.benchmark.bench_report import from_caches, row_line
from evo.records.store import RunStore
from evo.reports.outcome import RunOutcome
from evo.service.seed_verdicts import SeedVerdicts, facts
from fitness.evaluation.evaluator import default_cache_dir, sandbox_options
from kernelevo.core.evaluation_record import EvalResult
from fitness.problems.problem import resolve_problem
from fitness.settings import EvalSettings
from hardware_profiles import load_profile
from fitness.comparison.policy import load_policy

OK = EvalResult(status="ok", time_s=1e-3, eval_wall_s=2.0)
TIMEOUT = EvalResult(status="timeout", reason="ran out of time", eval_wall_s=120.0)
INCORRECT = EvalResult(status="incorrect", reason="max abs error 3.0", eval_wall_s=1.5)


def local_evaluator(tmp_path, **settings):
    """What ``facts`` reads of a local evaluator, without starting its sandbox."""
    return SimpleNamespace(settings=EvalSettings(**settings), cache_dir=tmp_path / "cache",
                           problem=resolve_problem("elementwise_chain"), sizes_used={"N": 64}, device="cpu",
                           profile=load_profile("cpu_interpreter"), policy=load_policy("triton"))


def test_verdicts_come_back_under_the_same_judge_and_not_under_another(tmp_path):
    evaluator = local_evaluator(tmp_path)
    kept = SeedVerdicts.of(evaluator)
    assert kept.save({"a": OK, "b": INCORRECT, "c": TIMEOUT}) == 2  # a time-out may be the machine's load: not kept
    assert kept.path.is_relative_to(tmp_path / "cache")
    assert {k: v.status for k, v in SeedVerdicts.of(evaluator).load().items()} == {"a": "ok", "b": "incorrect"}
    assert SeedVerdicts.of(evaluator).save({"d": OK}) == 3  # merged into what is there
    for changed in (local_evaluator(tmp_path, trials=3),
                    SimpleNamespace(**{**vars(evaluator), "sizes_used": {"N": 65}}),
                    SimpleNamespace(**{**vars(evaluator), "policy": load_policy("kernelbench")})):
        assert SeedVerdicts.of(changed).load() == {}  # another judge: judged again, never a stale verdict
    # where the cache lives, how many spares or whether a profiler runs change no verdict: the same file
    moved = local_evaluator(tmp_path, cache_dir=str(tmp_path / "elsewhere"), spares=4)
    assert facts(moved) == facts(evaluator)
    assert facts(SimpleNamespace(problem=evaluator.problem)) is None  # a Ray actor's evaluator: no cache here


def test_an_unreadable_or_foreign_file_is_judged_again(tmp_path):
    kept = SeedVerdicts.of(local_evaluator(tmp_path))
    kept.path.parent.mkdir(parents=True)
    kept.path.write_text("{not json")
    assert kept.load() == {}
    kept.path.write_text(json.dumps({"facts": {"problem": "other"}, "verdicts": {"a": OK.to_dict()}}))
    assert kept.load() == {}  # a hash collision or a hand-copied file: not these facts
    assert kept.save({"a": OK}) == 1 and set(kept.load()) == {"a"}


def test_reused_verdicts_answer_the_store_but_are_no_evaluations_of_the_run(tmp_path):
    store = RunStore(tmp_path / "run")
    store.add_evaluation("own", OK)
    assert store.add_reused_evaluations({"own": INCORRECT, "old": INCORRECT, "older": OK}) == 2  # its own stays
    assert store.evaluation("own").status == "ok" and store.evaluation("old").status == "incorrect"
    assert store.reused_keys() == {"old", "older"}
    assert (store.evaluation_count(), store.distinct_evaluation_count(), store.evaluation_seconds()) == (1, 1, 2.0)
    store.close()


def test_the_cache_dir_is_a_setting_with_one_default(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir(EvalSettings()) == tmp_path / "xdg" / "kernelevo" == default_cache_dir()
    assert default_cache_dir(EvalSettings(cache_dir=str(tmp_path / "c"))) == tmp_path / "c"
    # the baselines' compile cache of every worker follows it too (the leased sandboxes of a run's evaluators)
    options = sandbox_options(EvalSettings(cache_dir=str(tmp_path / "c")), load_profile("cpu_interpreter"), "cpu")
    assert options["trusted_cache_dir"] == tmp_path / "c" / "baseline-cache"


def test_the_bench_row_says_what_came_from_a_cache():
    summary = RunOutcome(problem="p", status="ok", seed_cache="cached", baseline_cache="cached", verdicts_reused=7)
    line = row_line(Row("level1/1", "ok", summary=summary, wall_s=3.0))
    assert "seed: cached; baselines: cached; 7 generation-0 verdict(s) cached" in line
    assert from_caches(summary) == "from caches: seeds, baselines, 7 generation-0 verdicts"
    assert from_caches(RunOutcome(seed_cache="captured (why: no entry ...)", baseline_cache="measured")) == ""


TINY = ["problem=elementwise_chain", "search=tiny", "search.generations=0", "fitness.trials=2",
        "fitness.timing.interpreter_reps=1"]


def test_a_second_run_on_the_machine_judges_none_of_generation_0_again(tmp_path):
    cache = tmp_path / "machine-cache"
    runs = []
    for name in ("first", "second"):
        done = kernelevo("run", *TINY, f"fitness.cache_dir={cache}", f"hydra.run.dir={name}", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        run_dir = run_dir_of(done.stdout + done.stderr)
        runs.append((json.loads((Path(run_dir) / "summary.json").read_text()),
                     read_store(run_dir, lambda store: (store.evaluation_count(), sorted(store.evaluations())))))
    (first, (first_calls, first_keys)), (second, (second_calls, second_keys)) = runs
    assert first["verdicts_reused"] == 0 and first_calls >= 1
    assert list((cache / "inductor-seeds" / "verdicts").glob("elementwise_chain-*.json"))  # under fitness.cache_dir
    # generation 0 (generations=0: the whole run) read back: the same verdicts, none judged by this run
    assert second["verdicts_reused"] == len(first_keys) and second_calls == 0 and second_keys == first_keys
    assert second["best_s"] == first["best_s"]
