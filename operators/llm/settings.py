"""The LLM's settings (``llm.*`` of a run), each with its one default and what it means.

``kernelevo/config/schema.py`` assembles these into the schema of the ``llm`` config node (``LLMConfig``: the client's,
the team's and the run's own keys side by side, as the command line names them); the presets
(``operators/llm/presets/*.yaml``, the ``llm`` group's options) hold only what a preset chooses (provider, model, key,
server). No litellm import here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

from kernelevo.core.errors import KernelevoError

EDIT_FORMATS = ("file", "diff")
ALL_PARTS = ("problem", "hardware", "cost_model", "parent", "profiling", "profiler", "tree", "top_k", "designs",
             "failures")


@dataclass
class LLMSettings:
    """How to reach one model (``operators.llm.client``). The API key itself is never stored here, only the name of
    the environment variable it is read from at call time."""
    model: str  # a litellm provider string: openai/..., anthropic/..., gemini/..., ollama/...
    api_base: Optional[str] = None  # e.g. http://127.0.0.1:8000/v1 for a local OpenAI-compatible server
    api_key_env: Optional[str] = None
    temperature: float = 0.7  # default; roles override it
    max_tokens: int = 4096
    timeout_s: float = 120.0
    max_retries: int = 4  # attempts after the first, on rate limits, 5xx, time-outs and refused connections
    backoff_s: float = 1.0  # the first retry's wait; each later one doubles; plus up to backoff_s of jitter
    backoff_max_s: float = 60.0  # the longest wait before a retry, a server's Retry-After included
    max_calls_per_minute: Optional[float] = None  # requests sent, retries included, spaced 60/N s apart; null: no limit
    concurrency: int = 4
    cache_dir: Optional[str] = None  # replies keyed by the full request: reruns replay (None: no cache)
    cache_namespace: str = ""  # a folder of cache_dir of this run's own (a sweep's runs share no reply)
    input_cost_per_token: Optional[float] = None  # USD; only for models litellm has no price for
    output_cost_per_token: Optional[float] = None
    max_consecutive_failures: Optional[int] = 3  # calls failed in a row (after their retries) that stop the run,
                                                 # resumable; null: never

    def __post_init__(self):
        if self.concurrency < 1:
            raise KernelevoError(f"llm.concurrency must be at least 1, got {self.concurrency}")
        if self.max_retries < 0:
            raise KernelevoError(f"llm.max_retries must be at least 0, got {self.max_retries}")
        if self.backoff_s < 0 or self.backoff_max_s < 0:
            raise KernelevoError(f"llm.backoff_s and llm.backoff_max_s must be at least 0, got {self.backoff_s} and "
                                 f"{self.backoff_max_s}")
        if self.max_calls_per_minute is not None and not self.max_calls_per_minute > 0:
            raise KernelevoError(f"llm.max_calls_per_minute must be above 0 (or null: no limit), got "
                                 f"{self.max_calls_per_minute}")
        if self.max_consecutive_failures is not None and self.max_consecutive_failures < 1:
            raise KernelevoError(f"llm.max_consecutive_failures must be at least 1 (or null: never stop), got "
                                 f"{self.max_consecutive_failures}")


@dataclass
class RoleSettings:
    """One agent's own settings (``llm.roles.NAME``)."""
    temperature: Optional[float] = None  # None: the client's default
    model: Optional[str] = None  # None: the client's default model


def _roles() -> dict:
    return {"planner": RoleSettings(0.9), "coder": RoleSettings(0.4), "debugger": RoleSettings(0.2),
            "crossover": RoleSettings(0.6), "initialiser": RoleSettings(0.4)}


@dataclass
class TeamSettings:
    """How the agents work (``operators.llm.team``)."""
    roles: Dict[str, RoleSettings] = field(default_factory=_roles)  # role name -> its own settings
    parse_retries: int = 2  # unusable replies (no code, truncated, ...) are sent back with the reason
    max_plan_steps: int = 4
    edit_format: str = "file"  # the coder replies with a whole file, or `diff` (SEARCH/REPLACE edits)

    def __post_init__(self):
        if self.edit_format not in EDIT_FORMATS:
            raise KernelevoError(f"llm.edit_format must be one of {EDIT_FORMATS}, got {self.edit_format!r}")

    def role(self, name: str) -> RoleSettings:
        return self.roles.get(name, RoleSettings())


@dataclass
class ContextSettings:
    """What the agents are shown (``llm.context``; ``operators.llm.context``)."""
    token_budget: int = 12000
    parts: Dict[str, bool] = field(default_factory=lambda: {p: True for p in ALL_PARTS})  # each can be switched off
    top_k: int = 2  # best kernels shown, as changes against the parent
    failures: int = 3
    tried: int = 8  # attempts of the lineage listed as already tried
    designs: int = 12  # other code structures listed once each, with their best time (the design memory)

    def enabled(self, part: str) -> bool:
        return bool(self.parts.get(part, True))


@dataclass
class LLMBudget:
    """``llm.budget``: the run's limits on uncached LLM calls (``operators.llm.ledger.Budget`` counts them)."""
    max_calls: Optional[int] = 500  # uncached LLM calls in the run (null: no limit)
    max_cost_usd: Optional[float] = 10.0


@dataclass(frozen=True)
class LLMPlan:
    """The ``llm`` part of a run's plan (``kernelevo.plans`` makes it once from the composed config): the client's, the
    team's, the context's and the budget's settings, and the run's own keys."""
    client: LLMSettings
    team: TeamSettings = field(default_factory=TeamSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    budget: LLMBudget = field(default_factory=LLMBudget)
    provider: str = ""  # the preset's name (llm=openai, ...), as the run records it
    check: bool = True  # ask the LLM before the run (operators.llm.check)
    initialise: object = False  # false, true or from_seed (kernelevo.config.schema.LLMConfig checks it)

    @property
    def models(self) -> list[str]:
        """Every model the run would ask: the default and each role's own."""
        return list(dict.fromkeys([self.client.model, *(role.model for role in self.team.roles.values()
                                                        if role.model)]))
