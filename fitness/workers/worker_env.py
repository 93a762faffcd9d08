"""What a worker process starts with besides its job: an environment stripped of secrets and provider variables,
confined to its private directory with private Triton and Inductor caches (``worker_environment``), and copies of
the Triton driver stubs a trusted job built (``stub_files``, ``copy_stubs``; see ``fitness.workers.sandbox``).
"""
from __future__ import annotations

import os
import shutil
from importlib import metadata
from pathlib import Path

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
PROVIDER_PREFIXES = (
    "OPENAI", "ANTHROPIC", "AZURE", "AWS", "GOOGLE", "GCLOUD", "GEMINI", "VERTEX", "HF_", "HUGGING", "COHERE",
    "MISTRAL", "GROQ", "TOGETHER", "DEEPSEEK", "OPENROUTER", "REPLICATE", "FIREWORKS", "LITELLM", "XAI",
    "PERPLEXITY", "OLLAMA", "VLLM", "WANDB", "ANYSCALE", "DEEPINFRA", "CEREBRAS", "NVIDIA_NIM", "GITHUB", "GH_",
    "KERNELEVO_LLM",
)
REPO_ROOT = Path(__file__).resolve().parents[2]
STUB_PREFIXES = ("cuda_utils", "__triton_launcher")
STUB_MARKER = "kernelevo-stubs.json"  # in the trusted Triton cache: the Triton version its stubs were built for
MAX_STUB_FILES = 256


def is_secret_variable(name: str) -> bool:
    upper = name.upper()
    return any(m in upper for m in SECRET_MARKERS) or upper.startswith(PROVIDER_PREFIXES)


def worker_environment(base: dict, workdir: Path, interpret: bool, cache_dir: Path | None = None) -> dict:
    """The child's environment: the parent's minus secrets, confined to `workdir`, with private caches."""
    env = {k: v for k, v in base.items() if not is_secret_variable(k)}
    caches = cache_dir or workdir
    env.update(HOME=str(workdir), TMPDIR=str(workdir), TRITON_HOME=str(workdir), PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1", TRITON_CACHE_DIR=str(caches / "triton"),
               TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p))
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def stub_files(triton_cache: Path) -> list[Path]:
    """Triton's driver stub modules in a (trusted) Triton cache: <cache>/<key>/cuda_utils*.so and launchers."""
    try:
        found = [p for p in triton_cache.glob("*/*.so")
                 if p.name.startswith(STUB_PREFIXES) and p.is_file() and not p.is_symlink()]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)[:MAX_STUB_FILES]


def copy_stubs(files: list[Path], dest: Path) -> None:
    """Copies (never links) of trusted stubs into a worker's private Triton cache, in the same <key>/ layout."""
    for src in files:
        try:
            (dest / src.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / src.parent.name / src.name)
        except OSError:
            pass  # best effort: a missing stub is built by Triton when needed


def triton_version() -> str | None:
    for name in ("triton", "pytorch-triton"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return None
