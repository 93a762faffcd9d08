"""The config's own interpolations, registered with OmegaConf before Hydra resolves anything.

``${stem:PATH_OR_NAME}`` names run directories after the problem: a bundled name as it is, a file by its stem.
``${llm_cache_home:}`` and ``${llm_cache_namespace:}`` are the LLM reply cache's defaults (``llm.cache_dir``,
``llm.cache_namespace``): a run's own directory, or in a multirun the sweep's directory with one namespace per run
(its folder's name), never the user's home; outside a Hydra job, no cache.
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf


def _job_dirs() -> tuple[str, str] | None:
    """(the reply cache's home, the run's namespace in it) of the Hydra job running now; None outside one."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    output_dir = OmegaConf.select(hydra, "runtime.output_dir", default=None, throw_on_missing=False)
    if output_dir is None:  # composed by the command line's checks, before Hydra made the job's directory
        return None
    output = Path(output_dir)
    if hydra.mode == RunMode.MULTIRUN:
        sweep = Path(hydra.sweep.dir).resolve()
        try:
            namespace = str(output.resolve().relative_to(sweep))
        except ValueError:
            namespace = output.name
        return str(sweep / "llm_cache"), namespace
    return str(output.resolve() / "llm_cache"), ""


def register() -> None:
    OmegaConf.register_new_resolver("stem", lambda name: Path(str(name)).stem, replace=True)
    OmegaConf.register_new_resolver("llm_cache_home", lambda: (_job_dirs() or (None, ""))[0], replace=True)
    OmegaConf.register_new_resolver("llm_cache_namespace", lambda: (_job_dirs() or (None, ""))[1], replace=True)
