"""Hydra's config repositories share the process's one ConfigStore instead of copying it.

Hydra 1.3 copies its config repository (``copy.deepcopy``) for every composition and every listing of a group's options,
and the repository's structured-config source holds the ConfigStore, which holds this project's whole typed schema
(``kernelevo.config.schema``, ``kernelevo.config.plugins``), some three copies a command (their cost:
docs/measurements.md). Hydra's main branch no longer keeps the store on the source (facebookresearch/hydra#2928: it asks
for ``ConfigStore.instance()`` each time, so a copied repository reads the same store); a copy of the store being the
store gives Hydra 1.3 the same behaviour. The store is the process's singleton, and loading from it copies the node it
returns (``ConfigStore.load``), so a composition never changes it.
"""
from __future__ import annotations


def share_the_config_store() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.__deepcopy__ = lambda self, memo: self
