"""Hydra configs of the `kernelevo` commands (``pkg://conf``): the one source of defaults, and the schema the
command line is checked against (``kernelevo.validate``).

``${stem:PATH_OR_NAME}`` names run directories after the problem: a bundled name as it is, a file by its stem.
"""
from pathlib import Path

from omegaconf import OmegaConf

OmegaConf.register_new_resolver("stem", lambda name: Path(str(name)).stem, replace=True)
