"""LLM operators: a team of agents (planner, coder, debugger, crossover, initialiser) reached through litellm. It
imports the operators' interface (``operators.base``) and the layers below its own (the order: docs/architecture.md,
checked by tests/project/test_layers.py)."""
