"""An LLM run end to end on this machine's GPU, against a scripted OpenAI-compatible server on its own loopback
(issue 42). No LLM can be reached from the GPU machines, so THE REPLIES ARE SCRIPTED, NOT A MODEL'S: hand-written
plans and correct Triton kernels for the bundled row_softmax (experiments/llm_scripted/row_softmax.py), the first
kernel broken on purpose so the debugger's repair is exercised. What is real: kernelevo's prompts, litellm's HTTP
client, the call budget and its per-child reservations, the evaluator judging every LLM child on the GPU at full
size, the tuner timing its launch parameters there (search.tuner.trials each), Nsight Compute profiler feedback
(fitness.profile=ncu; where ncu is missing the run says so and goes on), the best kept.

    bash experiments/llm_scripted_gpu.sh                      # on the GPU machine: into $OUT/llm_scripted_gpu
    python experiments/llm_scripted_gpu.py --out DIR -- [Hydra overrides]   # anywhere (the CPU: interpreter sizes)

DIR gets the run directory (run/: summary.json, report.html, report.md with the LLM calls per child and role,
best_kernel.py, run.db), the run's output (run.log), every request's role in order (requests.md) and README.md (the
command, the device, the table of LLM children).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "experiments" / "llm_scripted")]
from llm_server import ScriptedLLMServer  # noqa: E402
import row_softmax as replies  # noqa: E402

BANNER = ("NOTE: the LLM replies in this run are SCRIPTED (experiments/llm_scripted/row_softmax.py), not a model's: "
          "hand-written kernels served by tests/llm_server.py on 127.0.0.1")


class Scripted:
    """Replies by the role the system message names: plans by sibling rank, the coder's in order, the debugger's
    repair."""

    def __init__(self):
        self.lock, self.coder, self.variants = threading.Lock(), iter(replies.CODER), itertools.cycle((4, 8, 32))

    def __call__(self, body: dict) -> dict:
        role = re.search(r"Your role: (\w+)", body["messages"][0]["content"])[1]
        if role == "planner":
            rank = re.search(r"Yours is (\d+):", body["messages"][-1]["content"])
            text = replies.PLANS[(int(rank[1]) - 1 if rank else 0) % len(replies.PLANS)]
        else:
            with self.lock:
                kernel = (replies.DEBUGGER if role == "debugger" else
                          next(self.coder, None) or replies.one_pass_variant(next(self.variants)))
            text = f"```python\n{kernel}```"
        return {"content": text, "usage": {"prompt_tokens": len(json.dumps(body)) // 4,
                                           "completion_tokens": len(text) // 4}}


def command(url: str, run_dir: Path, overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "kernelevo.cli", "run", f"hydra.run.dir={run_dir}", "problem=row_softmax",
            "operators=llm_mutation", "llm=local", "llm.model=openai/scripted-model", f"llm.api_base={url}",
            "llm.budget.max_calls=10", "search.mu=2", "search.lambda_=2", "search.generations=3",
            "search.patience=null", "search.wall_time_s=120", "fitness.profile=ncu",
            "fitness.baselines=[eager,compile]", *overrides]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the run and its tables")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the run (after --)")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(BANNER, flush=True)
    started = time.time()
    with ScriptedLLMServer(Scripted()) as server:
        cmd = command(server.url, out / "run", args.overrides)
        done = subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=540,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
        roles = [re.search(r"Your role: (\w+)", body["messages"][0]["content"])[1]
                 for _, _, body in server.requests]
    (out / "run.log").write_text(done.stdout + done.stderr)
    (out / "requests.md").write_text(f"{BANNER}\n\nRequests in the order the server got them: {', '.join(roles)}\n")
    print(done.stdout[-6000:], done.stderr[-3000:], sep="\n", flush=True)
    if done.returncode != 0:
        return done.returncode
    shown = " ".join(shlex.quote(part) for part in ["python", "experiments/llm_scripted_gpu.py", "--out", args.out,
                                                    "--", *args.overrides])
    report = (out / "run" / "report.md").read_text()
    table = report[report.index("LLM calls per child and role:"):].split("\n\n", 2)[:2] \
        if "LLM calls per child and role:" in report else ["(no LLM call)"]
    summary = json.loads((out / "run" / "summary.json").read_text())
    start_line = next((line for line in done.stdout.splitlines() if "run dir" in line), "")
    ncu = [line for line in done.stdout.splitlines() if "ncu" in line.lower() or "nsight" in line.lower()]
    (out / "README.md").write_text("\n".join([
        "# An LLM run on a GPU with scripted replies", "", f"**{BANNER}.**", "",
        f"Made by `{shown}` in {time.time() - started:.0f} s; the `kernelevo run` it started:", "",
        "```", " ".join(shlex.quote(part) for part in cmd[1:]), "```", "", "Start line:", "", "```", start_line, "```",
        "", "Profiler (Nsight Compute) lines of the run's output:", "", "```", *(ncu or ["(none)"]), "```", "",
        f"Best kernel {summary.get('best_id')}: {json.dumps({k: summary.get(k) for k in ('best_s', 'seed_s', 'speedup_vs_seed', 'speedup_vs_eager', 'speedup_vs_compile', 'llm_calls', 'stop_reason') if k in summary})}",
        "", *table, "", "The run directory: `run/` (summary.json, report.html, report.md, best_kernel.py, run.db).",
        ""]))
    print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
