"""Prompt sizes and calls per distinct prompt, per LLM role, of one run against the scripted server -- before and
after a change, side by side.

The run is `experiments/llm_prompt_examples.py`'s (problem layernorm, `llm.initialise=from_seed`, two generations
of three children from two survivors, canned replies by role: no model); it is made with the kernelevo of each
checkout given (``--before DIR``: another checkout, e.g. `git archive <commit> | tar -x -C DIR`; the after is this
one). What is counted is every chat request the server received: its characters (system and user message), and
how many requests were sent per distinct prompt (byte-identical messages: siblings told the same thing ask the
same question, and a model answers it alike).

    python experiments/llm_prompt_stats.py --before /tmp/before --out
    experiments/results/llm_prompt_stats_cpu/llm_prompt_stats_cpu.md \
        -- hardware.profile=h100_sxm
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "experiments"))
from llm_prompt_examples import ROLES, CannedReplies, ScriptedLLMServer, run_command  # noqa: E402


def requests_of(repo: Path, overrides: list[str]) -> list[dict]:
    """The chat requests (JSON bodies) one run of `repo`'s kernelevo sent to the scripted server."""
    with tempfile.TemporaryDirectory() as work, ScriptedLLMServer(CannedReplies()) as server:
        command = run_command(server.url, Path(work) / "llm-cache", Path(work) / "run", overrides)
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=3600,
                              env={**os.environ, "PYTHONPATH": str(repo)})
        if done.returncode != 0:
            raise RuntimeError(f"the run of {repo} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return [body for _, _, body in server.requests]


def stats(requests: list[dict]) -> dict:
    """Per role: requests, distinct prompts, requests per distinct prompt, mean and max characters."""
    table = {}
    for role in ROLES:
        mine = [body["messages"] for body in requests if f"Your role: {role}." in body["messages"][0]["content"]]
        if not mine:
            continue
        sizes = [sum(len(m["content"]) for m in messages) for messages in mine]
        distinct = Counter(json.dumps(messages, sort_keys=True) for messages in mine)
        table[role] = {"requests": len(mine), "distinct": len(distinct), "per_distinct": len(mine) / len(distinct),
                       "most_repeated": max(distinct.values()), "mean_chars": sum(sizes) / len(sizes),
                       "max_chars": max(sizes)}
    return table


def markdown(before: dict, after: dict, command: str) -> str:
    lines = ["# LLM prompt sizes and calls per distinct prompt, before and after", "", f"Made by `{command}`.", "",
             "Every chat request of one run of each checkout against the scripted server (canned replies by role; "
             "a planner told its rank among siblings answers with the idea of that rank, as a model would). "
             "Requests per distinct prompt above 1: byte-identical requests, which a model answers alike (a "
             "duplicate kernel, then more calls to make another). Characters: system and user message.", "",
             "| role | requests (before / after) | distinct prompts | requests per distinct prompt (most repeated) | "
             "mean chars | max chars |", "|---|---|---|---|---|---|"]
    for role in ROLES:
        b, a = before.get(role), after.get(role)
        if b is None and a is None:
            continue
        b, a = b or {}, a or {}

        def pair(key, fmt="{:.0f}"):
            return " / ".join("-" if key not in side else fmt.format(side[key]) for side in (b, a))

        lines.append(f"| {role} | {pair('requests')} | {pair('distinct')} | {pair('per_distinct', '{:.2f}')} "
                     f"({pair('most_repeated')}) | {pair('mean_chars')} | {pair('max_chars')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, type=Path, help="the checkout to compare with")
    parser.add_argument("--out", required=True, type=Path, help="the markdown table to write")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of both runs (after --)")
    args = parser.parse_args()
    before, after = stats(requests_of(args.before.resolve(), args.overrides)), \
        stats(requests_of(REPO, args.overrides))
    command = " ".join(shlex.quote(part) for part in ["python", "experiments/llm_prompt_stats.py", "--before",
                                                      str(args.before), "--out", str(args.out), "--",
                                                      *args.overrides])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(before, after, command))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
