"""The command line's overrides, checked against the command's config before Hydra runs (or writes) anything.

Design: the typed schema (``kernelevo.config.schema``) is the one source of keys, types and defaults; the YAML files in
``conf/`` choose among its options. A command's config is composed with the user's group choices (``problem=...``,
``search=tiny``, ``fitness/policy=...``), and every ``key=value`` must name a key of that composed config, with or
without Hydra's ``+`` / ``++``: an unknown key fails, naming the closest valid key (difflib) and, for a key that
another option of its group has (``llm.model`` with ``llm=none``), that option; a value of the wrong type fails
naming the key, what it takes and its default (OmegaConf checks it against the schema; the message here is
shorter). The open spots, where keys are legitimately free:

* ``problem.sizes.NAME``: a problem file's size constants come from the file (the problem loader checks NAME
  against the file and lists the ones it has);
* ``inductor.variants.NAME``: a user's own variant of Inductor's options (``+inductor.variants.mine=
  {triton: {max_tiles: 3}}``); Inductor checks the option names when it compiles, and a wrong one is a printed note
  naming the variant;
* ``hydra.*`` and Hydra's own groups (``hydra/...``): Hydra checks those itself;
* a parameter of a plug-in's class that its node leaves out (``operators.list.0.debug_tries``: an operator's entry
  gives only the keys it changes; an option choosing a plug-in holds all of them, ``kernelevo.config.plugins``).

A valid override is handed to Hydra in the form that works for it: ``key=value`` for a key of the config (so
``+search.generations=3`` means ``search.generations=3``), ``++key=value`` in an open spot (so
``problem.sizes.batch_size=8`` needs no ``+``). A mandatory value left out (``???``, e.g. ``resume`` without
``run_dir``) is a one-line error. Each command may add its own checks on the composed config (``Command.check``),
which run here too, before Hydra makes an output directory: a command that fails them leaves nothing behind. The
validator also says where Hydra will write (``Validator.output_dir``), for the checks of ``kernelevo.locations``.
"""
from __future__ import annotations

import copy
import difflib
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from kernelevo.config import CONF_DIR
from kernelevo.config.plugins import node_parameters
from kernelevo.core.errors import KernelevoError

JOB_NAME = "commands"  # Hydra's job name, as hydra.main named it after the tasks' module (its log: commands.log)
OPEN_SPOTS = ("problem.sizes", "inductor.variants")  # keys below these are free (see above)
GROUP_HINTS = {"problem": "; or problem=PATH.py for a KernelBench-format file (kernelevo list problems)",
               "hardware": "; a hardware profile is hardware.profile=NAME (kernelevo list profiles)"}
HYDRA_FLAGS_WITH_VALUE = {"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
                          "--config-dir", "-cd", "--experimental-rerun"}
# A group's options by (config name, Hydra's overrides, group, kind), for the life of the process: Hydra lists them by
# loading the primary config and copying its config repository each time (docs/measurements.md), some six times a check,
# and the config groups' files do not change while a command runs (nor between the commands one process runs in the
# tests).
GROUP_OPTIONS: dict[tuple, list[str]] = {}
INFO_FLAGS = {"--cfg", "-c", "--info", "-i", "--help", "-h", "--hydra-help", "--resolve", "--shell-completion",
              "-sc", "--version"}


class ConfigError(KernelevoError):
    """An override names no key or option of the command's config, or a mandatory value is missing."""


def split_flags(args: list[str]) -> tuple[list[str], list[str]]:
    """(Hydra's flags such as --multirun or --cfg job, the overrides)."""
    flags, overrides, i = [], [], 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            flags.append(arg)
            takes = arg in HYDRA_FLAGS_WITH_VALUE or (arg in ("--info", "-i") and i + 1 < len(args)
                                                       and "=" not in args[i + 1])
            if takes and i + 1 < len(args):
                flags.append(args[i + 1])
                i += 1
        else:
            overrides.append(arg)
        i += 1
    return flags, overrides


def wants_info(flags: list[str]) -> bool:
    """--cfg, --info, --help: Hydra prints something and runs no task."""
    return any(flag in INFO_FLAGS for flag in flags)


def has_key(cfg, key: str) -> bool:
    """Whether `key` (dotted; list items by index) is a key of the config, its value given or not."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    if isinstance(node, DictConfig):
        return leaf in list(node.keys())
    if isinstance(node, ListConfig):
        return leaf.isdigit() and int(leaf) < len(node)
    return False


def all_keys(cfg, prefix: str = "") -> list[str]:
    """Every dotted key of a config (dict keys, then their children)."""
    keys = []
    if isinstance(cfg, DictConfig):
        items = [(str(k), cfg._get_node(k)) for k in cfg.keys()]
    elif isinstance(cfg, ListConfig):
        items = [(str(i), cfg._get_node(i)) for i in range(len(cfg))]
    else:
        return keys
    for name, node in items:
        key = f"{prefix}{name}"
        keys.append(key)
        if isinstance(node, (DictConfig, ListConfig)):
            keys += all_keys(node, key + ".")
    return keys


def _closest(word: str, choices, what: str) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else (f"; {what}: {', '.join(sorted(choices))}"
                                                         if len(choices) <= 30 else "")


def _resolved_dir(cfg: DictConfig, key: str) -> Path | None:
    """Hydra's output directory as Hydra will make it (absolute), or None where it depends on what only the job
    knows (``hydra.runtime.*``)."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        return Path(OmegaConf.select(cfg, key, throw_on_missing=True)).absolute()
    except OmegaConfBaseException:  # the job's runtime (`${hydra:...}`): the task checks it itself
        return None


def _is_open(key: str) -> bool:
    return any(key.startswith(spot + ".") for spot in OPEN_SPOTS)


def _is_hydra(key: str) -> bool:
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


class Validator:
    """The overrides of one command (`command`, whose config file is `config_name`), checked by ``check``."""

    def __init__(self, command: str, config_name: str):
        self.command, self.config_name = command, config_name
        self.output_dirs: dict[str, Path | None] = {}  # Hydra's output directory by mode (run, sweep), once checked
        self.multirun = False  # hydra.mode=MULTIRUN given
        self.composed: DictConfig | None = None  # the config `check` composed, with Hydra's node

    def output_dir(self, flags: list[str]) -> tuple[Path | None, bool]:
        """(where Hydra will write, whether it runs several jobs): the run directory, or with --multirun the sweep
        directory, its jobs' parent. None where it depends on what only the job knows."""
        multirun = self.multirun or any(flag in ("--multirun", "-m") for flag in flags)
        return self.output_dirs.get("sweep" if multirun else "run"), multirun

    def check(self, overrides: list[str], required: bool = True) -> tuple[DictConfig, list[str]]:
        """(the composed config, the overrides for Hydra); raises ConfigError (a mandatory key left out: only where
        `required`, not for ``--help`` or ``--cfg``). The config is composed once when the overrides are valid
        (``_at_once``); only a refused override composes the group choices alone first, to say what is wrong with it
        (or to find a plug-in's parameter its node leaves out). ``composed`` keeps the config with Hydra's node, which
        the command's job runs on (``kernelevo.cli``: Hydra composes nothing again)."""
        from hydra import compose, initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.errors import HydraException
        from hydra.types import RunMode

        try:
            parsed = OverridesParser.create().parse_overrides(overrides)
        except HydraException as exc:
            raise ConfigError(f"cannot read the overrides: {exc}") from exc
        with initialize_config_dir(str(CONF_DIR), version_base="1.3", job_name=JOB_NAME):
            self._loader = self.loader = GlobalHydra.instance().config_loader()
            self._hydra = [o.input_line for o in parsed if _is_hydra(o.key_or_group)]  # hydra.searchpath included
            groups = [o for o in parsed if not _is_hydra(o.key_or_group) and self._is_group(o.key_or_group)]
            for o in groups:
                self._check_group(o)
            cfg, out = self._at_once(parsed, groups)
            if cfg is None:
                first = [self._first(o) for o in parsed if o in groups or _is_hydra(o.key_or_group)]
                try:
                    base = compose(self.config_name, overrides=first, return_hydra_config=True)
                except HydraException as exc:
                    raise ConfigError(self._refused_group(exc, groups)) from exc
                out = [self._normalise(o, base, groups) for o in parsed]
                for o in parsed:  # the schema's type, said before OmegaConf's longer message
                    if not (o in groups or _is_hydra(o.key_or_group) or o.is_delete() or _is_open(o.key_or_group)):
                        self._check_type(o, base)
                try:
                    cfg = compose(self.config_name, overrides=[self._first_of(line) for line in out],
                                  return_hydra_config=True)
                except HydraException as exc:
                    raise ConfigError(str(exc).splitlines()[0]) from exc
        self.output_dirs = {mode: _resolved_dir(cfg, f"hydra.{mode}.dir") for mode in ("run", "sweep")}
        self.multirun = OmegaConf.select(cfg, "hydra.mode", default=None) == RunMode.MULTIRUN
        self.composed, cfg = cfg, copy.deepcopy(cfg)
        with open_dict(cfg):  # as compose() without return_hydra_config leaves it
            del cfg["hydra"]
        missing = sorted(OmegaConf.missing_keys(cfg))
        if missing and required:
            raise ConfigError(f"`kernelevo {self.command}` needs {' and '.join(f'{k}=...' for k in missing)}")
        return cfg, out

    def _at_once(self, parsed: list, groups: list) -> tuple[DictConfig | None, list[str]]:
        """The config composed once with every override as ``_normalise`` would give it to Hydra, when that is
        valid: a key as ``key=value`` (its ``+`` dropped), in an open spot ``++key=value``. (None, []) when Hydra
        refuses one of them or a value is not of its key's type: then ``check`` finds which and says why."""
        from hydra import compose

        def given(o) -> str:
            if o in groups or _is_hydra(o.key_or_group) or o.is_delete():
                return o.input_line
            return ("++" if _is_open(o.key_or_group) else "") + o.input_line.lstrip("+~")

        out = [given(o) for o in parsed]
        try:
            cfg = compose(self.config_name, overrides=[self._first_of(line) for line in out],
                          return_hydra_config=True)
            for o in parsed:
                if not (o in groups or _is_hydra(o.key_or_group) or o.is_delete() or _is_open(o.key_or_group)):
                    self._check_type(o, cfg)
        except Exception:  # noqa: BLE001 - Hydra's refusal, OmegaConf's, an assertion of either: said by `check`
            return None, []
        return cfg, out

    # groups ----------------------------------------------------------------------------------------------------
    def _options(self, group: str, kind=None) -> list[str]:
        """A group's options (or, kind=GROUP, its sub-groups), on the search path the overrides give; listed once per
        process (``GROUP_OPTIONS``)."""
        from hydra.core.object_type import ObjectType

        kind = kind or ObjectType.CONFIG
        key = (self.config_name, tuple(self._hydra), group, kind)
        if key not in GROUP_OPTIONS:
            GROUP_OPTIONS[key] = self._loader.get_group_options(group, kind, self.config_name, self._hydra)
        return list(GROUP_OPTIONS[key])

    def _is_group(self, key: str) -> bool:
        from hydra.core.object_type import ObjectType

        parent, _, name = key.rpartition("/")
        return name in self._options(parent, ObjectType.GROUP)

    def _groups(self, parent: str = "") -> list[str]:
        from hydra.core.object_type import ObjectType

        names = []
        for name in self._options(parent, ObjectType.GROUP):
            path = f"{parent}/{name}" if parent else name
            if path not in ("hydra", "schema", "plugin"):  # Hydra's own; the schemas (kernelevo.config)
                names += [path, *self._groups(path)]
        return names

    def _check_group(self, o) -> None:
        if o.is_delete():  # ~group: Hydra says if there is nothing to delete
            return
        options = self._options(o.key_or_group)
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
        for value in values:
            if value not in options:
                raise ConfigError(self._absent_group(o) or (
                    f"{o.key_or_group}={value}: no such option of the group {o.key_or_group}"
                    + _closest(value, options, "options") + GROUP_HINTS.get(o.key_or_group, "")))

    # keys ------------------------------------------------------------------------------------------------------
    def _normalise(self, o, base: DictConfig, groups: list) -> str:
        key, line = o.key_or_group, o.input_line
        if o in groups or _is_hydra(key):
            return line
        if "/" in key:
            raise ConfigError(f"{line}: no config group {key!r}" + _closest(key, self._groups(), "groups"))
        text = line.lstrip("+~")
        if _is_open(key) or (not has_key(base, key) and key in node_parameters(base, key.rpartition(".")[0])):
            return line if o.is_delete() else "++" + text
        if not has_key(base, key):
            raise ConfigError(self._unknown(key, base))
        return line if o.is_delete() else text

    @staticmethod
    def _check_type(o, base: DictConfig) -> None:
        """A value the key's schema type cannot take: a number for a number, true/false for a flag."""
        key = o.key_or_group
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(base, parent, default=None) if parent else base
        if not isinstance(node, DictConfig) or leaf not in node or o.is_sweep_override():
            return  # a plug-in's parameter its node leaves out: its class checks the value
        from omegaconf.nodes import BooleanNode, FloatNode, IntegerNode

        value_node = node._get_node(leaf)
        kind = {IntegerNode: int, FloatNode: float, BooleanNode: bool}.get(type(value_node))
        default, given = value_node._value(), o.value()
        if given is None or kind not in (int, float, bool):
            return
        if kind is bool and not isinstance(given, bool):
            raise ConfigError(f"{key}={given}: true or false expected (default {str(default).lower()})")
        if kind is not bool and not (isinstance(given, (int, float)) and not isinstance(given, bool)):
            raise ConfigError(f"{key}={given}: a number expected (default {default})")
        if kind is int and isinstance(given, float) and not given.is_integer():
            raise ConfigError(f"{key}={given}: a whole number expected (default {default})")

    def _refused_group(self, exc: Exception, groups: list) -> str:
        """Hydra's refusal of the group choices; for a group the command's config does not have (``resume ...
        fitness/policy=strict-fp32``: "Could not override ... No match in the defaults list"), what it takes."""
        return next(filter(None, map(self._absent_group, groups)), str(exc).splitlines()[0])

    def _absent_group(self, o) -> str | None:
        """What the command takes, where group override `o` names a group its config does not have; else None."""
        from hydra import compose

        if o.input_line.startswith("+"):  # a group added on purpose
            return None
        base = compose(self.config_name, overrides=self._hydra, return_hydra_config=True)
        if o.key_or_group in OmegaConf.select(base, "hydra.runtime.choices", default={}):
            return None
        return self._unknown(o.key_or_group, base, "group")

    def _unknown(self, key: str, base: DictConfig, what: str = "key") -> str:
        message = f"unknown {what} {key!r} for `kernelevo {self.command}`"
        group = key.partition(".")[0]
        chosen = OmegaConf.select(base, f"hydra.runtime.choices.{group}", default=None)
        if chosen is not None and "." in key:  # another option of its group may have it
            from hydra import compose

            having = [option for option in self._options(group)
                      if option not in (chosen, "file")
                      and has_key(compose(self.config_name, overrides=[f"{group}={option}"]), key)]
            if having:
                return message + f": it exists with {group}={'|'.join(having)}"
        keys = [k for k in all_keys(base) if not _is_hydra(k)] + node_parameters(base, key.rpartition(".")[0])
        leaves = [k for k in keys if not any(other.startswith(k + ".") for other in keys)]
        if len(leaves) <= 12:  # a small config (resume, report): say all it takes
            return message + f"; it takes {', '.join(leaves)}"
        return message + _closest(key, keys, "keys")

    @staticmethod
    def _first(o) -> str:
        """The override with its first value, for composing (a sweep runs each of its values later)."""
        if not o.is_sweep_override():
            return o.input_line
        prefix = o.input_line[:len(o.input_line) - len(o.input_line.lstrip("+~"))]
        return f"{prefix}{o.key_or_group}={next(iter(o.sweep_string_iterator()))}"

    @staticmethod
    def _first_of(line: str) -> str:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        return Validator._first(OverridesParser.create().parse_override(line))
