"""`kernelevo list problems|profiles|policies|operators`: what there is to choose from, read from where it lives
(``fitness/suite/suite.yaml`` and the problem files, ``hardware_profiles/``, ``fitness/comparison/policies/``,
``conf/operators/``), never from a copy."""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from kernelevo.config import CONF_DIR


def _sizes(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items()) or "-"


def _comment(path: Path) -> str:
    """A config file's first comment line: what the option is."""
    first = next((line for line in path.read_text().splitlines() if line.startswith("#")), "#")
    return first.lstrip("# ").strip()


def problems() -> list[str]:
    from fitness.problems.problem import load_problem, resolve_problem, suite_manifest
    from fitness.problems.sizes import MAX_ELEMENTS, int_constants

    lines = []
    for name, entry in suite_manifest().items():
        full = int_constants(load_problem(resolve_problem(name)).module)
        lines += [f"{name}: {entry.get('description', '')}",
                  f"    sizes {_sizes(full)}; on the CPU interpreter {_sizes(entry.get('test_sizes') or {})}"]
    return lines + ["", "kernelevo run problem=NAME; or problem=PATH for any KernelBench-format file (on the CPU "
                        f"interpreter shrunk to a largest tensor of at most {MAX_ELEMENTS:,} elements: "
                        f"fitness/problems/sizes.py)"]


def profiles() -> list[str]:
    from hardware_profiles import available_profiles, load_profile

    lines = []
    for name in available_profiles():
        p = load_profile(name)
        if p.kind != "gpu":
            lines.append(f"{name}: {p.display_name} ({p.kind}: times are wall-clock, no speed-of-light figures)")
            continue
        bandwidth = f"{p.memory_bandwidth_bytes_per_s / 1e12:.2f} TB/s" if p.memory_bandwidth_bytes_per_s else "n/a"
        peaks = ", ".join(f"{k} {v / 1e12:g}" for k, v in p.peak_flops_per_s.items() if v) or "n/a"
        lines.append(f"{name}: {p.display_name} ({p.kind}); {p.sm_count} SMs, L2 {p.l2_cache_bytes / 2**20:g} MiB, "
                     f"{bandwidth}, peak TFLOP/s {peaks}")
    return lines + ["", "hardware.profile=NAME (auto: the live GPU's, or the CPU interpreter's)"]


def policies() -> list[str]:
    from fitness.comparison.policy import policy_dir

    lines = []
    for path in sorted(policy_dir().glob("*.yaml")):
        policy = yaml.safe_load(path.read_text())
        lines.append(f"{path.stem}: {policy.get('description', '')}")
    return lines + ["", "fitness/policy=NAME (default: triton)"]


def operators() -> list[str]:
    from hydra.utils import instantiate  # an entry's weight, given or its class's default

    lines = []
    for path in sorted((CONF_DIR / "operators").glob("*.yaml")):
        entries = yaml.safe_load(path.read_text()).get("list") or []
        ops = ", ".join(f"{e['_target_'].rsplit('.', 1)[-1]} ({instantiate(e).weight:g})" for e in entries)
        lines.append(f"{path.stem}: {_comment(path)}\n    {ops}")
    return lines + ["", "operators=NAME (default: offline; the LLM ones need llm=openai|anthropic|local); "
                        "weights are relative probabilities"]


LISTS = {"problems": problems, "profiles": profiles, "policies": policies, "operators": operators}


def print_list(args: list[str]) -> int:
    """Print the list asked for; the exit status."""
    if len(args) != 1 or args[0] not in LISTS:
        print(f"usage: kernelevo list {{{','.join(LISTS)}}}", file=sys.stderr)
        return 2
    print("\n".join(LISTS[args[0]]()))
    return 0
