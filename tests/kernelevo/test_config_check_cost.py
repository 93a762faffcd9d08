"""What the command line's check (``kernelevo.validate``) does once per process rather than once per command: a config
group's options are listed once (Hydra copies its config repository for each listing), and Hydra's copies of its
repository share the process's one ConfigStore (``kernelevo.config.store_sharing``) instead of copying the whole typed
schema."""
from __future__ import annotations

import copy

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

import kernelevo.validate as validate
from kernelevo.cli import LOG_ONLY_WHEN_LOGGED
from kernelevo.validate import ConfigError, Validator


@pytest.fixture
def listings(monkeypatch):
    """The group listings Hydra makes, as (group, overrides) pairs; the process's cache emptied first."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    made, real = [], ConfigLoaderImpl.get_group_options

    def listed(self, group, kind=None, config_name=None, overrides=None):
        made.append((group, tuple(overrides or ())))
        return real(self, group, kind, config_name, overrides)

    monkeypatch.setattr(ConfigLoaderImpl, "get_group_options", listed)
    monkeypatch.setattr(validate, "GROUP_OPTIONS", {})
    return made


def test_a_groups_options_are_listed_once_per_process_and_still_checked(listings):
    overrides = ["problem=rmsnorm", "search=tiny", "search.generations=2", LOG_ONLY_WHEN_LOGGED]
    cfg, _ = Validator("run", "config").check(overrides)
    first = len(listings)
    assert first > 0 and cfg.search.generations == 2
    cfg, _ = Validator("run", "config").check(overrides)
    assert len(listings) == first and cfg.search.generations == 2  # the second check lists nothing again
    with pytest.raises(ConfigError, match=r"search=tinny: no such option of the group search; did you mean tiny\?"):
        Validator("run", "config").check(["search=tinny", LOG_ONLY_WHEN_LOGGED])
    # another search path is another listing: its folder may add options
    Validator("run", "config").check(["search=tiny", "hydra.searchpath=[pkg://hardware_profiles]", LOG_ONLY_WHEN_LOGGED])
    assert any("hydra.searchpath=[pkg://hardware_profiles]" in given for _, given in listings[first:])


def test_hydras_copies_of_its_repository_share_the_config_store_and_compose_leaves_it_as_it_was():
    from hydra import initialize_config_dir

    from kernelevo.config import CONF_DIR  # registers the schema and shares the store
    from hydra.core.global_hydra import GlobalHydra

    store = ConfigStore.instance()
    before = OmegaConf.to_yaml(store.load("schema/run.yaml").node)
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        repository = GlobalHydra.instance().config_loader().repository
        copied = copy.deepcopy(repository)
    assert copied is not repository and copied.get_sources()[-1].store is store
    cfg, _ = Validator("run", "config").check(["search.generations=7", "fitness.trials=3"])
    assert cfg.search.generations == 7 and cfg.fitness.trials == 3
    assert OmegaConf.to_yaml(store.load("schema/run.yaml").node) == before
