"""Secrets kept out of what a candidate controls: the values of this process's secret environment variables
(those workers never see: ``fitness.workers.worker_env.is_secret_variable``) replaced in a result's texts."""
from __future__ import annotations

import os

from kernelevo.core.evaluation_record import EvalResult
from fitness.workers.worker_env import is_secret_variable

SECRET_PLACEHOLDER = "[secret removed]"
MIN_SECRET_CHARS = 8  # shorter values ("1", "true") would scrub ordinary words


def known_secrets(environ=None) -> list[str]:
    """Values of this process's secret environment variables (the ones workers never see), longest first."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_variable(k) and len(v) >= MIN_SECRET_CHARS}
    return sorted(values, key=len, reverse=True)


def scrub_secrets(result: EvalResult, secrets: list[str] | None = None) -> None:
    """Replace every known secret in the texts a candidate controls (reason, log_tail, notes)."""
    secrets = known_secrets() if secrets is None else secrets

    def clean(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, SECRET_PLACEHOLDER)
        return text

    if secrets:
        result.reason, result.log_tail = clean(result.reason), clean(result.log_tail)
        result.notes = [clean(str(n)) for n in result.notes]
