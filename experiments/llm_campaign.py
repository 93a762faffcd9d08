"""The LLM team at campaign scale (issue 66, item 4): several KernelBench problems searched at once, each with its own
budget of LLM calls answered with a model's latency, to see whether evaluations go on while calls wait.

THE REPLIES ARE SCRIPTED, NOT A MODEL'S. Each problem's run talks to its own scripted OpenAI-compatible server
(tests/llm_server.py on 127.0.0.1) that answers every request after `--latency-s`: a planner gets a generic plan, a
coder or debugger gets the kernel it was shown (the parent's listing, or the failing kernel) back with one line
added (``_scripted_variant = N``, so every child is a kernel of its own, as correct as its parent). What is real:
kernelevo's prompts, litellm's HTTP client, the call budget and its reservations, the children in flight, the
evaluator judging and the tuner timing every child (on a GPU at full size; on the CPU through the interpreter).

Measured: calls in flight over time (sampled every 0.5 s at the servers), GPU busy (nvidia-smi every 0.5 s, only
where a GPU is), evaluations per hour, wall time per call, whether each run stayed within its budget of calls and
wall time, and whether every request of a run was distinct (the request bodies hashed at its server).

    bash experiments/llm_campaign.sh KERNELBENCH_DIR            # on the GPU machine: into $OUT/llm_campaign
    python experiments/llm_campaign.py --kernelbench DIR --out OUT [--problems a.py,b.py] [--calls N]
        [--latency-s S] [--in-flight K] [--wall-s W] -- [Hydra overrides of every run]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests")]
from llm_server import ScriptedLLMServer  # noqa: E402

BANNER = ("SCRIPTED REPLIES, NOT A MODEL'S: every LLM reply in this measurement was written by "
          "experiments/llm_campaign.py's script (the kernel shown to the coder, returned with one line added) and "
          "served by tests/llm_server.py on 127.0.0.1 after a fixed latency")
# small level-1 problems whose torch.compile seeds convert (GEMMs call a library kernel, which the policy rejects)
PROBLEMS = "level1/88_MinGPTNewGelu.py,level1/40_LayerNorm.py,level1/98_KLDivLoss.py"
SAMPLE_S = 0.5
_LISTING = re.compile(r"## Parent kernel[^\n]*\n```[^\n]*\n(.*?)\n```", re.S)
_NUMBERED = re.compile(r"^ *\d+\| ?(.*)$")
_FAILING = re.compile(r"## Failing kernel\n```python\n(.*?)```", re.S)
_ANY = re.compile(r"```python\n(.*?)```", re.S)


def shown_kernel(prompt: str) -> str | None:
    """The kernel a coder (the parent's numbered listing) or a debugger (the failing kernel) was shown."""
    listing = _LISTING.search(prompt)
    if listing:
        return "\n".join(_NUMBERED.match(line)[1] if _NUMBERED.match(line) else line
                         for line in listing[1].split("\n")) + "\n"
    found = _FAILING.search(prompt) or _ANY.search(prompt)
    return found[1] if found else None


def request_digest(body) -> str:
    """sha256 of a request body's canonical JSON: two requests with one digest are the same request."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class Script:
    """One run's scripted replies, each after `latency_s`; every request's digest, arrival and answer time kept."""

    def __init__(self, latency_s: float):
        self.latency_s, self.lock, self.variant = latency_s, threading.Lock(), 0
        self.digests: list[str] = []
        self.roles: list[str] = []

    def __call__(self, body: dict) -> dict:
        messages = body["messages"]
        role = re.search(r"Your role: (\w+)", messages[0]["content"])
        role = role[1] if role else "?"
        with self.lock:
            self.digests.append(request_digest(body))
            self.roles.append(role)
            self.variant += 1
            variant = self.variant
        if role == "planner":
            text = (f"## Plan\nIdea: scripted plan {variant} (not a model's)\n1. [module constants] Keep the kernel "
                    f"and add the marker line _scripted_variant = {variant}.")
        else:
            kernel = shown_kernel(messages[-1]["content"]) or ""
            text = f"```python\n{kernel.rstrip()}\n_scripted_variant = {variant}\n```"
        return {"content": text, "delay_s": self.latency_s,
                "usage": {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": len(text) // 4}}


class Sampler:
    """Every SAMPLE_S: the calls in flight at each server and, where nvidia-smi is, the GPU's utilisation."""

    def __init__(self, servers: dict):
        self.servers, self.samples, self.gpu = servers, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._smi = None
        if shutil.which("nvidia-smi"):
            self._smi = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu",
                                          "--format=csv,noheader,nounits", f"--loop-ms={int(SAMPLE_S * 1000)}"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            threading.Thread(target=self._read_smi, daemon=True).start()

    def _read_smi(self) -> None:
        for line in self._smi.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[1].isdigit():
                self.gpu.append((time.monotonic(), int(parts[0]), int(parts[1])))

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.samples.append((time.monotonic(), {name: s.in_flight for name, s in self.servers.items()}))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        if self._smi is not None:
            self._smi.terminate()
            self._smi.wait()


def run_command(problem: Path, run_dir: Path, url: str, args, overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "kernelevo.cli", "run", f"hydra.run.dir={run_dir}", f"problem={problem}",
            "operators=llm_mutation", "llm=local", "llm.model=openai/scripted-model", f"llm.api_base={url}",
            f"llm.budget.max_calls={args.calls}", f"llm.concurrency={args.in_flight}",
            f"search.parallel={args.in_flight}", f"search.staleness={2 * args.in_flight}",
            "search.generations=1000", "search.patience=null", f"search.wall_time_s={args.wall_s}",
            "fitness.baselines=[eager,compile]", "inductor=none", *overrides]


def _round(value):
    return None if value is None else round(value, 1)


def spread(values: list[float]) -> dict:
    return {"max": max(values, default=0), "median": statistics.median(values) if values else 0,
            "mean": round(statistics.fmean(values), 2) if values else 0}


def in_window(samples: list, start: float, end: float) -> list:
    return [s for s in samples if start <= s[0] <= end]


def measure(args, overrides: list[str], out: Path, work: Path) -> dict:
    """Every problem's run at once, each against its own scripted server; what they did."""
    names = [Path(p).stem for p in args.problems.split(",")]
    scripts = {name: Script(args.latency_s) for name in names}
    servers = {name: ScriptedLLMServer(scripts[name]).start() for name in names}
    runs, started = {}, time.monotonic()  # the servers' clock
    try:
        with Sampler(servers) as sampler:
            for name, problem in zip(names, args.problems.split(",")):
                cmd = run_command(Path(args.kernelbench).resolve() / problem, work / name, servers[name].url, args,
                                  overrides)
                log = open(work / f"{name}.log", "w")
                runs[name] = (cmd, log, subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT,
                                                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(
                                                             None, [str(REPO), os.environ.get("PYTHONPATH")]))}))
            deadline, codes = started + args.timeout_s, {}
            for name, (_, _, proc) in runs.items():
                try:
                    codes[name] = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    codes[name] = f"killed at {args.timeout_s:g} s"
    finally:
        for name, (_, log, proc) in runs.items():
            if proc.poll() is None:
                proc.kill()
            log.close()
        times = {name: list(s._times) for name, s in servers.items()}
        for server in servers.values():
            server.stop()
    return {"names": names, "runs": runs, "codes": codes, "scripts": scripts, "servers": servers,
            "samples": sampler.samples, "gpu": sampler.gpu, "times": times, "started": started,
            "ended": time.monotonic()}


def per_run(name: str, m: dict, args, work: Path) -> dict:
    summary_path = work / name / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    script, times = m["scripts"][name], m["times"][name]
    window = (min(times), max(times)) if times else (m["started"], m["ended"])
    flight = [s[1][name] for s in in_window(m["samples"], *window)]
    wall = summary.get("search_wall_s")
    calls = summary.get("llm_calls", 0)
    return {"problem": name, "exit_code": m["codes"].get(name), "status": summary.get("status"),
            "stop_reason": summary.get("stop_reason"), "requests": len(script.digests),
            "distinct_requests": len(set(script.digests)), "roles": {r: script.roles.count(r) for r in
                                                                      sorted(set(script.roles))},
            "llm_calls": calls, "calls_in_flight": spread(flight), "evaluations": summary.get("evaluations"),
            "evaluations_per_hour": _round(summary.get("evaluations_per_hour")), "search_wall_s": _round(wall),
            "search_s_per_call": round(wall / calls, 2) if wall and calls else None,
            "gpu_busy_nvml": summary.get("gpu_busy"), "best_s": summary.get("best_s"),
            "within_calls": len(script.digests) <= args.calls and calls <= args.calls,
            "within_wall": wall is not None and wall <= args.wall_s + (summary.get("over_budget_s") or 0) + 1e-6
            and (summary.get("over_budget_s") or 0) <= 0.1 * args.wall_s}


def report(m: dict, args, overrides: list[str], out: Path, work: Path) -> dict:
    rows = [per_run(name, m, args, work) for name in m["names"]]
    every = [t for ts in m["times"].values() for t in ts]
    window = (min(every), max(every)) if every else (m["started"], m["ended"])
    flight = [sum(s[1].values()) for s in in_window(m["samples"], *window)]
    gpu = [g[2] for g in in_window(m["gpu"], *window)]
    shown = " ".join(shlex.quote(p) for p in ["python", "experiments/llm_campaign.py", *sys.argv[1:]])
    result = {"scripted": BANNER, "command": shown, "device": device(), "calls_budget": args.calls,
              "latency_s": args.latency_s, "in_flight_setting": args.in_flight, "wall_budget_s": args.wall_s,
              "window_s": round(window[1] - window[0], 1), "calls_in_flight": spread(flight),
              "gpu_busy_percent": round(statistics.fmean(gpu), 1) if gpu else None,
              "gpu_samples": len(gpu), "runs": rows,
              "all_requests_distinct": all(r["requests"] == r["distinct_requests"] for r in rows),
              "commands": {name: " ".join(shlex.quote(p) for p in m["runs"][name][0][1:]) for name in m["names"]}}
    (out / "campaign.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown_table(result)
    (out / "table.md").write_text(table)
    (out / "README.md").write_text("\n".join([
        "# The LLM team at campaign scale", "", f"**{BANNER}.**", "", f"Made by `{shown}`", "",
        f"on {result['device']}: {len(rows)} problems at once, each its own `kernelevo run` (the commands are in "
        "campaign.json) against its own scripted server; per run a budget of "
        f"{args.calls} calls, {args.latency_s:g} s a call, {args.in_flight} calls and children in flight "
        f"(`llm.concurrency`, `search.parallel`), {args.wall_s:g} s of search.", "", table,
        "Calls in flight are sampled every 0.5 s at the servers over the window from the first request to the last "
        "answer; GPU busy is nvidia-smi's utilisation over the same window (none without a GPU); search s per call "
        "is the run's search wall time over its calls. Within budget: no more calls than the budget, at the server "
        "and in the run store, and the search's wall time within its budget (past it only by the cut's tail, at most "
        "10 %). runs/NAME/ holds each run's summary.json, report.md and log.",
        ""]))
    for name in m["names"]:
        (out / "runs" / name).mkdir(parents=True, exist_ok=True)
        for part in ("summary.json", "report.md"):
            if (work / name / part).exists():
                shutil.copy(work / name / part, out / "runs" / name / part)
        if (work / f"{name}.log").exists():
            shutil.copy(work / f"{name}.log", out / "runs" / name / "run.log")
    return result


def markdown_table(result: dict) -> str:
    lines = [f"SCRIPTED replies (not a model's), {result['latency_s']:g} s a call; {result['device']}.", "",
             "| problem | exit | calls (budget) | requests distinct | in flight max / median | evaluations | "
             "evaluations / h | search s | search s / call | within budget | stop |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        lines.append(f"| {r['problem']} | {r['exit_code']} | {r['llm_calls']} ({result['calls_budget']}) | "
                     f"{r['distinct_requests']} of {r['requests']} | {r['calls_in_flight']['max']} / "
                     f"{r['calls_in_flight']['median']} | {r['evaluations']} | {r['evaluations_per_hour']} | "
                     f"{r['search_wall_s']} | {r['search_s_per_call']} | "
                     f"{'yes' if r['within_calls'] and r['within_wall'] else 'no'} | {r['stop_reason']} |")
    flight, busy = result["calls_in_flight"], result["gpu_busy_percent"]
    lines += ["", f"All runs together over {result['window_s']} s: calls in flight max {flight['max']}, median "
                  f"{flight['median']}; GPU busy {'%s %%' % busy if busy is not None else 'not measured (no GPU)'}; "
                  f"every request of every run distinct: {'yes' if result['all_requests_distinct'] else 'NO'}.", ""]
    return "\n".join(lines) + "\n"


def device() -> str:
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True)
        if done.returncode == 0 and done.stdout.strip():
            return "GPU " + ", ".join(done.stdout.split("\n")[:1]).strip()
    return f"CPU ({os.cpu_count()} cores), kernels through Triton's interpreter at test sizes"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernelbench", required=True, help="the KernelBench folder holding level1/, level2/")
    parser.add_argument("--out", required=True)
    parser.add_argument("--problems", default=PROBLEMS, help="comma-separated, relative to --kernelbench")
    parser.add_argument("--calls", type=int, default=100, help="llm.budget.max_calls of each run")
    parser.add_argument("--latency-s", type=float, default=20.0, help="the scripted server's time per reply")
    parser.add_argument("--in-flight", type=int, default=16, help="llm.concurrency and search.parallel per run")
    parser.add_argument("--wall-s", type=float, default=300.0, help="search.wall_time_s of each run")
    parser.add_argument("--timeout-s", type=float, default=500.0, help="all runs killed after this")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of every run (after --)")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    work = out / "work"
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(exist_ok=True)
    print(BANNER, flush=True)
    result = report(measure(args, args.overrides, out, work), args, args.overrides, out, work)
    print((out / "table.md").read_text(), flush=True)
    if not os.environ.get("KEEP_WORK"):
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["exit_code"] == 0 for r in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
