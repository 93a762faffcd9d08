"""The one schema of every `kernelevo` command's config: typed dataclasses, each key's default and meaning in one place.

A command's primary config (``conf/config.yaml``, ``bench.yaml``, ...) starts its defaults list with its schema
(``- schema: run``), so the composed config is typed: OmegaConf rejects a key the schema lacks and a value of the
wrong type, and every key a YAML file leaves out keeps the default written here. The YAML files under ``conf/`` hold
only group choices and what an option changes (``search/tiny.yaml``; so do the options registered from the packages
that own them, ``kernelevo.config.groups``: ``llm=openai``'s preset); a default there that equals the schema's is a
second home, which ``tests/conf/test_config_schema.py`` refuses.

The settings of each part live beside the code that uses them, and are these nodes' types: ``fitness.settings``
(``EvalSettings``, ``TimingSettings``, ``ProblemSettings``), ``evo.settings`` (``Budget``, ``SearchSettings``,
``TunerSettings``), ``operators.llm.settings`` (``LLMSettings``, ``TeamSettings``, ``ContextSettings``, ``LLMBudget``),
``kernelevo.seeds.inductor.settings`` (``CaptureSettings``), ``evo.reports.intervals.Bootstrap``. ``kernelevo.plans``
turns a composed config into these settings objects and plug-ins, once per command. Plug-ins (``_target_`` nodes: the
selection, the strategy, the evaluation and bench backends, the operators) are typed ``Any`` here: their options differ
in keys, each of which has its default in the class it names alone (``kernelevo.config.plugins`` makes an option's node
from the signature). Open spots (``problem.sizes``, ``inductor.variants``) are free-form dicts.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any, Dict, List, Optional, get_type_hints

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from kernelevo.core.errors import KernelevoError
from evo.reports.intervals import Bootstrap
from evo.settings import Budget, Population, TunerSettings
from fitness.settings import EvalSettings, ProblemSettings
from operators.llm.settings import ContextSettings, LLMBudget, LLMSettings, TeamSettings
from kernelevo.seeds.inductor.settings import CaptureSettings

INITIALISE_MODES = (True, False, "from_seed")


ProblemConfig = ProblemSettings  # ``problem``: its settings live with the judge (fitness.settings)


@dataclass
class HardwareConfig:
    # `auto` detects the live GPU (or the CPU interpreter); or a file in hardware_profiles/, e.g. h100_sxm
    profile: str = "auto"


@dataclass
class InductorConfig(CaptureSettings):
    """``inductor``: the variants of Inductor's options captured as seeds, and the capture's time
    (kernelevo.seeds.inductor.settings.CaptureSettings)."""
    variants: Dict[str, Any] = field(default_factory=dict)  # name -> torch._inductor.config options (inductor/)


@dataclass
class ExperimentConfig:
    """Free-form tags written into the run store with the config, for ablation tables."""
    name: str = "default"
    tags: List[str] = field(default_factory=list)


@dataclass
class PolicyConfig:
    """``fitness.policy``: a precision policy (fitness.comparison.policy.PrecisionPolicy); each option under
    fitness/comparison/policies/ gives every key."""
    name: str = MISSING
    description: str = MISSING
    tolerances: Dict[str, Dict[str, Optional[float]]] = MISSING  # dtype or "default" -> atol, rtol[, max_rel_l2]
    tf32: bool = MISSING
    torch_compute: str = MISSING  # reject, or label (allowed, the result labelled)
    extra_allowed_ops: List[str] = MISSING
    fp32_operands: str = MISSING  # any, tf32 (no fp16 / bf16 / fp8 operands), ieee (and every tl.dot in IEEE fp32)


@dataclass
class FitnessConfig(EvalSettings):
    """``fitness``: how candidates are judged (fitness.settings.EvalSettings), by which policy, and where."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    backend: Any = None  # where a run's evaluations run: the fitness/backend option's plug-in (null: this host)


@dataclass
class SearchConfig(Budget, Population):
    """``search``: the population and the budget (evo.settings), the tuner, and the selection and strategy."""
    tuner: TunerSettings = field(default_factory=TunerSettings)
    selection: Any = None  # parent selection: the search/selection option's plug-in (evo.evolution.selection)
    strategy: Any = None  # what each child is made from: the search/strategy option's plug-in (null: evolution)


@dataclass
class OperatorsConfig:
    list: List[Any] = MISSING  # each instantiated with Hydra (_target_ + kwargs); weight is its relative probability


@dataclass
class LLMConfig(TeamSettings, LLMSettings):
    """``llm`` (null with llm=none): the model's client (LLMSettings), the agents (TeamSettings), the run's own."""
    model: str = MISSING  # the preset's (operators/llm/presets/)
    provider: str = MISSING  # the preset's name, as the run records it
    # replies keyed by the full request: the run's own directory, or in a multirun the sweep's, each run in its own
    # namespace (its folder's name); a replay of a run or sweep points here at the earlier one's (DIR/llm_cache)
    cache_dir: Optional[str] = "${llm_cache_home:}"
    cache_namespace: str = "${llm_cache_namespace:}"
    # before a run: key set, server answering (GET /models, else one tiny request: a few tokens, not counted in the
    # budget), model known; false: skip (cached replies replay)
    check: bool = True
    # false: start from the seed (the problem's, or torch.compile's converted); true: the initialiser agent writes
    # the first kernel from the reference alone; from_seed: it rewrites the seed for speed (kept only if correct)
    initialise: Any = False
    budget: LLMBudget = field(default_factory=LLMBudget)
    context: ContextSettings = field(default_factory=ContextSettings)

    def __post_init__(self):
        LLMSettings.__post_init__(self)
        TeamSettings.__post_init__(self)
        if self.initialise not in INITIALISE_MODES:
            raise KernelevoError(f"llm.initialise={self.initialise!r}: use true (write the first kernel from the "
                                 f"reference), from_seed (rewrite the seed) or false (start from the seed)")


@dataclass
class JudgeConfig:
    """What every command that judges kernels takes: the problem, how it is judged, on what."""
    problem: ProblemConfig = field(default_factory=ProblemConfig)
    fitness: FitnessConfig = field(default_factory=FitnessConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    device: str = "auto"  # auto (GPU if one is visible, else Triton's CPU interpreter), cpu, cuda, cuda:N


@dataclass
class RunConfig(JudgeConfig):
    """`kernelevo run` (conf/config.yaml)."""
    search: SearchConfig = field(default_factory=SearchConfig)
    operators: OperatorsConfig = field(default_factory=OperatorsConfig)
    llm: Optional[LLMConfig] = None
    inductor: InductorConfig = field(default_factory=InductorConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    intervals: Bootstrap = field(default_factory=Bootstrap)  # a bench's or multirun's intervals over search seeds
    # gpus and parallel: where the local evaluation backend runs (fitness/backend=ray sets its own instead)
    gpus: Any = "auto"  # GPUs to evaluate on: auto = every visible one, or a list of indices
    # evaluations in flight over all GPUs, each in its own worker process: their CPU stages (start, compile) overlap
    # the GPU work of others; correctness trials may share a GPU, timing holds it alone. auto = CPU cores - 2 (at
    # least 2), fewer if the problem's tensors would not fit in 80 % of the GPUs' memory that many times
    parallel: Any = "auto"


@dataclass
class BenchSettings:
    """``bench``: one search per problem of a selection (`kernelevo bench`, evo/benchmark/bench.py)."""
    root: Optional[str] = None  # a KernelBench checkout's KernelBench/ folder (level1/, ...); null: bundled problems
    level: Optional[int] = None  # 1, 2, 3: every problem of that level (when bench.problems is not given)
    # [a, b] (paths under root, ids like level1/23, bundled names) or a list file, one per line
    problems: Any = None
    dir: Optional[str] = None  # the bench directory; null: a new one under outputs/bench/
    title: Optional[str] = None  # the report's title; null: made from the selection
    # search seeds per problem (--seeds N): search.seed, search.seed + 1, ...; with 2 or more the table gives each
    # problem's median speed-up and the geometric mean with their confidence intervals (`intervals`)
    seeds: int = 1
    # where the searches run: the bench/backend option's plug-in (evo.benchmark.bench, evo.benchmark.bench_ray)
    backend: Any = None
    # a re-run into a bench.dir whose runs were made with other settings than the command's: null refuses, naming
    # the keys that differ; changed runs those problems again with the command's settings (their old runs, rows
    # and logs kept under bench.dir/replaced/)
    rerun: Optional[str] = None


@dataclass
class BenchConfig(RunConfig):
    """`kernelevo bench` (conf/bench.yaml): every run setting applies to every problem."""
    bench: BenchSettings = field(default_factory=BenchSettings)


@dataclass
class EvaluateConfig(JudgeConfig):
    """`kernelevo evaluate` (conf/evaluate.yaml)."""
    candidate: Optional[str] = None  # path of a module defining ModelNew; null = the problem's seed kernel
    out: str = "result.json"  # JSON record, relative to the run directory


@dataclass
class SeedConfig(JudgeConfig):
    """`kernelevo seed` (conf/seed.yaml)."""
    inductor: InductorConfig = field(default_factory=InductorConfig)
    out: str = "seed_inductor.py"  # relative to the output directory, or an absolute path


def not_given(settings: type) -> type:
    """The budgets a resume may change: every field of `settings` (``Budget``, ``LLMBudget``), typed as there and
    null here, meaning "not given" (the run's own value stays). Made from the class, so a budget's new key is one a
    resume takes, and every key resume's messages name (``kernelevo.resuming.LIFT``) is one."""
    hints = get_type_hints(settings)
    return make_dataclass(f"Resume{settings.__name__}", [(f.name, Optional[hints[f.name]], field(default=None))
                                                         for f in fields(settings)])


ResumeBudget, ResumeLLMBudget = not_given(Budget), not_given(LLMBudget)


@dataclass
class ResumeLLM:
    budget: ResumeLLMBudget = field(default_factory=ResumeLLMBudget)


@dataclass
class ResumeConfig:
    """`kernelevo resume` (conf/resume.yaml)."""
    run_dir: str = MISSING
    search: ResumeBudget = field(default_factory=ResumeBudget)
    llm: ResumeLLM = field(default_factory=ResumeLLM)


@dataclass
class ReportConfig:
    """`kernelevo report` (conf/report.yaml)."""
    run_dir: str = MISSING


@dataclass
class TableConfig:
    """`kernelevo table` (conf/table.yaml): one table over several bench directories (kernelevo/tables.py)."""
    bench_dirs: List[str] = MISSING  # the bench.dir of each part, e.g. [B/level1a, B/level1b, B/level2]
    out: str = MISSING  # where table.md, table.json and table.html are written
    title: Optional[str] = None  # null: made from the problems
    # a KernelBench checkout's KernelBench/ folder: each level's problems counted there, for the correct rate over
    # the whole level (null: as the benches recorded it, bench.root's, where they did)
    root: Optional[str] = None
    intervals: Bootstrap = field(default_factory=Bootstrap)  # the intervals over search seeds
    # a problem in several directories with other settings: refused (false), or the later directory's row kept and
    # the keys named in a line (true: parts re-run at fixed code, e.g. a seed variant's options changed)
    later_wins: bool = False


SCHEMAS = {"run": RunConfig, "bench": BenchConfig, "evaluate": EvaluateConfig, "seed": SeedConfig,
           "resume": ResumeConfig, "report": ReportConfig, "table": TableConfig}


def register() -> None:
    """Each schema as an option of the ``schema`` group, at the config's root (``- schema: run``)."""
    store = ConfigStore.instance()
    for name, node in SCHEMAS.items():
        store.store(group="schema", name=name, node=node, package="_global_")


def run_config(saved: dict) -> DictConfig:
    """A run's config as its store saved it, typed: the keys it lacks (a run saved before they existed) at their
    defaults. KernelevoError naming a key it has that the schema does not know."""
    from omegaconf.errors import OmegaConfBaseException

    saved = dict(saved)
    if isinstance(saved.get("fitness"), dict):
        saved["fitness"] = EvalSettings.migrated(saved["fitness"])
    try:
        return OmegaConf.merge(OmegaConf.structured(RunConfig), saved)
    except OmegaConfBaseException as exc:
        raise KernelevoError(f"the saved config does not fit this version's schema: {str(exc).splitlines()[0]} "
                             f"(key {exc.full_key})") from exc
