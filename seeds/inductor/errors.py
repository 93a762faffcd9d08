"""The converter's error, and the ways out it names."""
from __future__ import annotations

OTHER_SEEDS = "pass a seed file (problem.seed=PATH) or let an LLM write one (llm=... llm.initialise=true)"


class SeedError(ValueError):
    """Inductor's output uses something the converter does not handle; the message says what and the way out."""
