"""The tests' shared fakes and helpers: tests import them from here (or llm_fakes.py, conftest.py), never each other.

The fakes of an evaluator and of the evaluation service implement the project's protocols
(``fitness.evaluation.evaluating.Evaluating``, ``evo.service.evaluation_protocol.RunEvaluator`` and ``Evaluations``);
``tests/project/test_fakes.py`` checks each against them (isinstance and the calls' signatures), so a fake cannot drift
from what it stands for. Also here: the toy kernel world of the search's tests (``SOURCE``: a kernel that is a
number V, its operators and tuner), the tuner's landscape, and a stored run made by hand (``write_run``). The LLM
tests' own are in ``tests/llm_fakes.py``; the helpers of whole runs (``TINY``, ``lineage_of``, ...) in
``tests/conftest.py``.
"""
from __future__ import annotations

import math
import random
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, ClassVar

from kernelevo.core.genome import Genome, evaluation_key
from kernelevo.core.individual import Individual
from evo.records.checkpoint import Checkpoint
from evo.records.store import RunStore
from fitness.comparison.policy import load_policy
from fitness.evaluation.plan import JudgePlan
from kernelevo.core.evaluation_record import EvalResult
from fitness.settings import EvalSettings, ProblemSettings
from hardware_profiles import load_profile
from operators.base import BudgetExhausted, Operator
from kernelevo.seeds.inductor.cache import CapturedSeeds


# evaluators (RunEvaluator) --------------------------------------------------------------------------------------
def passed() -> EvalResult:
    return EvalResult("ok", time_s=1e-3)


class FakeEvaluator:
    """An evaluator (``RunEvaluator``) with nothing behind it, on the CPU interpreter (or, said to be, a GPU):
    `judge(source)` gives each verdict (by default ok). Records the cut it was given (`cut`) and whether it was
    closed."""

    problem, policy, target, cost, memory_slots = None, None, None, None, None
    profile = load_profile("cpu_interpreter")

    def __init__(self, judge: Callable[[str], EvalResult] | None = None, on_gpu: bool = False):
        self.judge = judge or (lambda source: passed())
        self.on_gpu, self.device = on_gpu, "cuda:0" if on_gpu else "cpu"
        self.cut: float | None = None
        self.closed = False
        self.ieee, self.asked_ieee = None, []

    def describe(self) -> str:
        return "a fake evaluator"

    def evaluate(self, source: str, label: str = "") -> EvalResult:
        return self.judge(source)

    def profile_kernel(self, source: str) -> dict:
        return {}

    def baseline(self) -> None:
        return None

    def baseline_ieee(self, names: list[str]):
        """`ieee` (a Baseline; None: nothing measured, as off a GPU); the names asked, in `asked_ieee`."""
        self.asked_ieee.append(list(names))
        return self.ieee

    def cut_running_at(self, deadline: float | None) -> None:
        self.cut = deadline

    @property
    def sandbox(self) -> None:
        return None

    def inductor_seeds(self, run_dir: Path | None = None, variants: dict | None = None,
                       settings=None) -> CapturedSeeds:
        return CapturedSeeds()

    def close(self) -> None:
        self.closed = True


class PacedEvaluator(FakeEvaluator):
    """What the service uses of an evaluator. Records the most calls it saw at once and the calls per source; each
    call lasts `hold_s`, and when `full_at` is set, until that many run at once (at most 1 s more); a source in
    `after` until the call of the source it names has begun (at most 5 s). `verdicts`: source -> the results of its
    calls, in order (then ok)."""

    def __init__(self, hold_s: float = 0.05, full_at: int | None = None, verdicts: dict | None = None):
        super().__init__()
        self.hold_s, self.full_at, self.verdicts = hold_s, full_at, verdicts or {}
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.calls: Counter = Counter()
        self.full = threading.Event()
        self.after: dict[str, str] = {}
        self.begun: defaultdict = defaultdict(threading.Event)
        self.gate_timed_out = False

    def _call(self, source: str) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.calls[source] += 1
            if self.full_at and self.now >= self.full_at:
                self.full.set()
        self.begun[source].set()
        try:
            time.sleep(self.hold_s)
            if self.full_at:
                self.full.wait(1)
            if source in self.after and not self.begun[self.after[source]].wait(5):
                self.gate_timed_out = True
        finally:
            with self.lock:
                self.now -= 1

    def evaluate(self, source: str, label: str = "") -> EvalResult:
        self._call(source)
        script = self.verdicts.get(source, [])
        return script.pop(0) if script else passed()

    def profile_kernel(self, source: str) -> dict:
        self._call(source)
        script = self.verdicts.get(source, [])
        return script.pop(0) if script else {"tool": "ncu", "kernels": []}


# the toy kernel world: a kernel is a number V (and a tunable W) -------------------------------------------------
SOURCE = "V = {v}\nW = 0\nTUNABLE = {{'W': [0, 1]}}\n"
CALLS: list = []  # Step's calls, for its budget (clear it where a test counts them)


def value(genome: Genome) -> int:
    return int(genome.source.split("\n")[0].split("= ")[1])


def lineage(store):
    return [(ind.id, ind.parents, ind.operator, ind.key) for ind in store.individuals()]


def toy_verdict(source: str) -> EvalResult:
    """Judges the toy kernel: V % 5 == 4 is incorrect, else faster the larger |V| (and W = 0); 0.5 s each."""
    v = value(Genome.from_source(source))
    w = int(source.split("W = ")[1].split("\n")[0])
    if v % 5 == 4:
        return EvalResult(status="incorrect", reason="wrong values", problem="toy", timer="interpreter",
                          eval_wall_s=0.5)
    return EvalResult(status="ok", time_s=1.0 / (1 + abs(v)) + 0.01 * w, problem="toy", timer="interpreter",
                      eval_wall_s=0.5)


@dataclass(frozen=True, kw_only=True)
class Step(Operator):
    """A child with V moved by -4..+9: a landscape with somewhere to go and kernels often made twice."""
    name: ClassVar[str] = "step"
    arity: ClassVar[int] = 1
    budget: int | None = None  # calls before BudgetExhausted

    def __call__(self, parents, rng, context):
        if self.budget is not None:
            CALLS.append(1)
            if len(CALLS) > self.budget:
                raise BudgetExhausted("fake operator budget of calls")
        return [Genome.from_source(SOURCE.format(v=value(parents[0].genome) + rng.randint(-4, 9)))]


@dataclass(frozen=True, kw_only=True)
class Cross(Operator):
    name: ClassVar[str] = "cross"
    arity: ClassVar[int] = 2

    def __call__(self, parents, rng, context):
        return [Genome.from_source(SOURCE.format(v=(value(parents[0].genome) + value(parents[1].genome)) // 2 + 1))]


# the evaluation service (Evaluations) ---------------------------------------------------------------------------
def refuse(source: str) -> EvalResult:
    raise AssertionError("offline fake operators evaluate nothing")


class FakeService:
    """The evaluation service (``Evaluations``) without evaluators: `judge(source)` gives each verdict (by default:
    none may be asked). Records every source evaluated, in order (`evaluated`), and the cut it was given (`cut`).
    `delay(n)`: seconds the n-th submission takes to finish, in its own thread (so completion order can be
    shuffled); `spy(source)` runs at each submission."""

    def __init__(self, judge: Callable[[str], EvalResult] = refuse, profile=None, store=None, delay=None, spy=None,
                 evaluators=()):
        self.judge, self._profile, self.store = judge, profile, store
        self.delay, self.spy = delay, spy
        self.evaluators, self.parallel = list(evaluators), 1
        self.evaluated, self._lock = [], threading.Lock()
        self.cut: float | None = None

    @property
    def profile(self):
        return self._profile

    def evaluate(self, source: str, label: str = "") -> tuple[str, EvalResult]:
        with self._lock:
            self.evaluated.append(source)
        return evaluation_key(source), self.judge(source)

    def submit(self, source: str, label: str = "") -> Future:
        if self.spy is not None:
            self.spy(source)
        future, wait = Future(), self.delay(len(self.evaluated)) if self.delay else 0.0
        if not wait:
            future.set_result(self.evaluate(source, label))
            return future
        threading.Thread(target=lambda: (time.sleep(wait), future.set_result(self.evaluate(source, label)))).start()
        return future

    def profile_kernel(self, source: str) -> dict:
        return {}

    def cut_at(self, deadline: float | None) -> None:
        self.cut = deadline

    def close(self, completed: bool = False) -> None:
        pass


# the tuner's landscape: a tunable kernel whose time is a function of its launch parameters ----------------------
SPACE = {"BLOCK_M": [16, 32, 64, 128, 256], "BLOCK_N": [16, 32, 64, 128, 256], "NUM_WARPS": [1, 2, 4, 8],
         "STAGES": [1, 2, 3]}


def source(params: dict, body: str = "pass", space: dict = SPACE) -> str:
    return "".join(f"{k} = {v!r}\n" for k, v in params.items()) + f"TUNABLE = {space!r}\n\ndef kernel():\n    {body}\n"


TUNER_SEED = Genome.from_source(source({"BLOCK_M": 16, "BLOCK_N": 16, "NUM_WARPS": 1, "STAGES": 1}))


def landscape(params: dict) -> float | None:
    """A time with one optimum (BLOCK_M 128, BLOCK_N 64, 4 warps, 2 stages) and a corner that does not compile."""
    if params["BLOCK_M"] * params["BLOCK_N"] >= 256 * 128:
        return None
    return 1e-3 * (1 + 0.4 * (math.log2(params["BLOCK_M"]) - 7) ** 2 + 0.3 * (math.log2(params["BLOCK_N"]) - 6) ** 2
                   + 0.2 * (math.log2(params["NUM_WARPS"]) - 2) ** 2 + 0.1 * (params["STAGES"] - 2) ** 2)


def by_landscape(source: str) -> EvalResult:
    time_s = landscape(Genome.from_source(source).params)
    if time_s is None:
        return EvalResult(status="compile_error", reason="out of shared memory")
    return EvalResult(status="ok", time_s=time_s)


class LandscapeService(FakeService):
    """Evaluates by the landscape, on an H200 without measured GEMM tiles (`delay`, `spy`: ``FakeService``'s)."""

    def __init__(self, delay=None, spy=None):
        super().__init__(by_landscape, replace(load_profile("h200"), gemm_tiles=()), delay=delay, spy=spy)


class FakeTuner:
    """Tunes W in {0, 1}: two evaluations, each a measurement of the landscape, finishing after a random delay."""

    def __init__(self, store, flat=False, jitter=0.01, seed=0, crash_at=None):
        self.service, self.store, self.flat = FakeService(store=store), store, flat
        self.rng, self.jitter, self.crash_at, self.tuned = random.Random(seed), jitter, crash_at, 0
        self.lock = threading.Lock()

    def time_of(self, genome):
        return 1.0 if self.flat else 1.0 / (1 + abs(value(genome))) + 0.001 * genome.params["W"]

    def tune(self, individual):
        with self.lock:
            delay, self.tuned = self.rng.random() * self.jitter, self.tuned + 1
            if self.crash_at is not None and self.tuned > self.crash_at:
                raise KeyboardInterrupt("killed")  # as a kill -9 would leave it: nothing after this is folded
        time.sleep(delay)
        best = None
        for w in (0, 1):
            genome = individual.genome.with_params({"W": w})
            result = self.store.evaluation(genome.key)  # the run store is the cache, as the real service's
            if result is None:
                result = EvalResult(status="ok", time_s=self.time_of(genome))
                self.store.add_evaluation(genome.key, result)
            if best is None or result.time_s < best[1].time_s:
                best = (genome, result)
        return individual.tuned(best[0], best[1], 2)


# a stored run made by hand (the report's tests) -------------------------------------------------------------------
REPORT_SEED = '''import triton
import triton.language as tl

BLOCK = 64
TUNABLE = {"BLOCK": [64, 128, 256]}


@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
'''
POLICY = {"name": "triton", "tolerances": {"float32": {"atol": 0.01, "rtol": 0.01, "max_rel_l2": 0.01},
                                           "bfloat16": {"atol": 0.01, "rtol": 0.01, "max_rel_l2": 0.02}},
          "tf32": True, "torch_compute": "reject"}


def result(time_s: float | None, timer: str, status: str = "ok") -> EvalResult:
    gpu = timer == "cuda-events"
    return EvalResult(status=status, reason="" if status == "ok" else "wrong values", problem="toy",
                      sizes={"n": 1024}, policy=POLICY, device="cuda:0" if gpu else "cpu",
                      hardware_profile="h100_sxm" if gpu else "cpu_interpreter", timer=timer, time_s=time_s,
                      eager_s=0.010 if gpu else None, compile_s=0.008 if gpu else None,
                      speedup_vs_eager=0.010 / time_s if gpu and time_s else None,
                      speedup_vs_compile=0.008 / time_s if gpu and time_s else None,
                      sol_fraction=0.5 if gpu else None, floor_fraction=0.25 if gpu else None)


def write_run(run_dir, timer: str) -> None:
    """A two-generation run: the seed (tuned), a param mutation, a failed space mutation and a crossover of the
    mutation with the seed that is the best kernel."""
    store = RunStore(run_dir)
    seed = Genome.from_source(REPORT_SEED)
    made = [Individual("0.0", seed.with_params({"BLOCK": 128}), (), "seed", 0, result(0.004, timer)),
            Individual("1.0", seed.with_params({"BLOCK": 256}), ("0.0",), "param_mutation", 1, result(0.003, timer)),
            Individual("1.1", Genome.from_source(REPORT_SEED.replace("mask=mask)\n", "mask=mask) * 2\n")),
                       ("0.0",), "space_mutation", 1, result(None, timer, "incorrect")),
            Individual("2.0", Genome.from_source(REPORT_SEED.replace("offs < n", "(offs < n) & (offs >= 0)"))
                       .with_params({"BLOCK": 256}), ("1.0", "0.0"), "crossover", 2, result(0.002, timer),
                       llm={"calls": 2, "cost_usd": 0.03})]
    store.add_evaluation(evaluation_key(seed.source), result(0.005, timer))  # the seed as written
    for ind in made:
        store.add_individual(ind)
        store.add_evaluation(ind.key, ind.result)
    for role, cost, cached in (("planner", 0.01, False), ("coder", 0.02, False), ("coder", 0.02, True)):
        store.add_llm_call({"role": role, "model": "openai/gpt-4o", "prompt_tokens": 100, "completion_tokens": 50,
                            "cost_usd": cost, "cached": cached})
    logbook = [{"gen": 0, "nevals": 1, "evaluations": 2, "best": 0.004, "median": 0.004, "correct": 1},
               {"gen": 1, "nevals": 2, "evaluations": 4, "best": 0.003, "median": 0.0035, "correct": 2},
               {"gen": 2, "nevals": 1, "evaluations": 5, "best": 0.002, "median": 0.003, "correct": 2}]
    store.save_checkpoint(Checkpoint(2, logbook=logbook, hall_of_fame=["2.0", "1.0", "0.0"], elapsed_s=12.5,
                                     best_s=0.002))
    store.set_meta("stop_reason", "2 generations done")
    store.close()


# the check at other sizes (tests/evo/test_sizes_label.py, tests/e2e/test_full_size.py): a run's kernels made of
# tests/candidates/sizes_verdicts.py, one that runs at any size, one whose guard refuses other sizes, one whose mask
# is wrong there
SIZES_SOURCE = (Path(__file__).resolve().parent / "candidates" / "sizes_verdicts.py").read_text()
GENERIC, GUARDED, WRONG_MASK = 0, 1, 2


def judge_plan(problem: str, device: str) -> JudgePlan:
    """The run's judge, one trial a kernel, on `device`."""
    return JudgePlan(ProblemSettings(name=problem), EvalSettings(trials=1), load_policy("triton"), device=device)


def sizes_kernel(variant: int, time_s: float, ind_id: str) -> Individual:
    """One of the run's correct kernels, with its (GPU) time as the search measured it."""
    genome = Genome.from_source(SIZES_SOURCE).with_params({"VARIANT": variant})
    result = EvalResult(status="ok", problem="scale_shift", device="cuda:0", timer="cuda-events", time_s=time_s,
                        speedup_vs_eager=2.0 * 1e-5 / time_s, policy={"name": "triton"})
    return Individual(ind_id, genome, (), "seed", 0, result)


def add_kernel(store: RunStore, individual: Individual) -> None:
    store.add_individual(individual)
    store.add_evaluation(individual.key, individual.result)


def sizes_run_store(tmp_path, variants: list[int]) -> tuple[RunStore, Checkpoint]:
    """A finished run's store whose kernels are these variants, fastest first (the first: the hall of fame's)."""
    store = RunStore(tmp_path / "run")
    ids = [f"{len(variants) - i}.0" for i in range(len(variants))]
    for i, (variant, ind_id) in enumerate(zip(variants, ids)):
        add_kernel(store, sizes_kernel(variant, (i + 1) * 1e-5, ind_id))
    checkpoint = Checkpoint(generation=1, best_s=1e-5, hall_of_fame=ids)
    store.save_checkpoint(checkpoint)
    return store, checkpoint
