"""The Inductor seed cache says whether it hit, and why not (kernelevo/seeds/inductor/cache.py), and a run keeps the
compiler
seeds' judging apart from making them (evo/runs/seeding.py). Issue 45's 4 x H200 bench read level1/1's 12.8 s of
"seeds" as a cache miss: it was the TF32 check's evaluation of its GEMM seed (the first evaluation of the run, which
the other problems made inside their search), the capture read from the warm cache. Two runs sharing one cache
dir reproduce it here with the capture faked (a GEMM template captured on an H100)."""
import json
import logging
import pickle
import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from conftest import FIXTURES
from kernelevo.core.genome import Genome
from evo.benchmark.bench import Row
from evo.benchmark.bench_report import row_line
from evo.evolution.search import Search
from evo.records.store import RunStore
from evo.reports.console import time_text
from evo.records.meta import SEED_CACHE, SEED_CHECK_S
from evo.reports.outcome import RunOutcome, summarise
from evo.runs.run import start_up
from evo.runs.seeding import make_seeds, start_capture
from evo.settings import Budget, SearchSettings
from fakes import SOURCE, FakeTuner, Step
from kernelevo.core.evaluation_record import EvalResult
from fitness.problems.problem import resolve_problem
from kernelevo.validate import Validator
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor.cache import CACHED, CapturedSeeds, cache_note
from kernelevo.seeds.inductor.settings import CaptureSettings

SOFTMAX = json.loads((FIXTURES / "row_softmax.json").read_text())  # a capture made on an H100
GEMM = json.loads((FIXTURES / "matmul_template.json").read_text())
TF32_GEMM = {**GEMM, "code": GEMM["code"].replace("ALLOW_TF32 : tl.constexpr = False",
                                                  "ALLOW_TF32 : tl.constexpr = True")}  # as under policy triton
CHECK_S = 0.3  # how long the fake service takes to judge a kernel
HANG_S = 60  # a thread that never ends: a failure, not a measurement


@pytest.fixture
def fake_capture(monkeypatch):
    """seeds.capture_variants without torch.compile: `captured` gives every variant asked for; `asked` records them."""
    state = SimpleNamespace(asked=[], captured=SOFTMAX, failing=set())

    def capture(spec, device, templates, tf32, variants, **kwargs):
        state.asked.append(sorted(variants))
        state.dynamic = kwargs.get("dynamic")
        return {name: {"error": "Traceback ...\nAttributeError: no option 'x'"} if name in state.failing
                else dict(state.captured) for name in variants}

    monkeypatch.setattr(seeds, "capture_variants", capture)
    return state


def test_a_second_lookup_hits_and_each_miss_names_the_key_part_that_differs(tmp_path, fake_capture):
    spec = resolve_problem("row_softmax", sizes={"batch_size": 8, "dim": 512})
    cache = tmp_path / "cache"
    get = lambda spec=spec, **kw: seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", cache, **kw)  # noqa: E731
    first = get()
    assert isinstance(first, CapturedSeeds) and list(first) == ["inductor"]  # the sources, read as before
    assert first.cache == {"default": f"no entry for row_softmax in {cache / 'inductor-seeds'}"}
    assert cache_note(first.cache).startswith("captured (why: no entry for row_softmax in ")
    second = get()
    assert second == first and second.cache == {"default": CACHED} and cache_note(second.cache) == "cached"
    assert fake_capture.asked == [["default"]]  # the second compiled nothing
    assert get(tf32=True).cache == {"default": "key part tf32 differs"}
    other = resolve_problem("row_softmax", sizes={"batch_size": 4, "dim": 512})
    assert get(other).cache == {"default": "key part sizes differs"}
    variant = get(variants={"looped": {"triton": {"persistent_reductions": False}}})
    assert variant.cache == {"default": CACHED, "looped": f"no entry for row_softmax (looped) in "
                                                          f"{cache / 'inductor-seeds'}"}
    assert cache_note(variant.cache).startswith("captured looped (why: no entry") and \
        cache_note(variant.cache).endswith("; 1 cached")
    assert fake_capture.asked[-1] == ["looped"]  # only the variant the cache lacked
    assert pickle.loads(pickle.dumps(variant)).cache == variant.cache  # as a Ray actor returns it


def test_a_variant_whose_capture_failed_is_tried_again_and_says_it_failed_before(tmp_path, fake_capture, caplog):
    spec = resolve_problem("row_softmax", sizes={"batch_size": 8, "dim": 512})
    broken = {"broken": {"triton": {"x": True}}}
    get = lambda: seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", tmp_path, variants=broken)  # noqa: E731
    fake_capture.failing = {"broken"}
    caplog.set_level(logging.INFO)
    assert get().cache["broken"].startswith("no entry for row_softmax in ")  # the first run: an empty cache
    said = [r.getMessage() for r in caplog.records if "capture of" in r.getMessage()]
    assert said == [f"torch.compile's capture of row_softmax: default, broken (no entry for row_softmax in "
                    f"{tmp_path / 'inductor-seeds'})"]  # one reason for both: said once
    grouped = cache_note({"default": CACHED, "a": "x", "b": "x", "c": "y"})
    assert grouped == "captured a, b (why: x); c (why: y); 1 cached"
    again = get().cache  # not cached: captured again, saying why
    assert again == {"default": CACHED, "broken": "its capture failed before (AttributeError: no option 'x'); a "
                                                  "failure is not cached, so it is tried again"}
    assert fake_capture.asked == [["broken", "default"], ["broken"]]
    fake_capture.failing = set()
    get()  # it works now: cached, the note gone
    assert get().cache == {"default": CACHED, "broken": CACHED} and fake_capture.asked[-1] == ["broken"]


def test_an_entry_written_before_key_parts_were_stored_still_hits_and_a_miss_beside_it_says_so(tmp_path,
                                                                                               fake_capture):
    spec = resolve_problem("row_softmax", sizes={"batch_size": 8, "dim": 512})
    cache = tmp_path / "cache"
    seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", cache)
    (entry,) = (cache / "inductor-seeds").glob("row_softmax-*.json")
    old = {k: v for k, v in json.loads(entry.read_text()).items() if k not in ("key", "variant")}
    entry.write_text(json.dumps(old))  # as the code before this one wrote it, under the same key
    assert seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", cache).cache == {"default": CACHED}
    missed = seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", cache, tf32=True).cache["default"]
    assert missed.startswith("no entry for row_softmax (default)") and "1 older entries" in missed


class GemmEvaluator:
    """What seeding asks of a run's evaluator on a GPU: torch.compile's seeds, through the real cache."""

    def __init__(self, cache_dir, spec):
        self.cache_dir, self.spec = cache_dir, spec
        self.problem = SimpleNamespace(seed_path=None)

    def inductor_seeds(self, run_dir=None, variants=None, settings=None):
        return seeds.inductor_seeds(self.spec, "cuda:0", "h100", self.cache_dir, run_dir, tf32=True,
                                    variants=variants, settings=settings)


class SlowJudge:
    """The evaluation service as seeding uses it: each kernel judged in CHECK_S, a TF32 one incorrect."""

    def __init__(self, store, evaluator):
        self.store, self.evaluators = store, [evaluator]
        self.deadlines, self.events = [], []

    def submit(self, source, label=""):
        self.events.append(("submit", label))
        time.sleep(CHECK_S)
        future = Future()
        future.set_result(("key", EvalResult("incorrect" if "ALLOW_TF32: tl.constexpr = False" not in source
                                             else "ok", time_s=1e-3)))
        return future

    def cut_at(self, deadline):
        self.deadlines.append(deadline)
        self.events.append(("cut", deadline))


def plan_of(wall_time_s=None, generation0_s=None):
    return SimpleNamespace(judge=SimpleNamespace(problem=SimpleNamespace(seed="inductor")), variants=None, llm=None,
                           search=SimpleNamespace(budget=Budget(wall_time_s=wall_time_s, generation0_s=generation0_s)),
                           capture=CaptureSettings())


def test_two_runs_sharing_a_cache_the_second_hits_and_its_seed_time_is_the_check_not_a_capture(tmp_path,
                                                                                               fake_capture):
    fake_capture.captured = TF32_GEMM
    spec = resolve_problem("matmul", sizes=GEMM["fixture"]["sizes"])
    outcomes = []
    for run in ("warm", "bench1"):
        store = RunStore(tmp_path / run)
        service = SlowJudge(store, GemmEvaluator(tmp_path / "cache", spec))
        started = time.perf_counter()  # the clock the seeds' times are taken on: their spans lie inside this one
        made = make_seeds(plan_of(), None, service, tmp_path / run)
        assert service.deadlines == []  # no wall-time budget: no cut
        marks = {"process": started, "queued": 0.0, "run": started, "service": started,
                 "search": time.perf_counter()}
        summary = summarise(store, None)  # summary.json's fields, from the store
        assert (summary.seed_cache, summary.seed_check_s) == (store.get_meta(SEED_CACHE), store.get_meta(SEED_CHECK_S))
        outcomes.append((summary.seed_cache, summary.seed_wall_s, summary.seed_check_s, start_up(marks, store),
                         made[0].genome.source))
        store.close()
    (warm_cache, *_), (cache, made_s, check, stages, source) = outcomes
    assert warm_cache.startswith("captured (why: no entry for matmul in ") and cache == "cached"
    assert fake_capture.asked == [["default"]]  # the second run captured nothing
    assert "ALLOW_TF32: tl.constexpr = False" in source  # the TF32 seed judged incorrect, its IEEE rewrite kept
    assert check >= 2 * CHECK_S and made_s >= 0  # the seed and its rewrite judged: the check's time, not the seeds'
    # the check is no start-up stage: the seeds' time and the check's, both inside the call, are not counted twice
    assert stages["seeds"] == round(made_s, 2) and stages["other"] >= 0


def test_the_seeds_check_runs_under_the_searchs_budget_which_counts_its_time(tmp_path, fake_capture, monkeypatch):
    fake_capture.captured = TF32_GEMM
    spec = resolve_problem("matmul", sizes=GEMM["fixture"]["sizes"])
    store = RunStore(tmp_path / "run")
    service = SlowJudge(store, GemmEvaluator(tmp_path / "cache", spec))
    inner, captured = seeds.capture_variants, []

    def timed_capture(*args, **kwargs):  # when the capture ended
        try:
            return inner(*args, **kwargs)
        finally:
            captured.append(time.perf_counter())

    monkeypatch.setattr(seeds, "capture_variants", timed_capture)
    make_seeds(plan_of(wall_time_s=5.0), None, service, tmp_path / "run")
    after = time.perf_counter()
    (deadline, lifted) = service.deadlines  # cut at the budget while judging, lifted after (the search sets its own)
    assert captured[0] + 5.0 <= deadline <= after + 5.0 and lifted is None  # counted from the checks, not the capture
    settings = SearchSettings(mu=2, lambda_=2, budget=Budget(generations=50, wall_time_s=3.0, patience=None))
    search = Search([(Genome.from_source(SOURCE.format(v=0)), "seed")], [Step()], FakeTuner(store), store,
                    settings, spent_s=2.9)
    state = search.run()
    assert "wall-time budget of 3 s spent" in state["stop_reason"]
    checkpoint = store.latest_checkpoint()  # the search's time (summary's search_wall_s) holds the check: its clock
    assert checkpoint.logbook[0]["elapsed_s"] >= 2.9 and checkpoint.elapsed_s >= 3.0  # starts at the 2.9 s spent
    composed = Validator("run", "config").check(["search.wall_time_s=3"])[0]  # the config a run stores
    store.set_meta("config", OmegaConf.to_container(composed, resolve=True))
    summary = summarise(store, store.latest_checkpoint(), state["stop_reason"])
    assert summary.over_budget_s == round(summary.search_wall_s - 3.0, 2) and summary.over_budget_s >= 0
    assert summarise(store, store.latest_checkpoint(), "4 generations done").over_budget_s is None
    store.close()


def test_the_first_seed_is_judged_before_the_budget_can_cut_it_also_without_tf32_dots(tmp_path, fake_capture,
                                                                                      caplog):
    # the 4 x H100 bench: 15 s searches of large problems had every first evaluation cut and ended with no kernel
    spec = resolve_problem("row_softmax", sizes=SOFTMAX["fixture"]["sizes"])  # no dot products: no TF32 check
    store = RunStore(tmp_path / "run")
    service = SlowJudge(store, GemmEvaluator(tmp_path / "cache", spec))
    with caplog.at_level(logging.INFO, logger="kernelevo.evo.runs.seeding"):
        make_seeds(plan_of(wall_time_s=0.1), None, service, tmp_path / "run")  # a budget shorter than one judgement
    said = [r.getMessage() for r in caplog.records if r.name == "kernelevo.evo.runs.seeding"]
    assert said[0].startswith("generation 0: 1 seed(s) (inductor), torch.compile's capture ")  # what it will judge
    assert said[1] == "generation 0: inductor as written: incorrect"  # each verdict as it comes
    assert service.events[0] == ("submit", "inductor")  # judged first, before any cut
    assert [kind for kind, _ in service.events] == ["submit", "cut", "cut"]  # judged once; the cut set, lifted
    assert store.get_meta(SEED_CHECK_S) >= CHECK_S  # its time is the search's: it counts against the budget
    service.events.clear()
    make_seeds(plan_of(wall_time_s=0.1), None, service, tmp_path / "run")  # a resume: judged already
    assert service.events == []
    store.close()


def test_the_first_seeds_ieee_rewrite_is_judged_before_the_budget_can_cut_it_too(tmp_path, fake_capture):
    # level2/93 on 4 x H100: its TF32 seed was incorrect, and the budget cut the IEEE rewrite that would have passed
    fake_capture.captured = TF32_GEMM
    spec = resolve_problem("matmul", sizes=GEMM["fixture"]["sizes"])
    store = RunStore(tmp_path / "run")
    service = SlowJudge(store, GemmEvaluator(tmp_path / "cache", spec))
    made = make_seeds(plan_of(wall_time_s=0.1), None, service, tmp_path / "run")
    cut = service.events.index(next(e for e in service.events if e[0] == "cut"))
    assert ("submit", "inductor (IEEE fp32 dots)") in service.events[:cut]
    assert "ALLOW_TF32: tl.constexpr = False" in made[0].genome.source  # the rewrite, correct, is the seed kept
    store.close()


def test_the_summary_and_the_bench_row_say_how_the_seed_was_got_and_what_judging_it_took():
    outcome = RunOutcome(status="ok", seed_wall_s=0.1, seed_check_s=12.7, seed_cache="cached", generation0_s=14.0)
    said = time_text(outcome)
    assert ("generation 0 (the seeds judged and tuned; first the seed's verdict and any TF32 check, 12.7 s) 14.0 s"
            in said)
    assert "before it: making the seeds 0.1 s (seed: cached)," in said
    assert ", ended 1.3 s past its wall-time budget;" in time_text(RunOutcome(status="ok", over_budget_s=1.28))
    missed = RunOutcome(status="ok", seed_cache="captured (why: key part tf32 differs)")
    row = Row("level1/1_Square_matrix_multiplication_.py", "ok", "", 37.0, "0", missed)
    assert row_line(row).endswith("ok (37 s); seed: captured (why: key part tf32 differs)")
    assert "seed:" not in row_line(Row("level1/19_ReLU.py", "ok", "", 17.0, "0", RunOutcome(status="ok")))
    assert RunOutcome.from_dict(json.loads(json.dumps(missed.__dict__))).seed_cache == missed.seed_cache


def test_the_capture_runs_beside_the_baselines_and_its_failure_is_raised_where_the_seeds_are_made(tmp_path, monkeypatch,
                                                                                                  fake_capture):
    # on 4 x H100 a problem's baselines took 50 s and its seeds 44 s (median), one after the other, both compiling
    fake_capture.captured = TF32_GEMM
    spec = resolve_problem("matmul", sizes=GEMM["fixture"]["sizes"])
    measured, inner, spans = threading.Event(), seeds.capture_variants, []

    def held_capture(*args, **kwargs):  # compiles until the baselines are measured
        start = time.perf_counter()
        assert measured.wait(HANG_S)
        spans.append((start, time.perf_counter()))
        return inner(*args, **kwargs)

    monkeypatch.setattr(seeds, "capture_variants", held_capture)
    store = RunStore(tmp_path / "run")
    service = SlowJudge(store, GemmEvaluator(tmp_path / "cache", spec))
    capture = start_capture(plan_of(), None, service, tmp_path / "run")
    assert not capture.done()  # started, not waited for: it goes on while the baselines are measured
    measured.set()  # the baselines measured
    capture.result(timeout=HANG_S)
    made = make_seeds(plan_of(), None, service, tmp_path / "run", capture)
    assert "ALLOW_TF32: tl.constexpr = False" in made[0].genome.source  # the same seeds as without the thread
    assert fake_capture.asked == [["default"]]  # the capture that ran beside the baselines: no other after them
    (start, end), = spans
    assert summarise(store, None).seed_capture_s >= end - start  # its own time, kept apart (stages.md)
    assert store.get_meta(SEED_CACHE).startswith("captured (why: no entry for matmul in ")
    store.close()
    for initialise, captures in ((False, True), ("from_seed", True), (True, False)):  # an LLM team's first kernel
        plan = SimpleNamespace(**{**vars(plan_of()), "llm": SimpleNamespace(initialise=initialise)})
        if (started := start_capture(plan, SimpleNamespace(), service, tmp_path / "run")) is not None:
            started.result()
        assert (started is not None) == captures

    fake_capture.failing = {"default"}  # the capture fails: said where the seeds are made, not in the thread
    service = SlowJudge(RunStore(tmp_path / "failing"), GemmEvaluator(tmp_path / "other-cache", spec))
    capture = start_capture(plan_of(), None, service, tmp_path / "failing")
    with pytest.raises(seeds.SeedError, match="no Inductor seed"):
        make_seeds(plan_of(), None, service, tmp_path / "failing", capture)
    service.store.close()
    own = SimpleNamespace(judge=SimpleNamespace(problem=SimpleNamespace(seed="kernel.py")), variants=None, llm=None)
    service.evaluators[0].problem.seed_path = "kernel.py"
    assert start_capture(own, None, service, tmp_path / "own") is None  # the problem's own seed: nothing to capture


def test_max_autotunes_variant_seed_is_judged_before_the_budget_can_cut_it(tmp_path, monkeypatch):
    # on 2 x H200 level1/89, 87 and level3/3 ended at 0.87-0.93x of max-autotune: their max-autotune seed was cut
    def capture(spec, device, templates, tf32, variants, **kwargs):  # each variant's kernel at other warps
        warps = {name: 2 ** (index + 1) for index, name in enumerate(sorted(variants))}
        return {name: {**GEMM, "kernels": {k: {**v, "configs": [{**v["configs"][0], "num_warps": warps[name]}]}
                                           for k, v in GEMM["kernels"].items()}} for name in variants}

    monkeypatch.setattr(seeds, "capture_variants", capture)
    spec = resolve_problem("matmul", sizes=GEMM["fixture"]["sizes"])
    variants = {"looped": {"triton": {"persistent_reductions": False}}, "max_autotune": {"max_autotune": True},
                "gemm": {"max_autotune_gemm": False}}
    plan = SimpleNamespace(**{**vars(plan_of(wall_time_s=5.0)), "variants": variants})
    store = RunStore(tmp_path / "run")
    service = SlowJudge(store, GemmEvaluator(tmp_path / "cache", spec))
    made = make_seeds(plan, None, service, tmp_path / "run")
    cut = next(i for i, event in enumerate(service.events) if event[0] == "cut" and event[1] is not None)
    before = {label for kind, label in service.events[:cut] if kind == "submit"}
    assert before == {"inductor", "inductor:max_autotune"}  # the first seed and max-autotune's, then the budget
    assert [s.made_by for s in made] == ["inductor", "inductor:max_autotune", "inductor:looped", "inductor:gemm"]
    store.close()


def test_variants_turning_on_max_autotune_are_captured_first_within_the_variants_shared_budget(tmp_path, monkeypatch):
    # on 4 x H200 level3/34's max_autotune variant, listed last, was skipped at the budget behind the others
    asked = []

    def capture(spec, device, templates, tf32, variants, **kwargs):
        asked.append(list(variants))
        return {name: {"error": "not captured here"} for name in variants}

    monkeypatch.setattr(seeds, "capture_variants", capture)
    variants = OmegaConf.to_container(OmegaConf.load(FIXTURES.parents[2] / "conf/inductor/variants.yaml"))
    spec = resolve_problem("row_softmax", sizes={"batch_size": 8, "dim": 512})
    with pytest.raises(seeds.SeedError):  # the default failed: nothing to seed from, after every variant was asked
        seeds.inductor_seeds(spec, "cuda", "h100", tmp_path / "cache", variants=variants["variants"])
    listed = list(variants["variants"])
    assert listed.index("max_autotune") == len(listed) - 1  # last in the file, first after the default here
    assert asked == [["default", "max_autotune", *listed[:-1]]]


def test_a_cached_capture_with_one_configuration_per_template_is_captured_again_when_the_limit_now_autotunes_it(
        tmp_path, fake_capture):
    # a network's default capture past inductor.autotune_templates_up_to took each template's first configuration;
    # asked later with a limit that autotunes its graph, the cached entry is not what the settings ask for
    spec = resolve_problem("row_softmax", sizes={"batch_size": 8, "dim": 512})
    cache = tmp_path / "cache"
    fake_capture.captured = {**SOFTMAX, "template_configs": "first only (more than 12 distinct matmuls and "
                             "convolutions)", "template_calls": 40, "template_shapes": 20}
    get = lambda up_to: seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", cache,  # noqa: E731
                                             settings=CaptureSettings(autotune_templates_up_to=up_to))
    get(12)
    assert get(12).cache == {"default": CACHED} and get(19).cache == {"default": CACHED}  # 20 distinct: still past
    again = get(20)
    assert again.cache["default"].startswith("its cached capture took one configuration per template (20 distinct")
    assert get(None).cache["default"].endswith("inductor.autotune_templates_up_to=null autotunes them now")
    assert fake_capture.asked == [["default"]] * 3


def test_a_cached_capture_made_when_every_matmul_counted_is_captured_again(tmp_path, fake_capture):
    # before distinct calls were counted, level3/34's 512 unrolled Linears (2 shapes) took one configuration each
    spec = resolve_problem("row_softmax", sizes={"batch_size": 8, "dim": 512})
    fake_capture.captured = {**SOFTMAX, "template_configs": "first only (more than 12 matmuls and convolutions)",
                             "template_calls": 512}
    get = lambda: seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", tmp_path / "cache",  # noqa: E731
                                       settings=CaptureSettings(autotune_templates_up_to=12))
    get()
    assert get().cache["default"] == ("its cached capture took one configuration per template when every one of its "
                                      "512 matmuls and convolutions counted; distinct ones count now")
    assert fake_capture.asked == [["default"]] * 2


@pytest.mark.parametrize("device, setting, dynamic", [("cpu", None, True), ("cuda", None, False),
                                                      ("cuda", True, True), ("cpu", False, False)])
def test_dynamic_shapes_are_the_default_off_a_gpu_and_a_setting_on_one(tmp_path, fake_capture, device, setting,
                                                                         dynamic):
    # inductor.dynamic_shapes: null keeps a GPU's capture static (not yet measured there); true asks for it on a GPU
    spec = resolve_problem("row_softmax", sizes={"batch_size": 8, "dim": 512})
    seeds.inductor_seeds(spec, device, "h100" if device == "cuda" else "cpu_interpreter", tmp_path / "cache",
                         torch_compute_allowed=True, settings=CaptureSettings(dynamic_shapes=setting))
    assert fake_capture.dynamic is dynamic
    with open(next((tmp_path / "cache").rglob("*.json"))) as entry:
        assert json.load(entry)["key"]["dynamic"] is dynamic  # cached apart from the other capture


def test_generation_0s_own_cap_cuts_the_seeds_check_where_it_is_shorter_than_the_window(tmp_path, fake_capture):
    fake_capture.captured = TF32_GEMM
    service = SlowJudge(RunStore(tmp_path / "run"), GemmEvaluator(tmp_path / "cache", resolve_problem("matmul")))
    before = time.perf_counter()
    make_seeds(plan_of(wall_time_s=300.0, generation0_s=2.0), None, service, tmp_path / "run")
    (deadline, lifted) = service.deadlines
    assert before + 2.0 <= deadline <= time.perf_counter() + 2.0 and lifted is None  # the cap's, not the window's
