"""Seeds taken from torch.compile: `problem.seed=inductor`, and the default for a problem that has no seed.

``inductor_seed`` compiles the problem's Model with torch.compile in a process of its own on the search's device
(``capture.py``), converts what Inductor wrote into a standalone candidate (``convert.py``), and caches the capture
per (problem file and sizes, device and hardware profile, torch and triton versions, GEMM templates or library
calls): a second run, or a resume, does not compile again (the conversion, milliseconds, is redone, so a newer
converter applies). The seed is also written into the run directory, where a user opens it and sees the kernels.

Under policy ``triton`` (no torch compute in forward) matmuls are captured as Inductor's Triton GEMM templates
(max-autotune over Triton's backend), under ``kernelbench`` as the library calls Inductor prefers.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from fitness import pyast
from fitness.genome import short_hash
from fitness.problem import ProblemSpec
from operators.inductor_seed.convert import OTHER_SEEDS, SeedError, convert

REPO = Path(__file__).resolve().parents[2]
SEED_FILE = "seed_inductor.py"
CAPTURE_TIMEOUT_S = 900


def _versions() -> str:
    found = []
    for package in ("torch", "triton"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} ?")
    return ", ".join(found)


def cache_key(spec: ProblemSpec, device: str, profile: str, templates: bool = False, tf32: bool = False) -> str:
    problem = Path(spec.path).read_text()
    return short_hash(json.dumps([problem, spec.sizes, device.split(":")[0], profile, _versions(), templates, tf32],
                                 sort_keys=True))


def capture(spec: ProblemSpec, device: str, templates: bool = False, tf32: bool = False,
            timeout_s: float = CAPTURE_TIMEOUT_S) -> dict:
    """Run ``capture.py`` in its own process; SeedError with its output's tail when it fails."""
    with tempfile.TemporaryDirectory(prefix="kernelevo-inductor-") as tmp:
        spec_file, out_file = Path(tmp) / "spec.json", Path(tmp) / "captured.json"
        spec_file.write_text(json.dumps(spec.to_dict()))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        try:
            done = subprocess.run([sys.executable, "-m", "operators.inductor_seed.capture", str(spec_file),
                                   str(out_file), device, *(["templates"] if templates else []),
                                   *(["tf32"] if tf32 else [])], cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise SeedError(f"torch.compile of {spec.name} did not finish within {timeout_s:.0f} s") from exc
        if done.returncode != 0 or not out_file.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-12:]
            raise SeedError(f"torch.compile of {spec.name} failed, so there is no Inductor seed ({OTHER_SEEDS}):\n"
                            + "\n".join(tail))
        return json.loads(out_file.read_text())


def inductor_seed(spec: ProblemSpec, device: str, profile: str, cache_dir: Path, run_dir: Path | None = None,
                  torch_compute_allowed: bool = False, tf32: bool = False) -> str:
    """The Inductor seed's source for `spec` on `device` (from the cache when there), also written to run_dir.
    `torch_compute_allowed`: the policy lets forward call library kernels (cuBLAS, cuDNN) that Inductor keeps;
    `tf32`: the policy lets fp32 matmuls use TF32."""
    templates = device.startswith("cuda") and not torch_compute_allowed
    key = cache_key(spec, device, profile, templates, tf32)
    cached = Path(cache_dir) / "inductor-seeds" / f"{spec.name}-{key}.json"
    if cached.is_file():
        captured = json.loads(cached.read_text())
    else:
        captured = capture(spec, device, templates, tf32)
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".tmp")
        partial.write_text(json.dumps(captured))
        partial.replace(cached)
    source = convert(captured, Path(spec.path).read_text(), spec.name)
    library = library_calls(source)
    if library and not torch_compute_allowed:
        raise SeedError(f"Inductor's code for {spec.name} calls library kernels ({', '.join(library)}) for which it "
                        f"has no Triton form here: policy 'triton' rejects torch compute in forward. Run it under "
                        f"fitness/policy=kernelbench (labelled uses-torch-compute), or {OTHER_SEEDS}.")
    if run_dir is not None:
        (Path(run_dir) / SEED_FILE).write_text(source)
    return source


def policy_options(policy) -> dict:
    """`inductor_seed`'s options under a precision policy (``fitness.policy.PrecisionPolicy``)."""
    return {"torch_compute_allowed": policy.torch_compute != "reject", "tf32": policy.tf32}


def library_calls(source: str) -> list[str]:
    """torch library calls Inductor left in forward (extern kernels), by name."""
    model = next((n for n in pyast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    forward = next((n for n in (model.body if model else []) if isinstance(n, ast.FunctionDef)
                    and n.name == "forward"), None)
    names = {ast.unparse(n.func) for n in ast.walk(forward) if isinstance(n, ast.Call)} if forward else set()
    return sorted(n for n in names if n.startswith("torch.") and n not in ("torch.empty_strided", "torch.as_strided"))


__all__ = ["SeedError", "inductor_seed", "capture", "cache_key", "policy_options", "SEED_FILE"]
