"""The config's one schema (kernelevo/config/schema.py, and for a plug-in its class's signature:
kernelevo/config/plugins.py): every option of
every group composes for every command and builds its settings and plug-ins; no default is written both in the
schema (or a plug-in's class) and in a YAML file; the known disagreements stay settled. In-process (Hydra's compose),
no run started."""
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf

from kernelevo.core.errors import KernelevoError
from kernelevo.config import CONF_DIR as CONF, plugins
from kernelevo.config.groups import FOLDERS
from kernelevo.config.schema import SCHEMAS, LLMConfig, run_config

REGISTERED = {folder: group for group, folder in FOLDERS.items()}  # the options the packages that own them keep
PRIMARIES = {"config": "run", "bench": "bench", "evaluate": "evaluate", "seed": "seed", "resume": "resume",
             "report": "report"}
NEEDS = {"problem=file": ["problem.name=elementwise_chain"],  # mandatory values (???) a user gives
         "fitness/backend=replay": [f"fitness.backend.record={CONF}"], "resume": ["run_dir=D"], "report": ["run_dir=D"]}
# import ray when made
PLUGINS_NEEDING = {"evo.service.evaluation_ray.RayEvaluators", "evo.benchmark.bench_ray.RayBackend"}


def _groups(primary: str) -> dict:
    """group path -> its options, for the groups a primary config uses (read from the composed choices)."""
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose(primary, overrides=NEEDS.get(primary, []), return_hydra_config=True)
        choices = {g: c for g, c in cfg.hydra.runtime.choices.items() if not g.startswith("hydra") and g != "schema"}
        loader = GlobalHydra.instance().config_loader()  # conf/'s files and the groups registered from code
        return {group: sorted(loader.get_group_options(group)) for group in choices}


def _cases():
    run_groups = _groups("config")
    for primary in PRIMARIES:
        yield primary, []
        for group, options in _groups(primary).items():
            if primary == "config" or group not in run_groups:  # bench: its own groups (the rest are the run's)
                for option in options:
                    yield primary, [f"{group}={option}"]
    yield "config", ["experiment=strategies"]


def _targets(node, path=""):
    """Every `_target_` node of a composed config, with its dotted path."""
    if isinstance(node, DictConfig):
        if "_target_" in node:
            yield path, node
            return
        for key in node:
            yield from _targets(node[key], f"{path}.{key}" if path else str(key))
    elif isinstance(node, ListConfig):
        for i, item in enumerate(node):
            yield from _targets(item, f"{path}.{i}")


@pytest.mark.parametrize("primary, overrides", list(_cases()), ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_every_option_composes_typed_and_builds(primary, overrides):
    """Each option composes onto its command's schema, every setting object is built from it (their checks run),
    and every plug-in it names is instantiated."""
    from kernelevo.plans import judge_plan, run_plan, typed

    extra = [x for o in overrides for x in NEEDS.get(o, [])] + NEEDS.get(primary, [])
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose(primary, overrides=overrides + extra)
    assert OmegaConf.get_type(cfg) is SCHEMAS[PRIMARIES[primary]]
    assert not OmegaConf.missing_keys(cfg)
    built = OmegaConf.to_object(cfg)  # every dataclass's __post_init__ checks run
    assert isinstance(built, SCHEMAS[PRIMARIES[primary]])
    if "fitness" in cfg:  # the plan's settings (kernelevo.plans: issue 46, one typed plan per command)
        judge = judge_plan(typed(cfg))
        assert judge.settings.trials >= 1
        assert judge.policy.name == cfg.fitness.policy.name
    if "search" in cfg and primary != "resume":
        plan = run_plan(cfg)
        assert plan.search.mu == cfg.search.mu
        assert plan.tuner.parallel == cfg.search.tuner.parallel
    for path, node in _targets(cfg):
        if node._target_ in PLUGINS_NEEDING:
            pytest.importorskip("ray")
        assert instantiate(node) is not None, path


def _leaves(node, path=""):
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    else:
        yield path, node


def _target_nodes(node, path=""):
    """Every dict with a `_target_` in a YAML option's own content (list items included), with its dotted path."""
    if isinstance(node, dict):
        if "_target_" in node:
            yield path, node
        for key, value in node.items():
            yield from _target_nodes(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _target_nodes(item, f"{path}.{i}" if path else str(i))


def restated_plugin_defaults(values: dict, cls: type, path: str = "") -> list[str]:
    """The keys of a plug-in's node (`values`, building `cls`) whose value equals the default of the class's
    signature: a default written twice."""
    node = OmegaConf.structured(plugins.node(cls))
    return [f"{path}.{key}" if path else key for key in restated_defaults(
        {k: v for k, v in values.items() if k != "_target_"}, node)]


def restated_defaults(values: dict, schema_node) -> list[str]:
    """The keys of `values` (a YAML option's own content) whose value equals the schema's default at the same path,
    or, under a `_target_`, the default of that plug-in's class: a default written twice. Free-form dicts are the
    option's own."""
    found = []
    for path, plugin in _target_nodes(values):
        found += restated_plugin_defaults(plugin, get_class(plugin["_target_"]), path)
    for key, value in _leaves(values):
        if key.split(".")[-1] == "_target_" or key == "defaults":
            continue
        parent = key.rpartition(".")[0]
        try:
            holder = OmegaConf.select(schema_node, parent, default=None) if parent else schema_node
        except AttributeError:  # below a node the schema leaves to the option (fitness.policy.tolerances: ???)
            continue
        if not isinstance(holder, DictConfig) or OmegaConf.get_type(holder) is dict:
            continue  # a plug-in's node (Any: its class's, above) or an open dict (problem.sizes, inductor.variants)
        leaf = key.rpartition(".")[2]
        if leaf in holder and isinstance(holder._get_node(leaf), DictConfig):
            continue  # a whole node chosen (llm: null), not a default restated
        if leaf in holder and not OmegaConf.is_missing(holder, leaf):
            default = OmegaConf.to_container(holder, resolve=False)[leaf]
            if default == value:
                found.append(key)
    return found


def _own_values(path: Path, root: Path = CONF) -> tuple[str, dict]:
    """(the package an option's values land in, its values)."""
    text = path.read_text()
    data = yaml.safe_load(text) or {}
    group = REGISTERED.get(path.parent) or path.parent.relative_to(root).as_posix()
    package = "" if "@package _global_" in text or group == "." else group.replace("/", ".")
    for line in text.splitlines():
        if line.startswith("# @package ") and "_global_" not in line:
            package = line.split()[-1]
    return package, data


def _option_files():
    return sorted(p for p in CONF.rglob("*.yaml") if p.parent != CONF) + sorted(
        p for folder in REGISTERED for p in folder.glob("*.yaml"))


def _option_id(path: Path) -> str:
    return f"{REGISTERED[path.parent]}/{path.name}" if path.parent in REGISTERED else path.relative_to(CONF).as_posix()


def _plugin_entries(defaults: list) -> list[str]:
    """The plug-in classes an option's defaults list names (`- /plugin/<module.Class>@_here_`)."""
    entries = [d.split("@")[0] for d in defaults if isinstance(d, str) and d.startswith(f"/{plugins.GROUP}/")]
    return [entry.removeprefix(f"/{plugins.GROUP}/") for entry in entries]


def option_restates(path: Path, root: Path = CONF) -> list[str]:
    """The keys of an option (a YAML file under `root`) that restate a default of the schema or, for an option
    choosing a plug-in, of its class; its same-group parents (`- openai` in llm/local.yaml) count as its schema."""
    package, data = _own_values(path, root)
    data.pop("hydra", None)
    defaults = data.pop("defaults", [])
    base = OmegaConf.structured(SCHEMAS["bench"])
    if package == "llm":  # null until an option fills it
        base.llm = OmegaConf.structured(LLMConfig)
    for target in _plugin_entries(defaults):
        OmegaConf.update(base, package, OmegaConf.structured(plugins.node(get_class(target))), merge=False)
    for parent in [d for d in defaults if isinstance(d, str) and d != "_self_" and not d.startswith("/")]:
        sibling = yaml.safe_load((path.parent / f"{parent}.yaml").read_text()) or {}
        sibling.pop("defaults", None)
        OmegaConf.update(base, package, sibling, merge=True)
    node = OmegaConf.select(base, package) if package else base
    if node is None:  # a plug-in option naming `_target_` itself: its keys against its class
        return restated_plugin_defaults(data, get_class(data["_target_"]))
    return restated_defaults(data, node)


@pytest.mark.parametrize("path", _option_files(), ids=_option_id)
def test_no_option_restates_a_default(path):
    """A YAML option holds only what it changes: a value equal to the schema's default, to the default of the
    plug-in class it chooses (or of an operator it lists), or to the option it extends is a second home."""
    assert option_restates(path) == [], f"{_option_id(path)} restates a default"


def test_every_plugin_option_gets_its_class_keys():
    """The plug-ins conf/ chooses are the registered ones, and each option's node holds every parameter of its
    class at the signature's default, so `search.strategy.epsilon=0.3` needs no `+` and is typed."""
    import inspect

    named = {t for p in _option_files() for t in _plugin_entries((yaml.safe_load(p.read_text()) or {})
                                                                   .get("defaults", []))}
    assert named == {plugins.target(cls) for cls in plugins.PLUGINS}
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("bench", overrides=["search/strategy=tree", "search.strategy.epsilon=0.3"])
        with pytest.raises(Exception, match="search.strategy.decay"):
            compose("bench", overrides=["search/strategy=tree", "search.strategy.decay=fast"])
    from evo.benchmark.bench import LocalBackend
    from evo.evolution.strategy import Tree

    params = inspect.signature(Tree).parameters
    assert dict(cfg.search.strategy) == {"_target_": "evo.evolution.strategy.Tree", "epsilon": 0.3,
                                         **{k: params[k].default for k in ("decay", "min_epsilon")}}
    assert instantiate(cfg.search.strategy).epsilon == 0.3
    assert cfg.bench.backend.per_gpu == inspect.signature(LocalBackend).parameters["per_gpu"].default


def test_a_plugin_key_is_set_on_the_command_line_without_a_plus():
    """An option's plug-in keys (all there) and an operator's (its entry gives only what it changes) take `key=value`;
    a key its class does not take is refused, naming the closest."""
    from kernelevo.validate import ConfigError, Validator

    cfg, _ = Validator("run", "config").check(["operators=llm", "operators.list.0.debug_tries=0",
                                               "search/strategy=tree", "search.strategy.decay=0.5",
                                               "search.selection.size=3"])
    assert (cfg.operators.list[0].debug_tries, cfg.search.strategy.decay, cfg.search.selection.size) == (0, 0.5, 3)
    assert instantiate(cfg.operators.list[0]).debug_tries == 0
    with pytest.raises(ConfigError, match="did you mean operators.list.0.debug_tries"):
        Validator("run", "config").check(["operators=llm", "operators.list.0.debug_tris=0"])
    with pytest.raises(ConfigError, match="search.strategy.decay=fast: a number expected"):
        Validator("run", "config").check(["search/strategy=tree", "search.strategy.decay=fast"])


def test_the_restated_default_check_can_fail():
    from kernelevo.config.schema import SearchConfig

    from kernelevo.config.schema import OperatorsConfig

    schema = OmegaConf.structured(SearchConfig)
    assert restated_defaults({"mu": 4, "lambda_": 3, "tuner": {"parallel": 3}}, schema) == ["mu", "tuner.parallel"]
    tournament = {"_target_": "evo.evolution.selection.Tournament"}
    assert restated_defaults({"selection": {**tournament, "size": 2}}, schema) == ["selection.size"]
    assert restated_defaults({"selection": {**tournament, "size": 3}}, schema) == []
    mutation = {"_target_": "operators.llm.operators.LLMMutation", "weight": 0.5}
    assert restated_defaults({"list": [mutation, {**mutation, "debug_tries": 2, "use_planner": False}]},
                             OmegaConf.structured(OperatorsConfig)) == ["list.1.debug_tries"]


def test_an_option_restating_its_plugin_default_fails(tmp_path):
    """An option naming its plug-in by the defaults list, or by `_target_`, and giving a key at the class's default."""
    tree = (CONF / "search/strategy/tree.yaml").read_text()
    option = tmp_path / "search/strategy/tree.yaml"
    option.parent.mkdir(parents=True)
    option.write_text(tree + "epsilon: 0.6\ndecay: 0.9\n")
    assert option_restates(option, tmp_path) == ["epsilon"]
    option.write_text("_target_: evo.evolution.selection.Tournament\nsize: 2\n")
    assert option_restates(option, tmp_path) == ["size"]


def test_settled_disagreements():
    """search.tuner.parallel has one default (3: TPE learns between batches), which the Tuner's signature reads;
    fitness.spares is honoured when given, else one warm spare per evaluation in flight."""
    import inspect

    from evo.settings import TunerSettings
    from evo.tuning.tuner import Tuner
    from fitness.settings import EvalSettings

    assert inspect.signature(Tuner).parameters["parallel"].default == TunerSettings().parallel == 3
    assert EvalSettings().warm_spares(6) == 6
    assert EvalSettings(spares=2).warm_spares(6) == 2
    assert EvalSettings(spares=2, prestart_worker=False).warm_spares(6) == 0


def test_a_saved_run_config_is_typed_and_filled(tmp_path):
    """A run saved before a key existed resumes with its default; a key the schema does not know is named."""
    cfg = run_config({"problem": {"name": "matmul"}, "search": {"mu": 2},
                      "fitness": {"trials": 2, "compile_baseline": False}})
    assert cfg.search.mu == 2 and cfg.search.lambda_ == 8 and cfg.fitness.baselines == ["eager"]
    assert cfg.fitness.backend is None and cfg.llm is None
    with pytest.raises(KernelevoError, match="search.mue"):
        run_config({"search": {"mue": 2}})


@pytest.mark.parametrize("overrides, name", [
    ([], "triton"),
    (["fitness.policy.tf32=false"], "triton+tf32=false"),  # KernelBench part 9's level3/49, IEEE baselines
    (["fitness/policy=strict-fp32", "fitness.policy.tolerances.float32.atol=0.001",
      "fitness.policy.description=mine"], "strict-fp32+tolerances.float32.atol=0.001"),  # not the description
])
def test_a_policy_changed_by_an_override_is_named_for_the_change_in_the_plan(overrides, name):
    from kernelevo.plans import judge_plan, typed

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    policy = judge_plan(typed(cfg)).policy
    assert policy.name == name and policy.tf32 == ("tf32=false" not in name and "strict" not in name)
