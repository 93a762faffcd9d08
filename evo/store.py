"""The run store: one SQLite database per run (WAL mode) holding everything a run computed.

Tables: ``meta`` (config, problem), ``genomes`` (every individual ever created, with lineage), ``evaluations``
(one result per distinct evaluated source, the cache that makes the same code never evaluated twice),
``evaluation_log`` (one row per evaluator call: how a run proves it repeated nothing), ``individuals`` (the tuned
outcome of each genome), ``checkpoints`` (the search state after each generation, written in one transaction) and
``llm_calls``. Optuna's studies live in the same file (their own tables), so a resumed run continues them.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from evo.genome import Genome
from fitness.result import EvalResult

DB_NAME = "run.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS genomes (
    id TEXT PRIMARY KEY, generation INTEGER, operator TEXT, parents TEXT, data TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS evaluations (
    key TEXT PRIMARY KEY, status TEXT, time_s REAL, result TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS evaluation_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS individuals (
    genome_id TEXT PRIMARY KEY, generation INTEGER, status TEXT, time_s REAL, params TEXT, eval_key TEXT,
    reason TEXT, created REAL);
CREATE TABLE IF NOT EXISTS checkpoints (generation INTEGER PRIMARY KEY, state TEXT NOT NULL, created REAL);
CREATE TABLE IF NOT EXISTS llm_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, role TEXT, model TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    cost_usd REAL, cached INTEGER, request_hash TEXT, created REAL);
"""


class RunStore:
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / DB_NAME
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    @property
    def optuna_url(self) -> str:
        return f"sqlite:///{self.path}"

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
        return json.loads(rows[0][0]) if rows else default

    # genomes and individuals -------------------------------------------------------------------------------------
    def add_genome(self, genome: Genome) -> None:
        self._write("INSERT OR IGNORE INTO genomes VALUES (?, ?, ?, ?, ?, ?)",
                    (genome.id, genome.generation, genome.operator, json.dumps(list(genome.parents)),
                     json.dumps(genome.to_dict()), time.time()))

    def genome(self, genome_id: str) -> Genome | None:
        rows = self._read("SELECT data FROM genomes WHERE id = ?", (genome_id,))
        return Genome.from_dict(json.loads(rows[0][0])) if rows else None

    def set_individual(self, genome_id: str, generation: int, status: str, time_s, params: dict, eval_key: str,
                       reason: str) -> None:
        self._write("INSERT OR REPLACE INTO individuals VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (genome_id, generation, status, time_s, json.dumps(params), eval_key, reason, time.time()))

    def individuals(self) -> list[dict]:
        rows = self._read("SELECT genome_id, generation, status, time_s, params, eval_key, reason FROM individuals "
                          "ORDER BY created")
        return [{"genome_id": r[0], "generation": r[1], "status": r[2], "time_s": r[3], "params": json.loads(r[4]),
                 "eval_key": r[5], "reason": r[6]} for r in rows]

    # evaluations -----------------------------------------------------------------------------------------------
    def evaluation(self, key: str) -> EvalResult | None:
        rows = self._read("SELECT result FROM evaluations WHERE key = ?", (key,))
        return EvalResult.from_dict(json.loads(rows[0][0])) if rows else None

    def add_evaluation(self, key: str, result: EvalResult) -> None:
        """Store a finished evaluation and log the evaluator call, in one transaction."""
        now = time.time()
        with self._lock:
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute("INSERT OR IGNORE INTO evaluations VALUES (?, ?, ?, ?, ?)",
                                 (key, result.status, result.time_s, result.to_json(indent=None), now))
                self._db.execute("INSERT INTO evaluation_log (key, created) VALUES (?, ?)", (key, now))

    def evaluation_count(self) -> int:
        return self._read("SELECT COUNT(*) FROM evaluation_log")[0][0]

    def distinct_evaluation_count(self) -> int:
        return self._read("SELECT COUNT(*) FROM evaluations")[0][0]

    def evaluations(self) -> list[EvalResult]:
        return [EvalResult.from_dict(json.loads(r[0])) for r in self._read("SELECT result FROM evaluations "
                                                                           "ORDER BY created")]

    # checkpoints -----------------------------------------------------------------------------------------------
    def save_checkpoint(self, generation: int, state: dict) -> None:
        self._write("INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?)",
                    (generation, json.dumps(state, default=str), time.time()))

    def latest_checkpoint(self) -> dict | None:
        rows = self._read("SELECT state FROM checkpoints ORDER BY generation DESC LIMIT 1")
        return json.loads(rows[0][0]) if rows else None

    # llm calls -------------------------------------------------------------------------------------------------
    def add_llm_call(self, call: dict) -> None:
        """One LLM request: role, model, prompt_tokens, completion_tokens, cost_usd, cached, request_hash."""
        self._write("INSERT INTO llm_calls (role, model, prompt_tokens, completion_tokens, cost_usd, cached, "
                    "request_hash, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (call.get("role"), call.get("model"), call.get("prompt_tokens", 0),
                     call.get("completion_tokens", 0), call.get("cost_usd", 0.0), int(bool(call.get("cached"))),
                     call.get("request_hash"), time.time()))

    def llm_calls(self) -> list[dict]:
        cols = ("role", "model", "prompt_tokens", "completion_tokens", "cost_usd", "cached", "request_hash")
        return [dict(zip(cols, row)) for row in self._read(f"SELECT {', '.join(cols)} FROM llm_calls ORDER BY seq")]

    def llm_totals(self) -> dict:
        calls, cost = self._read("SELECT COUNT(*), COALESCE(SUM(cost_usd), 0) FROM llm_calls WHERE cached = 0")[0]
        return {"calls": calls, "cost_usd": cost}
