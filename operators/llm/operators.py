"""The LLM operators the search applies: a plan -> code -> debug mutation, and an LLM crossover.

They reach the agents through ``OperatorContext.team`` (built from the `llm` config) and evaluate through
``OperatorContext.evaluate`` (the run's evaluation cache, so the debugger's attempts are never evaluated twice).
"""
from __future__ import annotations

import random
from contextlib import ExitStack
from dataclasses import dataclass
from typing import ClassVar

from kernelevo.core.errors import KernelevoError
from kernelevo.core.genome import Genome, GenomeError
from kernelevo.core.individual import Individual
from operators.base import BudgetExhausted, Operator, OperatorContext, OperatorUnavailable
from operators.llm.parsing import ParseError

REPAIRABLE = ("compile_error", "compile_timeout", "runtime_error", "incorrect")
CODE_ONLY = {"coder": 1}  # the child the budget's last call makes where a plan and its code do not fit: no call left


def _team(context: OperatorContext):
    if context.team is None:
        raise KernelevoError("LLM operators need an LLM: choose one with llm=<preset> (see operators/llm/presets/), "
                             "or use operators=offline")
    return context.team


def _profiles(parent: Individual, context: OperatorContext) -> dict:
    """Profiler records (``fitness.profile``) of the parent and of the fastest kernel so far, by label, each with the
    kernel's measured time (``measured_s``: the prompt weighs the profiled GPU time against it); {} when profiling is
    off. Each kernel is profiled once per run (the run store keeps its record)."""
    if context.profile_kernel is None:
        return {}
    chosen = [(f"parent {parent.id}", parent)] if parent.ok else []
    best = min((ind for ind in context.archive if ind.ok), key=lambda ind: ind.rank, default=None)
    if best is not None and best.key != parent.key:
        chosen.append((f"best so far {best.id}", best))
    return {label: {**record, "measured_s": ind.time_s} for label, ind in chosen
            if (record := context.profile_kernel(ind.genome.rendered()))}


def _unfit_parents(parents: list[Individual], context: OperatorContext, team) -> bool:
    """Whether a parent holds the test sizes as literals (converted from torch.compile at test sizes other than the
    full sizes: it cannot run at full size, ``ContextBuilder.baked``) while a correct kernel that does not is known:
    then the LLM is not asked (no child; the search draws other parents)."""
    known = {ind.id: ind for ind in (*context.archive, *parents)}.values()
    baked = team.context.baked(known)
    return any(p.id in baked for p in parents) and any(ind.ok and ind.id not in baked for ind in known)


def _budget_guard(call):
    """Turn an LLM budget stop into the search's BudgetExhausted, an LLM taken for down (too many failed calls in a
    row) into its OperatorUnavailable, and an unusable reply, a failed call or a call cut at the deadline into no
    child."""
    from operators.llm.client import LLMBudgetExceeded, LLMError, LLMUnavailable

    try:
        return call()
    except LLMBudgetExceeded as exc:
        raise BudgetExhausted(str(exc)) from exc
    except LLMUnavailable as exc:
        raise OperatorUnavailable(str(exc)) from exc
    except (ParseError, LLMError, GenomeError):
        return None


def _reserve(team, needs: dict, least: int, stack: ExitStack, context: OperatorContext,
             fallback: dict | None = None):
    """Reserve the child's calls for as long as `stack` is open: its ``Allowance`` (`fallback`'s calls where fewer
    than `least` are left, ``Budget.child``); None for a team without a client (a test's fake: nothing to reserve);
    False when the wall-time deadline cut the wait. When the budget cannot carry another child, the search's
    BudgetExhausted. Either way the context is told (``OperatorContext.reserved``): the next child reserves next."""
    client = getattr(team, "client", None)
    if client is None or not hasattr(client, "child_budget"):
        context.reserved()
        return None
    from operators.llm.client import LLMBudgetExceeded, LLMCut

    try:
        return stack.enter_context(client.child_budget(needs, least, fallback))  # waits for calls given back
    except LLMBudgetExceeded as exc:
        raise BudgetExhausted(str(exc)) from exc
    except LLMCut:
        return False
    finally:
        context.reserved()


def calls_per_child(operators) -> int:
    """The most LLM calls one child of `operators` reserves (0: none asks an LLM)."""
    return max((sum(op.calls.values()) for op in operators if isinstance(op, LLM_OPERATORS)), default=0)


def children_in_flight(operators, max_calls: int | None) -> int | None:
    """How many children an LLM call budget carries at once, each reserving its calls (None: no limit)."""
    per = calls_per_child(operators)
    return None if not per or max_calls is None else max(1, max_calls // per)


@dataclass(frozen=True, kw_only=True)
class LLMMutation(Operator):
    """Planner -> coder -> debugger (up to `debug_tries` repairs) on one parent."""

    name: ClassVar[str] = "llm_mutation"
    arity: ClassVar[int] = 1
    use_planner: bool = True
    debug_tries: int = 2

    @property
    def calls(self) -> dict:
        """The calls one child needs, by role, in order of importance: what it reserves before it starts."""
        return {"planner": int(self.use_planner), "coder": 1, "debugger": self.debug_tries}

    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        (genome,) = self.check_arity(parents)
        team, parent = _team(context), parents[0]
        if _unfit_parents(parents, context, team):
            return []
        with ExitStack() as stack:
            allowance = _reserve(team, self.calls, int(self.use_planner) + 1, stack, context, fallback=CODE_ONLY)
            return [] if allowance is False else self._make(team, parent, context, allowance)

    def _make(self, team, parent: Individual, context: OperatorContext, allowance) -> list[Genome]:
        profiles = _profiles(parent, context)
        plan, made_before = "", context.duplicates_of(self.name)
        planned = self.use_planner and (allowance is None or allowance.left("planner") > 0)  # not the last call's
        if planned:
            plan = _budget_guard(lambda: team.plan(parent, context.archive, made_before, profiles, context.attempts,
                                                   context.rank, context.independent))
            if plan is None:
                return []
        if not planned and made_before:  # no planner to tell: the coder is told instead
            plan = "Your earlier change gave a kernel that already exists; make a different change."
        source = _budget_guard(lambda: team.code(parent, plan))
        if source is None:
            return []
        parent_profile = {label: record for label, record in profiles.items() if label.startswith("parent")}
        source = self._repair(team, source, parent, plan, context, parent_profile, allowance)
        child = _budget_guard(lambda: Genome.from_source(source, note=plan))
        return [child] if child is not None else []  # a copy of a kernel is the search's to catch: it tells the LLM

    def _repair(self, team, source: str, parent: Individual, plan: str, context: OperatorContext,
                profiles: dict, allowance) -> str:
        """Up to `debug_tries` repairs: those the child's allowance holds (fewer where the budget left was short)."""
        tries = self.debug_tries if allowance is None else min(self.debug_tries, allowance.left("debugger"))
        for _ in range(tries if context.evaluate else 0):
            outcome = context.evaluate(source)
            if outcome.status not in REPAIRABLE:
                break
            fixed = _budget_guard(lambda: team.debug(source, outcome, parent, plan, context.archive, profiles))
            if fixed is None:
                break
            source = fixed
        return source


@dataclass(frozen=True, kw_only=True)
class LLMCrossover(Operator):
    """Two correct parents, one child that combines their ideas."""

    name: ClassVar[str] = "llm_crossover"
    arity: ClassVar[int] = 2
    calls: ClassVar[dict] = {"crossover": 1}  # what one child reserves

    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        a, b = self.check_arity(parents)
        team = _team(context)
        if a.key == b.key or _unfit_parents(parents, context, team):
            return []
        with ExitStack() as stack:
            if _reserve(team, self.calls, 1, stack, context) is False:
                return []
            source = _budget_guard(lambda: team.crossover(parents[0], parents[1], context.duplicates_of(self.name)))
        child = _budget_guard(lambda: Genome.from_source(source, note="crossover")) if source else None
        return [child] if child is not None else []  # a copy of a kernel is the search's to catch: it tells the LLM


LLM_OPERATORS = (LLMMutation, LLMCrossover)  # the operators that ask the LLM (a run with one needs `llm=`)
