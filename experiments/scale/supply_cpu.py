"""Supply on the CPU: how busy a search keeps N evaluators' slots, in generation 0 and after it, and how many results
per second its driver folds in -- the search, tuner, store and evaluation service as a run wires them, with fake
evaluators in place of GPUs (no worker, no kernel).

Each fake evaluator "measures" a kernel by a synthetic landscape and takes a time that is a function of the
kernel's source alone (`hold_s` x 1..1+spread): the same kernel, the same measurement and duration, so the lineage
of two runs with the same config, seed and evaluator count is comparable. The evaluation service runs
`evaluators` x `per_evaluator` evaluations at once (its slots: GPUs x per-GPU slots); occupancy is the share of
slot-seconds busy in a window (generation 0: from the search's start to the end of generation 0; after it: from
there to the search's end).

    PYTHONPATH=. python3 experiments/scale/supply_cpu.py            # occupancy on 1, 2, 4 evaluators; driver rate
    PYTHONPATH=. python3 experiments/scale/supply_cpu.py --spread 3 --generations 6 --window 2   # a wider window

"After it" ends when the search starts its last child (what follows drains the children in flight at the budget).
The driver's rate: the same search with evaluations answered at once (the store's writes, Optuna's asks and tells,
the operators and folding in, on the driver's threads).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from kernelevo.core.genome import Genome
from evo.service.evaluation import EvaluationService
from evo.runs.run import supplied_tuner
from evo.evolution.search import Search
from evo.settings import Budget, SearchSettings, TunerSettings
from evo.records.store import RunStore
from kernelevo.core.evaluation_record import EvalResult
from hardware_profiles import load_profile
from operators.base import Operator

SPACE = {"BLOCK": [16, 32, 64, 128, 256, 512], "NUM_WARPS": [1, 2, 4, 8], "STAGES": [1, 2, 3, 4]}


def source(v: int, params: dict | None = None) -> str:
    params = params or {"BLOCK": 32, "NUM_WARPS": 2, "STAGES": 1}
    return (f"V = {v}\n" + "".join(f"{k} = {val!r}\n" for k, val in params.items())
            + f"TUNABLE = {SPACE!r}\n\ndef kernel():\n    pass\n")


def _unit(text: str, salt: str = "") -> float:
    """A number in [0, 1) that is a function of `text` alone."""
    return int(hashlib.sha256((salt + text).encode()).hexdigest()[:8], 16) / 2 ** 32


def landscape(src: str) -> float:
    """The fake measurement of a kernel: V's distance from 40 and its launch parameters' from (128, 4, 2)."""
    genome = Genome.from_source(src)
    v = int(src.split("\n")[0].split("= ")[1])
    p = genome.params
    return 1e-3 * (1 + 0.02 * abs(v - 40) + 0.3 * (math.log2(p["BLOCK"]) - 7) ** 2
                   + 0.2 * (math.log2(p["NUM_WARPS"]) - 2) ** 2 + 0.1 * (p["STAGES"] - 2) ** 2)


@dataclass(frozen=True, kw_only=True)
class Step(Operator):
    """A child with V moved by -10..+20."""
    name: ClassVar[str] = "step"
    arity: ClassVar[int] = 1

    def __call__(self, parents, rng, context):
        genome = parents[0].genome
        v = int(genome.source.split("\n")[0].split("= ")[1])
        return [Genome.from_source(source(v + rng.randint(-10, 20), genome.params))]


class Spans:
    """Every evaluation's (start, end) on the wall clock, over all the fake evaluators of a run."""

    def __init__(self):
        self.lock = threading.Lock()
        self.spans: list[tuple[float, float]] = []

    def add(self, start: float, end: float) -> None:
        with self.lock:
            self.spans.append((start, end))

    def most_at_once(self, start: float, end: float) -> int:
        now = most = 0
        for _, delta in _events(self.spans, start, end):
            now += delta
            most = max(most, now)
        return most

    def occupancy(self, slots: int, start: float, end: float) -> float:
        """The share of the window's slot-seconds busy (at most `slots` count at any instant)."""
        if end <= start:
            return 0.0
        busy, now, last = 0.0, 0, start
        for at, delta in _events(self.spans, start, end):
            busy += min(now, slots) * (at - last)
            now, last = now + delta, at
        busy += min(now, slots) * (end - last)
        return busy / (slots * (end - start))


def _events(spans, start: float, end: float) -> list[tuple[float, int]]:
    events = []
    for s, e in spans:
        s, e = max(s, start), min(e, end)
        if e > s:
            events += [(s, 1), (e, -1)]
    return sorted(events, key=lambda ev: (ev[0], ev[1]))  # an end before a start at the same instant


@dataclass
class SlotEvaluator:
    """A fake evaluator (one "GPU"): each evaluation takes `hold_s` x (1 + spread x u), u a function of the source."""
    spans: Spans
    hold_s: float = 0.05
    spread: float = 1.0
    on_gpu: bool = False
    device: str = "cpu"
    profile: object = field(default_factory=lambda: replace(load_profile("h200"), gemm_tiles=()))

    def evaluate(self, src: str, label: str = "") -> EvalResult:
        start = time.perf_counter()
        if self.hold_s:
            time.sleep(self.hold_s * (1 + self.spread * _unit(src, "duration")))
        self.spans.add(start, time.perf_counter())
        return EvalResult(status="ok", time_s=landscape(src))

    def cut_running_at(self, deadline: float | None) -> None:
        """Nothing runs in a worker here: an evaluation ends when its sleep does."""

    def close(self) -> None:
        pass


@dataclass
class Measured:
    evaluators: int
    slots: int
    seeds: int
    generation0_s: float
    search_s: float
    evaluations: int
    generation0_evaluations: int
    generation0_occupancy: float
    after_occupancy: float
    generation0_most: int
    after_most: int
    lineage: list = field(repr=False)

    @property
    def results_per_s(self) -> float:
        return self.evaluations / self.search_s if self.search_s else 0.0


LAMBDA = 4  # search.lambda_ per evaluator


def measure(evaluators: int, per_evaluator: int = 6, seeds: int = 2, generations: int = 3, lambda_: int = LAMBDA,
            hold_s: float = 0.05, spread: float = 1.0, tuner: TunerSettings = TunerSettings(), seed: int = 0,
            staleness: int | None = None, parallel: int | None = None, run_dir: Path | None = None) -> Measured:
    """One search on `evaluators` fake evaluators of `per_evaluator` slots each, from `seeds` seeds."""
    spans = Spans()
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(run_dir or tmp))
        fakes = [SlotEvaluator(spans, hold_s, spread) for _ in range(evaluators)]
        service = EvaluationService(fakes, store, evaluators * per_evaluator, local_gpus=[])
        settings = SearchSettings(mu=4, lambda_=lambda_, seed=seed, staleness=staleness, parallel=parallel,
                                  budget=Budget(generations=generations, patience=None, wall_time_s=None))
        settings = settings.on_evaluators(evaluators)
        tune = supplied_tuner(service, None, settings, tuner, seed, store)
        marks: dict[int, float] = {}
        search = Search([(Genome.from_source(source(10 * i)), "seed" if i == 0 else f"variant{i}")
                         for i in range(seeds)], [Step()], tune, store, settings,
                        on_generation=lambda report: marks.setdefault(report.generation, time.perf_counter()))
        start = search._start

        def started_child(n):  # the last child started: after it the search only drains what runs
            marks["last start"] = time.perf_counter()
            return start(n)

        search._start = started_child
        started = time.perf_counter()
        search.run()
        ended = time.perf_counter()
        tune.close()
        lineage = [(ind.id, ind.parents, ind.operator, ind.key) for ind in store.individuals()]
        gen0, last = marks[0], marks.get("last start", marks[0])
        gen0_evaluations = sum(1 for s, _ in spans.spans if s < gen0)
        evaluations = store.evaluation_count()
        service.close()
        store.close()
    slots = evaluators * per_evaluator
    return Measured(evaluators, slots, seeds, gen0 - started, ended - started, evaluations, gen0_evaluations,
                    spans.occupancy(slots, started, gen0), spans.occupancy(slots, gen0, last),
                    spans.most_at_once(started, gen0), spans.most_at_once(gen0, last), lineage)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaluators", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--per-evaluator", type=int, default=6, help="evaluation slots per evaluator")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--hold-s", type=float, default=0.3, help="an evaluation's shortest duration")
    parser.add_argument("--spread", type=float, default=1.0, help="an evaluation takes hold-s x 1..1+spread")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--window", type=int, default=None,
                        help="search.staleness as a multiple of a generation's children (default: one generation)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = []
    print("| evaluators | slots | generation 0 s | its evaluations | most in flight in it | slots busy in it "
          "| after it: most in flight | slots busy | evaluations/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.evaluators:
        m = measure(n, args.per_evaluator, args.seeds, args.generations, hold_s=args.hold_s, spread=args.spread,
                    staleness=args.window * LAMBDA * n if args.window else None)
        rows.append({k: v for k, v in m.__dict__.items() if k != "lineage"})
        print(f"| {n} | {m.slots} | {m.generation0_s:.2f} | {m.generation0_evaluations} | {m.generation0_most} | "
              f"{m.generation0_occupancy:.0%} | {m.after_most} | {m.after_occupancy:.0%} | {m.results_per_s:.1f} |")
    instant = measure(4, args.per_evaluator, args.seeds, generations=6, hold_s=0.0)
    print(f"\ndriver, evaluations answered at once (4 evaluators, {instant.evaluations} evaluations, "
          f"{len(instant.lineage)} individuals): {instant.results_per_s:.0f} results/s folded in "
          f"({1000 / max(instant.results_per_s, 1e-9):.1f} ms of driver per result)")
    rows.append({"driver": {"evaluations": instant.evaluations, "individuals": len(instant.lineage),
                            "search_s": instant.search_s, "results_per_s": instant.results_per_s}})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
