"""Hydra configs of the `kernelevo` commands (``pkg://conf``): the typed schema (``conf.schema``, the one home of
every default; a plug-in's, its class: ``conf.plugins``), the YAML files choosing among its options, and what the
command line is checked against (``kernelevo.validate``).

``${stem:PATH_OR_NAME}`` names run directories after the problem: a bundled name as it is, a file by its stem.
"""
from pathlib import Path

from omegaconf import OmegaConf

OmegaConf.register_new_resolver("stem", lambda name: Path(str(name)).stem, replace=True)

from conf import plugins, schema  # noqa: E402 (after the resolver; the schema's modules need none of it)

schema.register()
plugins.register()
