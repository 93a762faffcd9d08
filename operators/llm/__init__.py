"""LLM operators: a team of agents (planner, coder, debugger, crossover, initialiser) reached through litellm."""
