"""The run store: one SQLite database per run (WAL mode) holding everything a run computed. The only SQL in the
project is in this file; everything else reads and writes typed records through its methods.

Tables: ``meta`` (config, problem, stop reason), ``individuals`` (one row per individual: its genome, lineage,
tuner trials and LLM usage; its result is the evaluation under its kernel's key), ``evaluations`` (one result per
distinct evaluated source: the cache that makes the same code never evaluated twice), ``evaluation_log`` (one
row per evaluator call: how a run proves it repeated nothing), ``checkpoints`` (the search state after each
generation), ``llm_calls``, ``llm_prompts`` (the size of every prompt an agent was sent, per part of its context)
``profiles`` (profiler metrics of an evaluated kernel, under its evaluation's key) and ``reused`` (the keys of
verdicts an earlier run on this machine judged, read from its cache: ``evo.service.seed_verdicts``; no evaluator
call of this run, so not in ``evaluation_log`` nor in the run's evaluation counts and seconds). Optuna's studies live in
the same file (their own tables).
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from kernelevo.core.errors import KernelevoError
from kernelevo.core.individual import Individual
from evo.records import meta
from evo.records.checkpoint import Checkpoint
from evo.records.moved import current_targets
from kernelevo.core.evaluation_record import EvalResult


def _meta_value(key: str, text: str):
    """A meta value read back; a config's ``_target_`` paths at their modules' current homes (a run stored before
    evo/ and fitness/ moved into subpackages names them where they were: ``evo.records.moved``)."""
    value = json.loads(text)
    return current_targets(value) if key == meta.CONFIG else value


DB_NAME = "run.db"
SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS individuals (
    id TEXT PRIMARY KEY, generation INTEGER, key TEXT, data TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS evaluations (
    key TEXT PRIMARY KEY, status TEXT, time_s REAL, result TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS evaluation_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS checkpoints (generation INTEGER PRIMARY KEY, state TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS llm_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, role TEXT, model TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    cost_usd REAL, cached INTEGER, request_hash TEXT, individual TEXT, created REAL);
CREATE TABLE IF NOT EXISTS llm_prompts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, role TEXT, individual TEXT, chars INTEGER, parts TEXT, created REAL);
CREATE TABLE IF NOT EXISTS profiles (key TEXT PRIMARY KEY, profile TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS reused (key TEXT PRIMARY KEY, created REAL);
"""
LLM_COLUMNS = ("role", "model", "prompt_tokens", "completion_tokens", "cost_usd", "cached", "request_hash",
               "individual")


def _verdict(stored: str | None) -> EvalResult | None:
    """A stored evaluation, or None for none (an infrastructure failure that an older version stored as a verdict)."""
    result = EvalResult.from_dict(json.loads(stored)) if stored else None
    return None if result is None or result.infrastructure else result


class StoreError(KernelevoError):
    """The directory holds no run, or a run this version cannot read; the message says what to do."""


def _damaged(path: Path, exc: sqlite3.DatabaseError) -> StoreError | sqlite3.DatabaseError:
    """A store SQLite cannot read as a database (not one its busy or locked errors: those are raised as they are)."""
    if isinstance(exc, sqlite3.OperationalError):
        return exc
    return StoreError(f"{path} is not a readable run store ({exc}): it is damaged or not kernelevo's; start a new run "
                      f"in another directory, or put back a copy of the file")


class RunStore:
    def __init__(self, run_dir: Path, create: bool = True):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / DB_NAME
        if not create:
            self.check_exists(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=60)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise _damaged(self.path, exc) from None
        version = self.get_meta(meta.SCHEMA_VERSION)
        if version is None:
            self.set_meta(meta.SCHEMA_VERSION, SCHEMA_VERSION)
        elif version != SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by another kernelevo version (store schema {version}, this "
                             f"version reads {SCHEMA_VERSION}); start a new run")

    @staticmethod
    def check_exists(run_dir: Path) -> None:
        """Raise StoreError unless run_dir holds a run; creates nothing."""
        if not (Path(run_dir) / DB_NAME).is_file():
            where = "does not exist" if not Path(run_dir).exists() else f"holds no run (no {DB_NAME})"
            raise StoreError(f"{run_dir} {where}; pass the run_dir that `kernelevo run` printed")

    @staticmethod
    def saved_run(run_dir: Path) -> dict | None:
        """The config of the run that run_dir holds (a run began there: its config is the first thing it stores),
        or None when it holds none (no store, or one of measurements only); creates nothing."""
        path = Path(run_dir) / DB_NAME
        if not path.is_file():
            return None
        db = sqlite3.connect(path, timeout=60)  # reads only: the store may be another process's, being made
        try:
            rows = db.execute("SELECT value FROM meta WHERE key = ?", (meta.CONFIG,)).fetchall()
        except sqlite3.OperationalError:  # no meta table yet: its run has not begun
            return None
        except sqlite3.DatabaseError as exc:
            raise _damaged(path, exc) from None
        finally:
            db.close()
        return _meta_value(meta.CONFIG, rows[0][0]) if rows else None

    @property
    def optuna_url(self) -> str:
        """The run's Optuna storage (Optuna's own tables in run.db): `optuna-dashboard URL` opens its studies."""
        return f"sqlite:///{self.path.resolve()}"

    def close(self) -> None:
        self._db.close()

    def _write(self, sql: str, args=()) -> None:
        with self._lock:
            self._db.execute(sql, args)

    def _read(self, sql: str, args=()) -> list:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # meta ------------------------------------------------------------------------------------------------------
    def set_meta(self, key: str, value) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value, default=str)))

    def get_meta(self, key: str, default=None):
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return _meta_value(key, rows[0][0]) if rows else default

    # individuals -----------------------------------------------------------------------------------------------
    def add_individual(self, individual: Individual) -> None:
        """Write (or, when a resumed generation makes it again, rewrite) one individual."""
        self._write("INSERT OR REPLACE INTO individuals VALUES (?, ?, ?, ?, ?)",
                    (individual.id, individual.generation, individual.key, json.dumps(individual.lineage_dict()),
                     time.time()))

    def _individuals(self, where: str = "", args=()) -> list[Individual]:
        rows = self._read("SELECT i.data, e.result FROM individuals i LEFT JOIN evaluations e ON e.key = i.key "
                          f"{where}", args)
        found = [Individual.from_lineage_dict(json.loads(data), _verdict(result)) for data, result in rows]
        return sorted(found, key=lambda ind: tuple(int(part) for part in ind.id.split(".")))

    def individuals(self, up_to_generation: int | None = None) -> list[Individual]:
        """Every individual (of generations up to the given one), by generation and slot."""
        if up_to_generation is None:
            return self._individuals()
        return self._individuals("WHERE i.generation <= ?", (up_to_generation,))

    def individual(self, individual_id: str) -> Individual | None:
        found = self._individuals("WHERE i.id = ?", (individual_id,))
        return found[0] if found else None

    # evaluations -----------------------------------------------------------------------------------------------
    def evaluation(self, key: str) -> EvalResult | None:
        """The kernel's verdict, or None when there is none (an infrastructure failure that an older version stored
        is none: the kernel is evaluated again)."""
        rows = self._read("SELECT result FROM evaluations WHERE key = ?", (key,))
        return _verdict(rows[0][0]) if rows else None

    def add_evaluation(self, key: str, result: EvalResult) -> None:
        """Store a finished evaluation and log the evaluator call, in one transaction (the first verdict per key
        stays; an infrastructure failure an older version stored gives way to it)."""
        if result.infrastructure:
            raise ValueError(f"evaluation {key}: an infrastructure failure is not the kernel's verdict and is never "
                             f"stored ({result.reason})")
        now = time.time()
        with self._lock:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")  # the write lock first: Optuna writes to this file too
                row = self._db.execute("SELECT result FROM evaluations WHERE key = ?", (key,)).fetchone()
                if row is not None and _verdict(row[0]) is None:
                    self._db.execute("DELETE FROM evaluations WHERE key = ?", (key,))
                self._db.execute("INSERT OR IGNORE INTO evaluations VALUES (?, ?, ?, ?, ?)",
                                 (key, result.status, result.time_s, result.to_json(indent=None), now))
                self._db.execute("INSERT INTO evaluation_log (key, created) VALUES (?, ?)", (key, now))

    def add_reused_evaluations(self, results: dict[str, EvalResult]) -> int:
        """Verdicts judged by an earlier run (key -> result, ``evo.service.seed_verdicts``), stored as this run's
        without an evaluator call: a key already evaluated keeps its own; returns how many were added."""
        now, added = time.time(), 0
        with self._lock:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                for key, result in results.items():
                    if result.infrastructure or self._db.execute("SELECT 1 FROM evaluations WHERE key = ?",
                                                                 (key,)).fetchone():
                        continue
                    self._db.execute("INSERT INTO evaluations VALUES (?, ?, ?, ?, ?)",
                                     (key, result.status, result.time_s, result.to_json(indent=None), now))
                    self._db.execute("INSERT OR IGNORE INTO reused VALUES (?, ?)", (key, now))
                    added += 1
        return added

    def reused_keys(self) -> set[str]:
        """The keys of the verdicts read from an earlier run's cache (``add_reused_evaluations``)."""
        return {row[0] for row in self._read("SELECT key FROM reused")}

    def _count(self, name: str) -> None:
        """One more of the meta counter `name`, over the run's resumes."""
        self._write(f"INSERT INTO meta VALUES ('{name}', '1') ON CONFLICT(key) DO UPDATE SET "
                    f"value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")

    def add_infrastructure_failure(self) -> None:
        """Count an evaluation that ended as an infrastructure failure (no verdict, nothing stored), over the run's
        resumes."""
        self._count(meta.INFRASTRUCTURE_FAILURES)

    def add_evaluation_cut(self) -> None:
        """Count an evaluation killed while running at the search's budget (no verdict, nothing stored)."""
        self._count(meta.EVALUATIONS_CUT)

    def evaluations_cut(self) -> int:
        """Evaluations of the run killed while running at the search's budget (over its resumes)."""
        return self.get_meta(meta.EVALUATIONS_CUT, 0)

    def infrastructure_failures(self) -> int:
        """Evaluations of the run that ended as infrastructure failures (not the kernels' verdicts)."""
        return self.get_meta(meta.INFRASTRUCTURE_FAILURES, 0)

    def evaluation_count(self) -> int:
        """Evaluator calls, repeats included (a run that repeats nothing has as many as distinct evaluations)."""
        return self._read("SELECT COUNT(*) FROM evaluation_log")[0][0]

    def evaluation_seconds(self) -> float:
        """Seconds the run's evaluations took, each its own (``eval_wall_s``): GPU-seconds on a GPU."""
        return self._read("SELECT COALESCE(SUM(json_extract(result, '$.eval_wall_s')), 0) FROM evaluations "
                          "WHERE key NOT IN (SELECT key FROM reused)")[0][0]

    def distinct_evaluation_count(self) -> int:
        """Distinct sources this run's evaluators judged (verdicts reused from a cache left out)."""
        return self._read("SELECT COUNT(*) FROM evaluations WHERE key NOT IN (SELECT key FROM reused)")[0][0]

    def evaluations(self) -> dict[str, EvalResult]:
        """Every evaluation (verdict), by key, in the order they finished."""
        found = {key: _verdict(result) for key, result in self._read("SELECT key, result FROM evaluations "
                                                                     "ORDER BY created")}
        return {key: result for key, result in found.items() if result is not None}

    def evaluation_history(self) -> list[tuple[float, EvalResult]]:
        """Every evaluation (verdict) with when it was stored (``time.time()``), in that order: how the run's best
        kernel improved as it spent GPU time (``evo.reports.anytime``)."""
        found = [(created, _verdict(result)) for created, result in
                 self._read("SELECT created, result FROM evaluations ORDER BY created")]
        return [(created, result) for created, result in found if result is not None]

    def add_profile(self, key: str, profile: dict) -> None:
        """Profiler metrics (``fitness.workers.ncu``'s record) of the kernel evaluated under `key`."""
        self._write("INSERT OR REPLACE INTO profiles VALUES (?, ?, ?)", (key, json.dumps(profile), time.time()))

    def profile(self, key: str) -> dict | None:
        rows = self._read("SELECT profile FROM profiles WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def profiles(self) -> dict[str, dict]:
        """Every profiler record, by evaluation key, in the order they were made."""
        return {key: json.loads(profile) for key, profile in self._read("SELECT key, profile FROM profiles "
                                                                        "ORDER BY created")}

    # checkpoints -----------------------------------------------------------------------------------------------
    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Save the checkpoint under its generation (replacing one saved there before)."""
        self._write("INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?)",
                    (checkpoint.generation, checkpoint.to_json(), time.time()))

    def latest_checkpoint(self) -> Checkpoint | None:
        rows = self._read("SELECT state FROM checkpoints ORDER BY generation DESC LIMIT 1")
        return Checkpoint.from_json(rows[0][0]) if rows else None

    # llm calls -------------------------------------------------------------------------------------------------
    def add_llm_call(self, call: dict) -> None:
        """One LLM request: role, model, prompt_tokens, completion_tokens, cost_usd, cached, request_hash and the
        individual whose operator call sent it."""
        self._write(f"INSERT INTO llm_calls ({', '.join(LLM_COLUMNS)}, created) VALUES "
                    f"({', '.join('?' * len(LLM_COLUMNS))}, ?)",
                    (call.get("role"), call.get("model"), call.get("prompt_tokens", 0),
                     call.get("completion_tokens", 0), call.get("cost_usd", 0.0), int(bool(call.get("cached"))),
                     call.get("request_hash"), call.get("individual"), time.time()))

    def llm_calls(self) -> list[dict]:
        return [dict(zip(LLM_COLUMNS, row))
                for row in self._read(f"SELECT {', '.join(LLM_COLUMNS)} FROM llm_calls ORDER BY seq")]

    def llm_usage(self) -> list[dict]:
        """Per role and model: requests sent (cached replays excluded), replays from the cache, tokens and cost."""
        rows = self._read("SELECT role, model, SUM(1 - cached), SUM(cached), SUM(prompt_tokens * (1 - cached)), "
                          "SUM(completion_tokens * (1 - cached)), COALESCE(SUM(cost_usd * (1 - cached)), 0) "
                          "FROM llm_calls GROUP BY role, model ORDER BY role, model")
        keys = ("role", "model", "calls", "cached", "prompt_tokens", "completion_tokens", "cost_usd")
        return [dict(zip(keys, row)) for row in rows]

    def llm_spend(self) -> list[tuple[float, float]]:
        """Every LLM request sent (cached replays excluded): (when it was recorded, its cost in dollars), in order."""
        return [(created, cost or 0.0) for created, cost in
                self._read("SELECT created, cost_usd FROM llm_calls WHERE cached = 0 ORDER BY seq")]

    def llm_totals(self) -> dict:
        calls, cost = self._read("SELECT COUNT(*), COALESCE(SUM(cost_usd), 0) FROM llm_calls WHERE cached = 0")[0]
        return {"calls": calls, "cost_usd": cost}

    # prompt sizes ----------------------------------------------------------------------------------------------
    def add_prompt(self, role: str, chars: int, parts: dict, individual: str | None = None) -> None:
        """The size of one prompt sent to the agent of `role`: its characters, and how many of them each part of
        its context took (``parts``: part name -> characters)."""
        self._write("INSERT INTO llm_prompts (role, individual, chars, parts, created) VALUES (?, ?, ?, ?, ?)",
                    (role, individual, int(chars), json.dumps(parts), time.time()))

    def prompts(self) -> list[dict]:
        """Every prompt's size, in the order they were built: {role, individual, chars, parts}."""
        return [{"role": role, "individual": individual, "chars": chars, "parts": json.loads(parts)}
                for role, individual, chars, parts in
                self._read("SELECT role, individual, chars, parts FROM llm_prompts ORDER BY seq")]

    def prompt_sizes(self) -> dict:
        """Per role: prompts built, their mean and largest size in characters, and the mean characters of each
        part of their context; roles in the order first seen."""
        sizes: dict[str, dict] = {}
        for prompt in self.prompts():
            role = sizes.setdefault(prompt["role"], {"prompts": 0, "chars": [], "parts": {}})
            role["prompts"] += 1
            role["chars"].append(prompt["chars"])
            for part, chars in prompt["parts"].items():
                role["parts"][part] = role["parts"].get(part, 0) + chars
        return {name: {"prompts": r["prompts"], "mean_chars": sum(r["chars"]) / r["prompts"],
                       "max_chars": max(r["chars"]),
                       "parts": {part: total / r["prompts"] for part, total in r["parts"].items()}}
                for name, r in sizes.items()}
