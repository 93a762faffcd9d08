"""The LLM client shared by every LLM operator: litellm behind a disk cache, a budget, retries and a semaphore (the
cache and its per-request locks, the budget, the count of failed calls in a row and the errors live in
``operators/llm/ledger.py``; what a failure means, in ``operators/llm/diagnosis.py``).

litellm is imported lazily, on the first request that actually has to be sent: importing it costs seconds and,
unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set first, it tries to download a price map. Cache hits never import it,
so a rerun of a cached configuration replays without litellm, without a server and without an API key.

Retries are tenacity's, run by ``operators/llm/retries.py`` (what is retried, how long each retry waits: a server's
``Retry-After`` or exponential backoff with jitter, capped; one log line per retry); litellm's own are off
(``num_retries=0``: outside its Router they retry every ``openai.APIError``, a refused key included, and wait times
no deadline cuts short). This client gives tenacity its sleep (``LLMClient._sleep``), cut at the wall-time deadline
(``cut_at``, even one set while it sleeps) or when the LLM is taken for down, and spaces the requests it sends under
``llm.max_calls_per_minute`` (``LLMClient._pace``). Every failure names the model, its cause, the URL and the attempts
made.

Secrets: the API key is read from the environment variable named in ``LLMSettings.api_key_env`` at request time and
handed to litellm only (and, by the check before a run, to the server's ``GET /models``). It is never hashed,
cached, recorded, logged or put into an exception message.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from operators.llm import retries
from operators.llm.diagnosis import classify, endpoint
from operators.llm.ledger import (UNAVAILABLE, Budget, FailureCount, LLMBudgetExceeded, LLMCut,  # noqa: F401
                                  LLMError, LLMUnavailable, ResponseCache, request_hash)
from operators.llm.settings import LLMSettings  # noqa: F401 (callers import it from here)

logger = logging.getLogger(__name__)

# Loggers of litellm and of the OpenAI SDK it drives: at DEBUG they print whole requests (prompts included).
_QUIET_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai")
# Sent to a custom api_base when no api_key_env is configured (local servers ignore it; it is no secret).
_NO_KEY = "no-key"
# The pre-flight's request (``LLMClient.probe``): a few tokens, never cached, recorded or retried.
_PROBE = [{"role": "user", "content": "Reply with the word OK."}]
_PROBE_TOKENS = 8

_litellm = None
_litellm_lock = threading.Lock()


@dataclass
class LLMReply:
    """One completion, fresh or replayed from the cache (a replay costs nothing)."""

    text: str
    model: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached: bool
    request_hash: str

    def record(self, role: str) -> dict:
        """The dict handed to the recorder (``RunStore.add_llm_call``): accounting only, no content."""
        return {"role": role, "model": self.model, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd, "cached": self.cached,
                "request_hash": self.request_hash}


# --------------------------------------------------------------------------------------------------- litellm


def _load_litellm():
    """Import litellm once (thread-safe), offline price map first, and keep it quiet."""
    global _litellm
    with _litellm_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            try:
                import litellm
            except ImportError as exc:
                missing = getattr(exc, "name", None)
                why = ("litellm is not installed" if missing in (None, "litellm") else
                       f"litellm cannot be imported: it needs {missing!r}, which is not installed ({exc})")
                raise LLMError(f"{why}; it is needed for LLM operators (pip install litellm)") from exc
            litellm.suppress_debug_info = True
            litellm.set_verbose = False
            _quiet_loggers()
            _litellm = litellm
    return _litellm


def _quiet_loggers() -> None:
    """Raise litellm's and the OpenAI SDK's loggers to WARNING unless someone configured them explicitly."""
    for name in _QUIET_LOGGERS:
        lg = logging.getLogger(name)
        if lg.level < logging.WARNING and not os.environ.get("LITELLM_LOG"):
            lg.setLevel(logging.WARNING)


# ----------------------------------------------------------------------------------------- request and reply


def request_payload(settings: LLMSettings, messages: list[dict], temperature: float, model: str,
                    sample: int = 0) -> dict:
    """Everything that determines a reply (and hence its cache key); never the API key.

    ``sample`` (only present when non-zero) tells apart independent samples of one identical request: it is part of
    the cache key, and is sent as the request's ``seed`` where the provider takes one (``_seed``), so two samples
    are never the same request.
    """
    payload = {"model": model, "api_base": settings.api_base, "messages": messages, "temperature": temperature,
               "max_tokens": settings.max_tokens}
    if sample:
        payload["sample"] = int(sample)
    return payload


def _seed(litellm, payload: dict) -> dict:
    """{"seed": the payload's sample} where it has one and its model's provider takes a seed (litellm's
    ``get_supported_openai_params``: OpenAI and OpenAI-compatible servers, vLLM, Ollama; not Anthropic), else {}."""
    if not payload.get("sample"):
        return {}
    try:
        supported = litellm.get_supported_openai_params(model=payload["model"]) or ()
    except Exception:  # noqa: BLE001 - a model litellm does not know: send nothing it may refuse
        supported = ()
    return {"seed": payload["sample"]} if "seed" in supported else {}


def _field(obj: Any, name: str, default=None):
    """Attribute or key access, for litellm objects that are sometimes dicts."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def parse_response(response) -> dict:
    """Text, finish reason and token counts of a litellm ModelResponse."""
    choices = _field(response, "choices") or [None]
    message = _field(choices[0], "message")
    usage = _field(response, "usage")
    return {"text": _field(message, "content") or "",
            "finish_reason": _field(choices[0], "finish_reason") or "",
            "prompt_tokens": int(_field(usage, "prompt_tokens", 0) or 0),
            "completion_tokens": int(_field(usage, "completion_tokens", 0) or 0)}


def reply_cost(litellm, response, settings: LLMSettings, prompt_tokens: int, completion_tokens: int) -> float:
    """litellm's price when it knows the model, else the per-token overrides, else 0.0."""
    try:
        cost = litellm.completion_cost(completion_response=response)
        if cost is not None:
            return float(cost)
    except Exception:  # noqa: BLE001 - unknown models raise assorted errors; pricing must never fail a call
        pass
    return (prompt_tokens * (settings.input_cost_per_token or 0.0)
            + completion_tokens * (settings.output_cost_per_token or 0.0))


# ------------------------------------------------------------------------------------------------- client


class LLMClient:
    """Chat completions through litellm: cached, budgeted, retried, thread-safe and concurrency-limited.

    A call that fails after its retries is logged with its cause and URL; ``max_consecutive_failures`` of them in a
    row and the LLM is taken for down (``LLMUnavailable``, for this call and every later one). ``cut_at`` sets a
    deadline after which no request is sent and no retry waits (``LLMCut``).
    """

    def __init__(self, settings: LLMSettings, recorder: Callable[[dict], None] | None = None,
                 max_calls: int | None = None, max_cost_usd: float | None = None):
        self.settings = settings
        self.recorder = recorder
        self.budget = Budget(max_calls, max_cost_usd)
        self.cache = ResponseCache(Path(settings.cache_dir) / settings.cache_namespace) if settings.cache_dir else None
        self._slots = threading.Semaphore(settings.concurrency)
        self.failures = FailureCount(settings.max_consecutive_failures)
        self._deadline: float | None = None  # time.perf_counter() after which nothing is sent (cut_at)
        self._alarm = threading.Condition()  # wakes the waits (_sleep) when the deadline moves or the LLM is down
        self._pace_lock = threading.Lock()
        self._next_turn = float("-inf")  # time.perf_counter() before which no request is sent (_pace)

    def cut_at(self, deadline: float | None) -> None:
        """No request is sent after `deadline` (time.perf_counter()); requests in flight and retries waiting are
        cut short at it. None: no deadline."""
        with self._alarm:
            self._deadline = deadline
            self._alarm.notify_all()

    def _left_s(self, model: str) -> float | None:
        """Seconds to the deadline (None: none); LLMCut when it has passed."""
        if self._deadline is None:
            return None
        left = self._deadline - time.perf_counter()
        if left <= 0:
            raise LLMCut(f"wall-time budget spent: not calling {model}", kind="cut")
        return left

    @property
    def totals(self) -> dict:
        """Calls made by this client (replays from the cache included: the budget counts them) and their cost:
        {"calls": int, "cost_usd": float}."""
        return self.budget.totals

    def complete(self, messages: list[dict], role: str, temperature: float | None = None,
                 model: str | None = None, sample: int = 0) -> LLMReply:
        """One chat completion for ``role`` (planner, coder, ...): from the cache when possible, else sent.

        The cache returns the same reply for the same request. A caller that wants several independent samples
        of one identical prompt (e.g. two offspring of one parent) passes a distinct ``sample`` index for each;
        a rerun that passes the same indices replays the same replies.
        """
        model = model or self.settings.model
        temperature = self.settings.temperature if temperature is None else temperature
        payload = request_payload(self.settings, copy.deepcopy(messages), temperature, model, sample)
        key = request_hash(payload)
        drawn = self.budget.reserve(model, role)  # every call counts, from the cache or not
        try:
            reply = self._cached_or_fetched(key, payload, model)
        except BaseException:
            self.budget.release(role, drawn)
            raise
        self.budget.commit(reply.cost_usd, reply.cached)
        if self.recorder is not None:
            self.recorder(reply.record(role))
        return reply

    def child_budget(self, needs: dict, least: int, fallback: dict | None = None):
        """Reserve a child's calls before it starts (``ledger.Budget.child``), waiting for children in flight to
        give back what they do not use; cut at the wall-time deadline."""
        return self.budget.child(needs, least, check=lambda: self._left_s(self.settings.model), fallback=fallback)

    def _cached_or_fetched(self, key: str, payload: dict, model: str) -> LLMReply:
        """The cached reply, else a fresh one (identical requests in flight, in this process or another sharing the
        cache, wait for each other)."""
        if self.cache is None:
            return self._fetch(key, payload)
        with self.cache.hold(key):
            return self._from_cache(key, payload, model) or self._fetch(key, payload)

    def _from_cache(self, key: str, payload: dict, model: str) -> LLMReply | None:
        """A replay of a stored reply (cached=True, free), or None."""
        stored = self.cache.get(key, payload)
        if stored is None:
            return None
        logger.debug("LLM cache hit for %s (request %s)", model, key[:12])
        return LLMReply(text=stored.get("text", ""), model=model, finish_reason=stored.get("finish_reason", ""),
                        prompt_tokens=int(stored.get("prompt_tokens", 0)),
                        completion_tokens=int(stored.get("completion_tokens", 0)),
                        cost_usd=0.0, cached=True, request_hash=key)

    def _fetch(self, key: str, payload: dict) -> LLMReply:
        """Send the request (its call reserved in the budget by ``complete``), then store the reply in the cache. A
        failure (no key, no reply after the retries) is counted: the one that makes too many in a row raises
        LLMUnavailable."""
        self.failures.check()
        try:
            api_key = self.api_key(payload["model"])
            reply = self._send_with_retries(key, payload, api_key)
        except (LLMCut, LLMUnavailable):
            raise
        except LLMError as exc:
            error = self.failures.failed(exc)
            with self._alarm:  # the LLM may be down now: calls waiting to retry look
                self._alarm.notify_all()
            raise error from None
        self.failures.succeeded()
        if self.cache is not None:
            self._store(key, payload, reply)
        return reply

    def _store(self, key: str, payload: dict, reply: LLMReply) -> None:
        """Cache a fresh reply; a cache that cannot be written costs a warning, not the paid-for reply."""
        fields = {k: v for k, v in vars(reply).items() if k not in ("cached", "request_hash")}
        try:
            self.cache.put(key, payload, fields)
        except (OSError, sqlite3.Error) as exc:
            logger.warning("LLM cache: cannot write entry %s: %s", key[:12], type(exc).__name__)

    def api_key(self, model: str) -> str | None:
        """The key from the named environment variable.

        Without ``api_key_env``: a custom ``api_base`` is taken for an unauthenticated local server (vLLM, Ollama)
        and gets a placeholder, so that neither litellm's "missing credentials" error nor an ambient
        ``OPENAI_API_KEY`` reaches it; with no ``api_base`` either, None lets litellm use its own defaults.
        """
        name = self.settings.api_key_env
        if not name:
            return _NO_KEY if self.settings.api_base else None
        value = os.environ.get(name)
        if not value:
            raise LLMError(f"no API key for {model}: the environment variable {name} is not set (export "
                           f"{name}=<your key>)", kind="key")
        return value

    def probe(self, model: str | None = None) -> LLMReply:
        """One tiny request to `model` (default: the settings' model), never cached, recorded, budgeted, counted or
        retried: the pre-flight check (``operators.llm.check``). LLMError, with its kind, when it fails."""
        model = model or self.settings.model
        payload = request_payload(dataclasses.replace(self.settings, max_tokens=_PROBE_TOKENS), _PROBE, 0.0, model)
        return self._send_with_retries(request_hash(payload), payload, self.api_key(model), attempts=1)

    def _send_with_retries(self, key: str, payload: dict, api_key: str | None,
                           attempts: int | None = None) -> LLMReply:
        """Up to 1 + max_retries attempts (tenacity: ``retries.retrying``); the error names the cause (the provider's
        message, or why no server answered), the URL and the attempts made."""
        litellm = _load_litellm()
        model = payload["model"]
        retrying = retries.retrying(self.settings, litellm, model, api_key, attempts or self.settings.max_retries + 1,
                                    sleep=lambda seconds: self._sleep(seconds, model))
        try:
            return retrying(self._attempt, litellm, key, payload, api_key)
        except LLMError:  # LLMCut, LLMUnavailable: no failure of this request's
            raise
        except Exception as exc:  # noqa: BLE001 - classified, re-raised as LLMError
            kind, status, text = classify(exc, api_key)
            url = endpoint(self.settings.api_base, model, exc, litellm)
            tried = retrying.statistics.get("attempt_number", 1)
            raise LLMError(f"LLM call to {model} at {url} failed after {tried} attempt(s): {text}", kind=kind,
                           status=status) from None

    def _attempt(self, litellm, key: str, payload: dict, api_key: str | None) -> LLMReply:
        """One attempt; a failure past the deadline is the deadline's (LLMCut), no failure of the LLM's."""
        try:
            return self._send_once(litellm, key, payload, api_key)
        except Exception:
            self._left_s(payload["model"])
            raise

    def _sleep(self, seconds: float, model: str) -> None:
        """Wait `seconds` (before a retry, or for a request's turn), cut short at the deadline (LLMCut, even one set
        while waiting) or when the LLM is taken for down (LLMUnavailable): both wake it (``_alarm``)."""
        end = time.perf_counter() + seconds
        with self._alarm:
            while True:
                self.failures.check()
                left = self._left_s(model)
                wait = end - time.perf_counter()
                if wait <= 0:
                    return
                self._alarm.wait(wait if left is None else min(wait, left))

    def _pace(self, model: str) -> None:
        """Wait for this request's turn under ``llm.max_calls_per_minute`` (requests sent at least 60/N s apart, in
        the order they asked), cut short as ``_sleep``."""
        if self.settings.max_calls_per_minute is None:
            return
        with self._pace_lock:
            now = time.perf_counter()
            turn = max(now, self._next_turn)
            self._next_turn = turn + 60.0 / self.settings.max_calls_per_minute
        self._sleep(turn - now, model)

    def _send_once(self, litellm, key: str, payload: dict, api_key: str | None) -> LLMReply:
        """One HTTP request through litellm (its own retries off), under the concurrency semaphore, in its turn."""
        with self._slots:
            self._pace(payload["model"])
            left = self._left_s(payload["model"])
            response = litellm.completion(model=payload["model"], messages=copy.deepcopy(payload["messages"]),
                                          temperature=payload["temperature"], max_tokens=payload["max_tokens"],
                                          api_base=payload["api_base"], api_key=api_key, num_retries=0,
                                          **_seed(litellm, payload),
                                          timeout=self.settings.timeout_s if left is None else
                                          min(self.settings.timeout_s, left))
        fields = parse_response(response)
        cost = reply_cost(litellm, response, self.settings, fields["prompt_tokens"], fields["completion_tokens"])
        return LLMReply(model=payload["model"], cost_usd=cost, cached=False, request_hash=key, **fields)
