"""The plug-ins' config nodes, made from their classes: a plug-in's keys and defaults live in its signature alone.

A config group whose option picks a class (``search/selection``, ``search/strategy``, ``fitness/backend``,
``bench/backend``) names it in its defaults list, ``- /plugin/evo.evolution.selection.Tournament@_here_``: the node
stored here under ``plugin/<module.Class>`` gives ``_target_`` and every parameter of the class at its default (``???``
where it has none), typed as the signature says, so ``search.selection.size=3`` needs no ``+``, a wrong type is
refused when the config is composed, and ``--cfg job`` shows every key. The option's YAML holds only what it
changes. Operators are items of ``operators.list``, which a defaults list cannot fill: their YAML names
``_target_`` and the keys it changes.
"""
from __future__ import annotations

import inspect
import sys
import typing
from dataclasses import field, make_dataclass
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.utils import get_class
from omegaconf import MISSING, DictConfig, OmegaConf

from evo.benchmark.bench import LocalBackend
from evo.benchmark.bench_ray import RayBackend
from evo.service.evaluation import LocalEvaluators
from evo.service.evaluation_ray import RayEvaluators
from evo.service.replay import RecordedEvaluators
from evo.evolution.selection import EpsilonGreedy, Tournament, UniformRandom
from evo.evolution.strategy import Evolution, Refinement, Sampling, Tree

PLUGINS = (Tournament, EpsilonGreedy, UniformRandom, Evolution, Sampling, Refinement, Tree, LocalEvaluators,
           RayEvaluators, RecordedEvaluators, LocalBackend, RayBackend)
GROUP = "plugin"
SCALARS = (int, float, bool, str)


def target(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The keyword parameters a plug-in is built with (Hydra's instantiate passes the node's keys by name)."""
    params = dict(inspect.signature(cls).parameters)
    odd = [p.name for p in params.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)]
    if odd:
        raise TypeError(f"plug-in {target(cls)}: parameters {odd} cannot be config keys; give each a name")
    return params


def _config_type(hint) -> Any:
    """The signature's type where OmegaConf can check it (a scalar, optional or not); else Any."""
    if hint in SCALARS:
        return hint
    args = typing.get_args(hint)
    if len(args) == 2 and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        if inner in SCALARS:
            return Optional[inner]
    return Any


def node(cls: type) -> type:
    """A structured config of the plug-in: ``_target_`` and its parameters, each at its default (``???`` when
    it has none). Defined in this module under a unique name, so a config holding it can be pickled."""
    hints = typing.get_type_hints(cls.__init__) if cls.__init__ is not object.__init__ else {}
    fields = [("_target_", str, field(default=target(cls)))]
    for name, param in parameters(cls).items():
        default = MISSING if param.default is param.empty else param.default
        fields.append((name, _config_type(hints.get(name, Any)), field(default=default)))
    name = target(cls).replace(".", "_")
    made = make_dataclass(name, fields)
    made.__module__ = __name__
    setattr(sys.modules[__name__], name, made)
    return made


def register() -> None:
    """Each plug-in's node as ``plugin/<module.Class>``, for the defaults lists of the options choosing it."""
    store = ConfigStore.instance()
    for cls in PLUGINS:
        store.store(group=GROUP, name=target(cls), node=node(cls))


def node_parameters(cfg, parent: str) -> list[str]:
    """The parameters of the class the node at `parent` builds (``_target_``), as keys (``operators.list.0.weight``):
    an operator's entry gives only those it changes, and the others are keys too. [] for a node that builds none."""
    plugin = OmegaConf.select(cfg, parent, default=None) if parent else None
    if not isinstance(plugin, DictConfig) or not isinstance(plugin.get("_target_"), str):
        return []
    try:
        return [f"{parent}.{name}" for name in inspect.signature(get_class(plugin._target_)).parameters]
    except (ImportError, ValueError, TypeError):  # no such class, or no signature: instantiate says what is wrong
        return []
