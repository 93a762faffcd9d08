"""The config groups whose options are data of the package that owns them, registered from code (Hydra's
``ConfigStore``) rather than copied into ``conf/``:

* ``fitness/policy``: the precision policies, ``fitness/comparison/policies/*.yaml`` (``fitness.comparison.policy``);
* ``llm``: the LLM presets, ``operators/llm/presets/*.yaml`` (``operators.llm.check``); ``llm=none`` (no LLM, the
  default) is a choice of the config, ``conf/llm/none.yaml``;
* ``problem``: one option per bundled problem of ``fitness/suite/suite.yaml`` (its node ``name: NAME``);
  ``problem=file`` (any KernelBench file) is ``conf/problem/file.yaml``.

A file's own defaults list (``llm/anthropic.yaml`` starts from ``openai``) is read by Hydra as in a YAML option.
"""
from __future__ import annotations

from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from fitness.comparison.policy import policy_dir
from fitness.problems.problem import suite_names
from operators.llm.check import PRESETS_DIR

PROVIDER = "kernelevo"


FOLDERS = {"fitness/policy": policy_dir(), "llm": PRESETS_DIR}  # group -> the folder of its options' YAML files


def register() -> None:
    store = ConfigStore.instance()
    for group, folder in FOLDERS.items():
        for path in sorted(Path(folder).glob("*.yaml")):
            store.store(group=group, name=path.stem, node=OmegaConf.load(path), provider=PROVIDER)
    for name in suite_names():
        store.store(group="problem", name=name, node={"name": name}, provider=PROVIDER)
