"""Process isolation for untrusted candidates.

Every job runs in a fresh ``python -m fitness.worker`` process of its own, in a private directory with a private
Triton and Inductor cache, with an environment stripped of secrets and provider variables. A crash, a hang past
the timeout, a CUDA error or ``os._exit`` costs that one job: the process (and its process group) is killed or
simply gone, and the next job gets a new one. To hide start-up cost, the next worker is started (torch and triton
imported, CUDA untouched) while the current job runs.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
PROVIDER_PREFIXES = (
    "OPENAI", "ANTHROPIC", "AZURE", "AWS", "GOOGLE", "GCLOUD", "GEMINI", "VERTEX", "HF_", "HUGGING", "COHERE",
    "MISTRAL", "GROQ", "TOGETHER", "DEEPSEEK", "OPENROUTER", "REPLICATE", "FIREWORKS", "LITELLM", "XAI",
    "PERPLEXITY", "OLLAMA", "VLLM", "WANDB", "ANYSCALE", "DEEPINFRA", "CEREBRAS", "NVIDIA_NIM", "GITHUB", "GH_",
    "KERNELEVO_LLM",
)
REPO_ROOT = Path(__file__).resolve().parent.parent
LOG_TAIL_CHARS = 3000


def is_secret_variable(name: str) -> bool:
    upper = name.upper()
    return any(m in upper for m in SECRET_MARKERS) or upper.startswith(PROVIDER_PREFIXES)


def worker_environment(base: dict, workdir: Path, interpret: bool, cache_dir: Path | None = None) -> dict:
    """The child's environment: the parent's minus secrets, confined to `workdir`, with private caches."""
    env = {k: v for k, v in base.items() if not is_secret_variable(k)}
    caches = cache_dir or workdir
    env.update(HOME=str(workdir), TMPDIR=str(workdir), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               TRITON_CACHE_DIR=str(caches / "triton"), TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p))
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


@dataclass
class JobOutcome:
    status: str  # "finished", "timeout" or "crashed"
    result: dict | None
    exit_code: int | None
    log_tail: str
    wall_s: float

    def failure_reason(self, timeout_s: float) -> str:
        if self.status == "timeout":
            return f"the evaluation did not finish within {timeout_s:g} s and was killed (infinite loop or hang?)"
        code = self.exit_code
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        return f"the worker process {how} before writing a result (segfault, os._exit or sys.exit in the candidate?)"


class WorkerProcess:
    """One started worker: its process, private directory and log file."""

    def __init__(self, env_for, python: str):
        self.workdir = Path(tempfile.mkdtemp(prefix="kernelevo-worker-"))
        self.log_path = self.workdir / "worker.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([python, "-m", "fitness.worker"], cwd=self.workdir, env=env_for(self.workdir),
                                     stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def send(self, job: dict) -> None:
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.close()

    def wait(self, timeout_s: float) -> bool:
        """True when the process ended in time; otherwise its whole process group is killed."""
        try:
            self.proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            self.kill()
            return False

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def log_tail(self) -> str:
        self._log.close()
        data = self.log_path.read_bytes()[-LOG_TAIL_CHARS:]
        return data.decode(errors="replace")

    def remove(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        if not self._log.closed:
            self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class Sandbox:
    """Runs jobs in fresh worker processes; untrusted jobs get a warm spare, trusted ones a persistent cache."""

    def __init__(self, device: str, trusted_cache_dir: Path | None = None, prestart: bool = True,
                 python: str = sys.executable, base_env: dict | None = None):
        self.interpret = not device.startswith("cuda")
        self.trusted_cache_dir = Path(trusted_cache_dir) if trusted_cache_dir else None
        self.prestart = prestart
        self.python = python
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.results_dir = Path(tempfile.mkdtemp(prefix="kernelevo-results-"))
        self._spare: WorkerProcess | None = None
        self._jobs = 0

    def _untrusted_env(self, workdir: Path) -> dict:
        return worker_environment(self.base_env, workdir, self.interpret)

    def _trusted_env(self, workdir: Path) -> dict:
        return worker_environment(self.base_env, workdir, self.interpret, self.trusted_cache_dir)

    def _take_worker(self, trusted: bool) -> WorkerProcess:
        if trusted:
            return WorkerProcess(self._trusted_env, self.python)
        worker, self._spare = self._spare, None
        if worker is None or worker.proc.poll() is not None:
            if worker is not None:
                worker.remove()
            worker = WorkerProcess(self._untrusted_env, self.python)
        if self.prestart:
            self._spare = WorkerProcess(self._untrusted_env, self.python)
        return worker

    def run(self, job: dict, timeout_s: float, trusted: bool = False) -> JobOutcome:
        """Run one job in its own process; never raises for anything the job does."""
        self._jobs += 1
        result_path = self.results_dir / f"job-{self._jobs}.json"
        worker = self._take_worker(trusted)
        start = time.perf_counter()
        try:
            worker.send({**job, "result_path": str(result_path)})
        except BrokenPipeError:
            pass  # the worker died before reading its job; reported as crashed below
        finished = worker.wait(timeout_s)
        wall = time.perf_counter() - start
        tail = worker.log_tail()
        worker.remove()
        result = json.loads(result_path.read_text()) if finished and result_path.is_file() else None
        result_path.unlink(missing_ok=True)
        status = "finished" if result is not None else ("timeout" if not finished else "crashed")
        return JobOutcome(status, result, worker.proc.returncode, tail, wall)

    def close(self) -> None:
        if self._spare is not None:
            self._spare.remove()
            self._spare = None
        shutil.rmtree(self.results_dir, ignore_errors=True)
