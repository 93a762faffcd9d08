"""Seeds taken from torch.compile: `problem.seed=inductor`, and the default for a problem that has no seed.

``inductor_seed`` compiles the problem's Model with torch.compile in a process of its own on the search's device
(``capture.py``), converts what Inductor wrote into a standalone candidate (``convert.py``; the reference's own parts
it keeps: ``reference.py``), and caches the capture per (problem file and sizes, device and hardware profile, torch
and triton versions, GEMM templates or library calls): a second run, or a resume, does not compile again (the
conversion, milliseconds, is redone, so a newer converter applies). The seed is also written into the run directory,
where a user opens it and sees the kernels.

Variants (``inductor.variants`` in the run's config: name -> Inductor options such as ``triton.prefer_nd_tiling``)
are captured in the same process, each compiled once more under its options and cached on its own: where one makes
kernels that differ from the default's, it is another seed of generation 0 (``inductor:<name>``), so the search
starts from several of Inductor's code-generation choices, not only launch constants of one.

Under policy ``triton`` (no torch compute in forward) matmuls are captured as Inductor's Triton GEMM templates
(max-autotune over Triton's backend), and the convolutions Inductor still leaves to the library become kernelevo's
own Triton convolution (``convolutions.py``), its library attention calls kernelevo's own Triton flash attention
(``attentions.py``); under ``kernelbench`` as the library calls Inductor prefers. A problem's nn.LSTM / nn.GRU, which
torch.compile cannot capture, is captured as a call of kernelevo's recurrent operators (``rnn_ops.py``) and becomes
kernelevo's own Triton RNN under every policy (``recurrent.py``).
"""
from __future__ import annotations

import logging
import ast
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

from kernelevo.core import pyast
from fitness.common.atomic import write_atomic
from fitness.common.formatting import short_seconds
from fitness.common.gpu_lock import LOCK_DIR, lock_path
from fitness.common.lifeline import lifeline_env
from fitness.problems.problem import INDUCTOR, ProblemSpec  # what made a variant's seed: inductor:<name>
from kernelevo.seeds.inductor.cache import (CACHED, CapturedSeeds, cache_key, entry_file, failed_before, failed_file,
                                            grouped, key_parts, note_failure, why_missed)
from kernelevo.seeds.inductor.attentions import AttentionRefused, Attentions
from kernelevo.seeds.inductor.capture import flat_options
from kernelevo.seeds.inductor.convert import (NO_TRITON_KERNEL, OTHER_SEEDS, CallRewriter, SeedError, _call_function,
                                              convert)
from kernelevo.seeds.inductor.process import Watched, watch
from kernelevo.seeds.inductor import randoms, template_choices
from kernelevo.seeds.inductor.settings import CaptureSettings

log = logging.getLogger(__name__)  # already under the kernelevo logger (the project's namespace)

REPO = Path(__file__).resolve().parents[2]
SEED_FILE = "seed_inductor.py"
DEFAULT = "default"  # the capture under Inductor's own options
CAPTURE_TIMEOUT_S = 900  # the default capture's limit (its variants': CaptureSettings.variants_budget_s)
GPU_ONLY = {"max_autotune", "max_autotune_pointwise", "max_autotune_gemm"}  # Inductor options a variant needs a GPU for


def capture_variants(spec: ProblemSpec, device: str, templates: bool = False, tf32: bool = False,
                     variants: dict | None = None, timeout_s: float = CAPTURE_TIMEOUT_S, dynamic: bool = False,
                     settings: CaptureSettings | None = None,
                     arrived: Callable[[str, dict], None] | None = None) -> dict:
    """Run ``capture.py`` in its own process, compiling once per variant (name -> Inductor options; default: its
    defaults only, the default first): name -> what it captured, or ``{"error": why}``. Each capture is read as it
    finishes (`arrived` is called with it) and said in a line with its time. The default capture has `timeout_s`;
    the variants after it share `settings.variants_budget_s`, past which the process is stopped: the variant it was
    capturing and those after it are ``{"error": "... not finished within N s"}``, as are those a crash of the
    process left (what finished before is kept). SeedError with the output's tail when the default was asked and the
    process failed or timed out before writing it. On a GPU the process holds the GPU's lock shared
    (``fitness.common.gpu_lock``) while it runs the model or Inductor benchmarks its choices, so that no neighbour's
    timing overlaps them; not while it compiles, so that a long capture keeps no neighbour's timer (and, behind that
    timer's claim, every other user of the GPU) waiting (docs/measurements.md)."""
    variants, settings = variants or {DEFAULT: {}}, settings or CaptureSettings()
    names, budget_s = list(variants), settings.variants_budget_s

    def said(name: str, got: dict) -> None:
        failed = f" (failed: {got['error'].strip().splitlines()[-1][:200]})" if "error" in got else ""
        fell = "; ".join(why[:160] for why in got.get("fell_back", []))
        configs = f" (templates: {got['template_configs']})" if got.get("template_configs") else ""
        log.info(f"capture of {spec.name}: {name} {short_seconds(got.get('seconds'))}{failed}{configs}"
                 f"{f' (not kept first: {fell})' if fell else ''}")
        if arrived is not None:
            arrived(name, got)

    with tempfile.TemporaryDirectory(prefix="kernelevo-inductor-") as tmp:
        spec_file, out_file = Path(tmp) / "spec.json", Path(tmp) / "captured.json"
        variants_file = Path(tmp) / "variants.json"
        spec_file.write_text(json.dumps(spec.to_dict()))
        variants_file.write_text(json.dumps(variants))
        path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
        env = lifeline_env({**os.environ, "PYTHONPATH": path})  # the capture dies with the run, even a killed one
        command = [sys.executable, "-m", "kernelevo.seeds.inductor.capture", str(spec_file), str(out_file), device,
                   *(["templates"] if templates else []), *(["tf32"] if tf32 else []),
                   *(["dynamic"] if dynamic else []), f"variants={variants_file}"]
        up_to = settings.autotune_templates_up_to
        command += [f"autotune_up_to={up_to}"] if up_to is not None and DEFAULT in names else []
        lock = lock_path(LOCK_DIR, device)  # on a GPU: held while it runs the model or benchmarks, not compiling
        command += [f"gpu_lock={lock}"] if lock else []
        watched = watch(command, out_file, names, timeout_s if DEFAULT in names else None, budget_s, said,
                        cwd=REPO, env=env)
    left = [name for name in names if name not in watched.captured]
    if DEFAULT in left:  # nothing is kept without it
        raise SeedError(f"torch.compile of {spec.name} did not finish within {watched.stopped_after_s:.0f} s"
                        if watched.returncode is None else _failed(spec, watched.output))
    return {**watched.captured, **_unfinished(spec, left, watched, budget_s)}


def _unfinished(spec: ProblemSpec, left: list[str], watched: Watched, budget_s: float) -> dict:
    """``{"error": why}`` for each variant the capture process left, stopped at the variants' budget or ended before
    it (a crash: the error's last line says so, after the output's tail), said in one line."""
    if not left:
        return {}
    if watched.returncode is None:
        skipped = f"; {', '.join(left[1:])} skipped" if left[1:] else ""
        log.info(f"capture of {spec.name}: {left[0]} stopped at the {budget_s:g} s budget of Inductor's variants"
                 f"{skipped}: raise inductor.variants_budget_s to capture {'them' if skipped else 'it'}")
        return {name: {"error": f"{name} not finished within the {budget_s:g} s budget of Inductor's variants "
                                f"(inductor.variants_budget_s)"} for name in left}
    log.warning(f"capture of {spec.name}: the process ended (exit code {watched.returncode}) before "
                f"{', '.join(left)}; the captures before are kept")
    tail = "\n".join(watched.output.strip().splitlines()[-12:])
    return {name: {"error": f"{tail}\n{name} not finished: the capture process ended (exit code "
                            f"{watched.returncode}) before it".strip()} for name in left}


def capture(spec: ProblemSpec, device: str, templates: bool = False, tf32: bool = False,
            timeout_s: float = CAPTURE_TIMEOUT_S, dynamic: bool = False) -> dict:
    """What Inductor writes for the problem under its default options; SeedError when it fails."""
    captured = capture_variants(spec, device, templates, tf32, timeout_s=timeout_s, dynamic=dynamic)[DEFAULT]
    if "error" in captured:
        raise SeedError(_failed(spec, captured["error"]))
    return captured


def _failed(spec: ProblemSpec, output: str) -> str:
    tail = output.strip().splitlines()[-12:]
    return f"torch.compile of {spec.name} failed, so there is no Inductor seed ({OTHER_SEEDS}):\n" + "\n".join(tail)


def inductor_seed(spec: ProblemSpec, device: str, profile: str, cache_dir: Path, run_dir: Path | None = None,
                  torch_compute_allowed: bool = False, tf32: bool = False) -> str:
    """The Inductor seed's source for `spec` on `device` (from the cache when there), also written to run_dir.
    `torch_compute_allowed`: the policy lets forward call library kernels (cuBLAS, cuDNN) that Inductor keeps;
    `tf32`: the policy lets fp32 matmuls use TF32."""
    return inductor_seeds(spec, device, profile, cache_dir, run_dir, torch_compute_allowed, tf32)[INDUCTOR]


def inductor_seeds(spec: ProblemSpec, device: str, profile: str, cache_dir: Path, run_dir: Path | None = None,
                   torch_compute_allowed: bool = False, tf32: bool = False, variants: dict | None = None,
                   dynamic: bool | None = None, settings: CaptureSettings | None = None) -> dict:
    """The Inductor seed (``"inductor"``, first) and one more seed per variant of Inductor's options (name ->
    options) whose kernels differ from it (``"inductor:<name>"``), each converted, cached and written into run_dir
    as ``seed_inductor[_<name>].py``. The default seed's failure is a SeedError; a variant's is a printed note.
    `dynamic` (default: ``settings.dynamic_shapes``, whose default is off a GPU, where candidates are judged at the
    interpreter's sizes, not the file's): captured with dynamic shapes, so the seed runs at other sizes, where
    Inductor and the converter can. `settings`: the
    capture's time (``CaptureSettings``; each capture is cached as it finishes, so a variant stopped at its budget or
    a crash loses none captured before it). A ``CapturedSeeds``: its `cache` says per capture whether it was read from
    the cache or why it was captured (``cache.why_missed``)."""
    if DEFAULT in (variants or {}):
        raise SeedError(f"an Inductor variant may not be called {DEFAULT!r} (that name is Inductor's own options); "
                        f"rename it in inductor.variants")
    templates = device.startswith("cuda") and not torch_compute_allowed
    if dynamic is None:  # the settings' choice, else off a GPU only
        chosen = (settings or CaptureSettings()).dynamic_shapes
        dynamic = not device.startswith("cuda") if chosen is None else chosen
    variants = autotuned_first(gpu_variants(variants, device))
    wanted = {DEFAULT: {}, **(variants or {})}
    files = {name: entry_file(cache_dir, spec, cache_key(spec, device, profile, templates, tf32, options, dynamic))
             for name, options in wanted.items()}
    captured = {name: json.loads(f.read_text()) for name, f in files.items() if f.is_file()}
    up_to = (settings or CaptureSettings()).autotune_templates_up_to
    stale = {name: why for name, got in captured.items()  # captured again
             if (why := randoms.stale(got) or template_choices.stale(got, up_to))}
    captured = {name: got for name, got in captured.items() if name not in stale}
    missing = {name: options for name, options in wanted.items() if name not in captured}
    parts = {name: key_parts(spec, device, profile, templates, tf32, options, dynamic)
             for name, options in missing.items()}
    how = {name: CACHED if name in captured else stale.get(name) or failed_before(files[name])
           or why_missed(cache_dir, spec, name, parts[name]) for name in wanted}
    if missing:
        log.info(f"torch.compile's capture of {spec.name}: "
                 + grouped({name: why for name, why in how.items() if why != CACHED}))

        def keep(name: str, got: dict) -> None:  # as each capture finishes
            captured[name] = got
            if "error" in got:  # a failure is not cached (the next run tries again), only noted: failed_before
                note_failure(files[name], got["error"])
            else:
                files[name].parent.mkdir(parents=True, exist_ok=True)
                write_atomic(files[name], json.dumps({**got, "variant": name, "key": parts[name]}))  # for why_missed
                failed_file(files[name]).unlink(missing_ok=True)

        try:
            got_all = capture_variants(spec, device, templates, tf32, missing, dynamic=dynamic, settings=settings,
                                       arrived=keep)
        except SeedError as exc:  # the process died (a variant can crash it): the cached default still stands
            if DEFAULT in missing:
                raise
            got_all = {name: {"error": str(exc)} for name in missing}
        for name, got in got_all.items():
            if captured.get(name) is not got:  # not kept as it arrived: a variant left unfinished
                keep(name, got)
    if "error" in captured[DEFAULT]:
        raise SeedError(_failed(spec, captured[DEFAULT]["error"]))
    fuse = (settings or CaptureSettings()).fuse_epilogues
    sources = CapturedSeeds({INDUCTOR: _checked_source(spec, captured[DEFAULT], torch_compute_allowed, tf32, fuse)},
                            how)
    for name in variants or {}:
        try:
            if "error" in captured[name]:
                raise SeedError(captured[name]["error"].strip().splitlines()[-1])
            source = _checked_source(spec, captured[name], torch_compute_allowed, tf32, fuse)
        except SeedError as exc:
            log.info(f"no seed from Inductor's variant {name!r}: {str(exc).splitlines()[0][:300]}")
            continue
        same = next((made_by for made_by, seen in sources.items() if seen == source), None)
        if same is None:
            sources[f"{INDUCTOR}:{name}"] = source
        else:  # options that change nothing here add no seed
            log.info(f"Inductor's variant {name!r} wrote the kernels of {same} here: no seed of its own")
    if run_dir is not None:
        write_seeds(sources, Path(run_dir))
    return sources


def autotuned(options: dict) -> list[str]:
    """Which of max-autotune's options (``GPU_ONLY``) a variant's Inductor options turn on ([]: none)."""
    flat = flat_options(options)
    return sorted(key for key in set(flat) & GPU_ONLY if flat[key])


def autotuned_first(variants: dict | None) -> dict | None:
    """`variants` in the order they are captured: those that turn on max-autotune's options (``autotuned``) first,
    the others in their order. The variants share one time budget in that order, and the autotuned ones hold the
    kernels a run must start no worse than (``evo.runs.seeding.floor``), so the budget never leaves them out behind
    the others (docs/measurements.md)."""
    if not variants:
        return variants
    return dict(sorted(variants.items(), key=lambda item: not autotuned(item[1])))


def gpu_variants(variants: dict | None, device: str) -> dict | None:
    """`variants` less, off a GPU, those asking for max-autotune (``GPU_ONLY``: Inductor benchmarks its choices on
    the GPU; on the CPU it builds no template), each said in a line."""
    if device.startswith("cuda") or not variants:
        return variants
    kept = {}
    for name, options in variants.items():
        if asks := autotuned(options):
            log.info(f"Inductor's variant {name!r} ({', '.join(asks)}) needs a GPU: no seed from it on "
                     f"{device}")
        else:
            kept[name] = options
    return kept


def seed_file(made_by: str, base: str = SEED_FILE) -> str:
    """`base` for the default seed, ``<base's stem>_<variant><suffix>`` for a variant's
    (seed_inductor_nd_tiling.py)."""
    variant = made_by.partition(":")[2]
    return base if not variant else f"{Path(base).stem}_{variant}{Path(base).suffix}"


def write_seeds(sources: dict, folder: Path, base: str = SEED_FILE) -> list[Path]:
    """Each seed of `inductor_seeds` into `folder`, named by `seed_file`; the paths written, in order."""
    paths = [Path(folder) / seed_file(made_by, base) for made_by in sources]
    for path, source in zip(paths, sources.values()):
        path.write_text(source)
    return paths


def _checked_source(spec: ProblemSpec, captured: dict, torch_compute_allowed: bool, tf32: bool = False,
                    epilogues: bool = True) -> str:
    """The seed's source: under policy ``triton`` with Inductor's library convolutions and attention calls as
    kernelevo's Triton convolution and flash attention (``convolutions.py``, ``attentions.py``; `tf32`: their dot
    products in TF32; `epilogues`: the pointwise kernels after a convolution fused into it, ``epilogues.py``), under
    ``kernelbench`` as Inductor wrote them (kernelevo's kernels only where Inductor wrote no Triton kernel at all).
    SeedError naming any library call left under ``triton``, with why kernelevo's kernel could not take it where it could not."""
    problem = Path(spec.path).read_text()
    if torch_compute_allowed:
        try:
            return convert(captured, problem, spec.name)
        except SeedError as exc:
            if NO_TRITON_KERNEL not in str(exc):
                raise
            return convert(captured, problem, spec.name, triton_convolutions=True, tf32=tf32, epilogues=epilogues)
    try:
        source, why = convert(captured, problem, spec.name, triton_convolutions=True, tf32=tf32,
                              epilogues=epilogues), ""
    except SeedError as exc:  # the library's convolution or attention is named below, with this reason
        kernel = "flash attention" if isinstance(exc, AttentionRefused) else "convolution"
        why = f"; kernelevo's Triton {kernel} could not take it: {str(exc).splitlines()[0][:300]}"
        try:
            source = convert(captured, problem, spec.name)
        except SeedError as plain:  # library calls only (level1/97 masked): named from Inductor's call() itself
            if NO_TRITON_KERNEL not in str(plain) or not _library_only(captured):  # the same failure is said once
                raise SeedError(str(plain).splitlines()[0] + (why if str(plain) != str(exc) else "")) from plain
            source = None
    library = library_calls(source) if source is not None else _library_only(captured)
    if library:
        tried = "; ".join(t for t in captured.get("fell_back", []) if "Triton templates" in t)
        raise SeedError(f"Inductor's code for {spec.name} calls library kernels ({', '.join(library)}) for which it "
                        f"has no Triton form here" + (f" (its Triton templates were tried: {tried})" if tried else "")
                        + f": policy 'triton' rejects torch compute in forward. Run it under "
                        f"fitness/policy=kernelbench (labelled uses-torch-compute), or {OTHER_SEEDS}{why}.")
    return source


def policy_options(policy) -> dict:
    """`inductor_seed`'s options under a precision policy (``fitness.comparison.policy.PrecisionPolicy``)."""
    return {"torch_compute_allowed": policy.torch_compute != "reject", "tf32": policy.tf32}


def library_calls(source: str) -> list[str]:
    """torch library calls Inductor left in forward (extern kernels), by name."""
    model = next((n for n in pyast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    forward = next((n for n in (model.body if model else []) if isinstance(n, ast.FunctionDef)
                    and n.name == "forward"), None)
    return _torch_calls(forward)


def _torch_calls(node: ast.AST | None) -> list[str]:
    names = {ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)} if node else set()
    return sorted(n for n in names if n.startswith("torch.") and n not in ("torch.empty_strided", "torch.as_strided")
                  and n not in randoms.TORCH_DRAWS)  # forward's random draws are inputs it makes (randoms.py)


def _library_only(captured: dict) -> list[str]:
    """The library calls of Inductor's call(), named as a seed writes them (for code that has no Triton kernel)."""
    call = _call_function(pyast.parse(captured["code"]))
    try:
        rewriter = CallRewriter({}, "None", attentions=Attentions(call.body, [], [], own=False))
        return _torch_calls(rewriter.visit(ast.Module(body=call.body, type_ignores=[])))
    except SeedError:  # a call the seed cannot even keep: the converter's own error says it
        return []


__all__ = ["SeedError", "inductor_seed", "inductor_seeds", "capture", "capture_variants", "cache_key",
           "policy_options", "seed_file", "write_seeds", "SEED_FILE", "INDUCTOR"]
