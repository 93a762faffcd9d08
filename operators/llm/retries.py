"""Which failed LLM requests are retried, how long each retry waits, and what it logs: tenacity's retry loop for one
call (``retrying``), which ``operators.llm.client.LLMClient`` runs its attempts through.

Retried: rate limits, 5xx, time-outs and refused connections (``is_retryable``); never another 4xx (a refused key, an
unknown model) nor a missing key. A retry waits what the server asked for in its ``Retry-After`` (or
``retry-after-ms``) header, else ``backoff_s * 2**retry`` plus up to ``backoff_s`` of jitter, at most
``backoff_max_s`` either way; the client's sleep cuts the wait short (the deadline, an LLM taken for down). One
warning per retry names the model, the URL, the cause, the attempt and the wait. tenacity is imported when a loop is
made, as litellm is when a call is (the caller passes the litellm it loaded): an offline run, which makes no call,
needs neither installed.
"""
from __future__ import annotations

import logging
from typing import Callable

from operators.llm.diagnosis import FATAL_MARKERS, classify, endpoint, retry_after_s
from operators.llm.ledger import LLMError
from operators.llm.settings import LLMSettings

logger = logging.getLogger("operators.llm.client")  # the client's lines, under the client's name

# litellm exception classes worth retrying (looked up by name: not every litellm version has all of them).
_RETRYABLE_NAMES = ("RateLimitError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError",
                    "APIConnectionError", "Timeout")
# Status codes worth retrying on any other exception that carries one (litellm.APIError and friends).
_RETRYABLE_STATUS = (408, 429)


def _retryable_classes(litellm) -> tuple[type, ...]:
    """The litellm exception classes that mean "try again later" in the installed version."""
    found = (getattr(litellm.exceptions, name, None) for name in _RETRYABLE_NAMES)
    return tuple(cls for cls in found if isinstance(cls, type))


def is_retryable(exc: BaseException, litellm) -> bool:
    """Rate limits, 5xx, time-outs and connection errors are retried; 4xx and everything else are not (nor this
    project's own LLMError: a cut at the deadline, an LLM taken for down)."""
    if isinstance(exc, LLMError) or any(marker in str(exc) for marker in FATAL_MARKERS):
        return False
    if isinstance(exc, _retryable_classes(litellm)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in _RETRYABLE_STATUS or status >= 500)


def retrying(settings: LLMSettings, litellm, model: str, api_key: str | None, attempts: int,
             sleep: Callable[[float], None]):
    """tenacity's loop for one call to `model`: `attempts` at most, retryable failures only, the wait a server's
    Retry-After asks for, else exponential backoff with jitter, at most ``backoff_max_s``; `sleep` waits (and may
    raise to end the loop); the last failure is re-raised as it was (``reraise``). The key is only blanked out of
    the logged cause."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential, wait_random

    backoff = (wait_exponential(multiplier=settings.backoff_s, max=settings.backoff_max_s)
               + wait_random(0, settings.backoff_s))

    def wait(state) -> float:
        asked = retry_after_s(state.outcome.exception())
        return min(backoff(state) if asked is None else asked, settings.backoff_max_s)

    def log(state) -> None:
        exc = state.outcome.exception()
        asked = retry_after_s(exc)
        asked = ("" if asked is None else " (the server's Retry-After)" if asked <= settings.backoff_max_s else
                 f" (the server's Retry-After of {asked:.0f}s, capped at llm.backoff_max_s)")
        logger.warning("LLM call to %s at %s: %s; attempt %d/%d, retrying in %.2fs%s", model,
                       endpoint(settings.api_base, model, exc, litellm), classify(exc, api_key)[2],
                       state.attempt_number, attempts, state.next_action.sleep, asked)

    return Retrying(stop=stop_after_attempt(attempts), retry=retry_if_exception(lambda e: is_retryable(e, litellm)),
                    wait=wait, sleep=sleep, before_sleep=log, reraise=True)
