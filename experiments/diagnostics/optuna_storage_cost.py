"""What Optuna's storage costs the search per generation (issue: throughput): the tuner's calls for one generation of
children -- each child's study created, the seed's configuration and three tiles enqueued, six trials asked, six
parameters suggested each, two attributes set and the value told -- made from 8 threads at once, as the search's
children do, through SQLite (run.db's RDB storage) and in memory. Python time on the search's own threads: while it
runs, no child of that generation asks for an evaluation.

    python3 experiments/diagnostics/optuna_storage_cost.py [--generations 3] [--children 8]

CPU only; prints a Markdown table (storage, generation, wall seconds for all children, slowest child).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import optuna

SPACE = {f"P{i}": [1, 2, 4, 8, 16] for i in range(6)}


def one_child(storage, name: str, seed: int) -> float:
    start = time.perf_counter()
    study = optuna.create_study(study_name=name, storage=storage, direction="minimize",
                                sampler=optuna.samplers.TPESampler(seed=seed))
    for _ in range(4):  # the seed's own configuration and three tiles
        study.enqueue_trial({k: v[0] for k, v in SPACE.items()})
    trials = [study.ask() for _ in range(6)]
    for trial in trials:
        for key, choices in SPACE.items():
            trial.suggest_categorical(key, choices)
    for value, trial in enumerate(trials):
        trial.set_user_attr("eval_key", "x" * 16)
        trial.set_user_attr("status", "ok")
        study.tell(trial, float(value))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--children", type=int, default=8)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print("| storage | generation | wall (s) | slowest child (s) |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        storages = {"SQLite (run.db)": optuna.storages.RDBStorage(f"sqlite:///{Path(tmp) / 'run.db'}",
                                                                   engine_kwargs={"connect_args": {"timeout": 60}}),
                    "in memory": optuna.storages.InMemoryStorage()}
        for label, storage in storages.items():
            for generation in range(args.generations):
                start = time.perf_counter()
                with ThreadPoolExecutor(args.children) as pool:
                    per_child = list(pool.map(lambda n: one_child(storage, f"tune-{generation}.{n}", n),
                                              range(args.children)))
                print(f"| {label} | {generation} | {time.perf_counter() - start:.2f} | {max(per_child):.2f} |")


if __name__ == "__main__":
    main()
