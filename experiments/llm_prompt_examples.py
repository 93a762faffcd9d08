"""Example prompts of every LLM role, from a real `kernelevo run` against the scripted OpenAI-compatible server.

The server (tests/llm_server.py) answers with canned replies chosen by the role named in the system message: the
initialiser rewrites the seed, the planner plans (the idea of the rank among siblings its prompt gives it), the
coder's first kernel fails (an undefined name in the kernel)
and the debugger repairs it, later coder and crossover replies are variants of the seed's launch constants. No
model is involved: the replies are fixed. The PROMPTS are what kernelevo built and sent, captured from the HTTP
requests; the last prompt of each role is written to OUT/<role>.md, with the command that made it. With
`fitness.profile=ncu` (on a GPU), OUT/profiler.md has what each profiling run cost against its evaluation.

    python experiments/llm_prompt_examples.py --out experiments/results/llm_prompts_cpu -- hardware.profile=h100_sxm
    python experiments/llm_prompt_examples.py --out experiments/results/llm_prompts_gpu -- fitness.profile=ncu
                                                                                           # on a GPU machine

Extra arguments after `--` are Hydra overrides of the run (they beat the defaults below).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the project (evo.records.store, read after the run) and the server
from llm_server import ScriptedLLMServer  # noqa: E402

ROLES = ("initialiser", "planner", "coder", "debugger", "crossover")
SEED = (REPO / "fitness" / "suite" / "layernorm" / "seed.py").read_text()
SPACE = ('BLOCK_SIZE = 1024\nNUM_WARPS = 4\n'
         'TUNABLE = {"BLOCK_SIZE": [256, 512, 1024, 2048, 4096], "NUM_WARPS": [2, 4, 8, 16]}')
PLAN = ("## Plan\nIdea: one pass over each row held in registers, with 8 warps per row\n"
        "1. [layernorm_kernel, lines 15-37] Keep the row in registers: load it once with a BLOCK_SIZE "
        "covering the whole row, compute mean and variance from registers, and write the output in the same pass "
        "(one read and one write of x instead of three reads).\n2. [constant NUM_WARPS, line 8] Raise NUM_WARPS to "
        "8 so one program has enough threads for an 8192-wide row.")


def variant(block: int, warps: int) -> str:
    """The seed with one launch configuration fixed: a distinct kernel per (block, warps)."""
    return SEED.replace(SPACE, f'BLOCK_SIZE = {block}\nNUM_WARPS = {warps}\n'
                               f'TUNABLE = {{"BLOCK_SIZE": [{block}], "NUM_WARPS": [{warps}]}}')


BROKEN = variant(2048, 8).replace("mean = tl.sum(acc, axis=0) / n_cols", "mean = tl.sum(acc, axis=0) / n_columns")


class CannedReplies:
    """Replies by role; the coder's first kernel is broken (the debugger's reply repairs it), every later kernel is
    a new launch configuration, so no reply repeats a kernel."""

    def __init__(self):
        self.variants = iter([(b, w) for w in (2, 4, 8, 16) for b in (256, 512, 1024, 4096)])
        self.coder_calls = 0

    def __call__(self, body: dict) -> dict:
        role = re.search(r"Your role: (\w+)", body["messages"][0]["content"])[1]
        if role == "planner":  # a planner told its rank among siblings answers with the idea of that rank
            rank = re.search(r"Yours is (\d+):", body["messages"][1]["content"])
            text = PLAN.replace(" per row\n", f" per row (my idea ranked {rank[1]})\n") if rank else PLAN
        elif role == "coder" and self.coder_calls == 0:
            self.coder_calls += 1
            text = f"```python\n{BROKEN}```"
        elif role == "debugger":
            text = f"The variable is `n_cols`:\n```python\n{variant(2048, 8)}```"
        else:
            text = f"```python\n{variant(*next(self.variants))}```"
        return {"content": text, "usage": {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": 400}}


def run_command(url: str, cache: Path, run_dir: Path, overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "kernelevo.cli", "run", f"hydra.run.dir={run_dir}", "problem=layernorm",
            "operators=llm", "llm=local",
            "llm.model=openai/scripted-model", f"llm.api_base={url}", f"llm.cache_dir={cache}",
            "llm.initialise=from_seed", "search.mu=2", "search.lambda_=3", "search.parallel=1",
            "search.generations=2", "search.patience=null", "search.tuner.trials=1", "fitness.trials=2",
            "operators.list.1.weight=1.0", *overrides]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for <role>.md")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the run (after --)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work, ScriptedLLMServer(CannedReplies()) as server:
        run_dir = Path(work) / "run"
        command = run_command(server.url, Path(work) / "llm-cache", run_dir, args.overrides)
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=3600,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
        requests = server.requests
        profiled = profiler_costs(run_dir) if done.returncode == 0 else []
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
        return done.returncode
    shown = " ".join(shlex.quote(part) for part in ["python", "experiments/llm_prompt_examples.py", "--out",
                                                    args.out, "--", *args.overrides])
    start_line = next((line for line in done.stdout.splitlines() if "run dir" in line), "")
    for role in ROLES:  # the last prompt of each role: the later a prompt, the more of the search it tells
        last = next((body for _, _, body in reversed(requests)
                     if f"Your role: {role}." in body["messages"][0]["content"]), None)
        if last is None:
            print(f"no {role} prompt was sent", file=sys.stderr)
            continue
        text = [f"# Example prompt: {role}", "", f"Made by `{shown}` (a run of `kernelevo run` against the scripted "
                f"server of tests/llm_server.py: canned replies, real prompts). The run's start line names the "
                f"device it ran on:",
                "", "```", start_line, "```", ""]
        for message in last["messages"][:2]:
            text += [f"## {message['role']} message", "", "````markdown", message["content"].rstrip(), "````", ""]
        (out / f"{role}.md").write_text("\n".join(text))
        print(f"wrote {out / f'{role}.md'}")
    if profiled:
        (out / "profiler.md").write_text("\n".join([
            "# What profiler feedback cost", "", f"Made by `{shown}`: every profiling run of the search (one per "
            f"kernel profiled), its wall time against the evaluation of the same kernel, and what it gave.", "",
            "| kernel (evaluation key) | evaluation (s) | profiling run (s) | kernels profiled | note |",
            "|---|---|---|---|---|", *profiled, ""]))
        print("\n".join(profiled))
    return 0


def profiler_costs(run_dir: Path) -> list[str]:
    """A table row per profiling run of the run in run_dir (none when profiling was off)."""
    from evo.records.store import RunStore

    store = RunStore(run_dir, create=False)
    try:
        evaluations = store.evaluations()
        return [f"| {key[:12]} | {evaluations[key].eval_wall_s:.2f} | {record.get('wall_s', 0.0):.2f} | "
                f"{len(record.get('kernels', []))} | {record.get('note', '')[:200]} |"
                for key, record in store.profiles().items() if key in evaluations]
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
