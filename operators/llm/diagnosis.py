"""What a failed LLM request means, in words a user can act on: its kind (no key, no connection, refused key, unknown
model, quota, ...), the provider's own message, the URL it went to, and how long its server asked to wait before the
next try. litellm wraps every failure in its own classes, often as an HTTP 500 it never received ("Connection
error."); the cause is found down the exception's chain.

Secrets: the key, should a message ever hold it, is blanked out (``***``).
"""
from __future__ import annotations

import email.utils
import math
import re
import time

# litellm reports a missing key for OpenAI-style providers as an InternalServerError (500); retrying is futile.
FATAL_MARKERS = ("Missing credentials", "api_key client option must be set")
_MAX_CAUSE_CHARS = 400
# Exception classes (by name, anywhere in an error's chain) that mean the request got no answer in time, or never
# reached a server: litellm reports them as its own classes, or as an InternalServerError (HTTP 500) around them.
_TIMEOUT_NAMES = {"Timeout", "APITimeoutError", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout",
                  "TimeoutException", "TimeoutError"}
_CONNECTION_NAMES = {"APIConnectionError", "ConnectError", "ConnectionError", "ConnectionRefusedError", "gaierror",
                     "RemoteProtocolError"}
_LITELLM_PREFIX = re.compile(r"^litellm\.\w+: (\w+: )?")  # "litellm.AuthenticationError: AuthenticationError: "


def cause(exc: BaseException, secret: str | None) -> str:
    """A short description of an exception with the key (should it ever appear) blanked out."""
    text = f"{type(exc).__name__}: {exc}"
    if secret:
        text = text.replace(secret, "***")
    return text if len(text) <= _MAX_CAUSE_CHARS else text[:_MAX_CAUSE_CHARS] + "..."


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or during, outermost first."""
    found: list[BaseException] = []
    while exc is not None and exc not in found and len(found) < 12:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


def classify(exc: BaseException, secret: str | None = None) -> tuple[str, int | None, str]:
    """(kind, HTTP status, text) of a failed request (the kinds: ``LLMError``). The text is the provider's own
    message for an HTTP error; for a request that got no answer or reached no server, the root cause (``[Errno 111]
    Connection refused``), which litellm hides behind "Connection error." and an HTTP 500 it never received."""
    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    root = cause(chain[-1], secret)
    if names & _TIMEOUT_NAMES:
        return "timeout", None, f"no answer in time ({root})"
    if names & _CONNECTION_NAMES:
        return "connection", None, f"no connection ({root})"
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    text = _LITELLM_PREFIX.sub("", cause(exc, secret).partition(": ")[2])
    if any(marker in text for marker in FATAL_MARKERS):
        return "key", status, text
    kind = {401: "auth", 403: "auth", 404: "not_found", 429: "rate_limit"}.get(status, "")
    if status == 429 and "quota" in text.lower():
        kind = "quota"
    elif not kind and status is not None:
        kind = "server" if status >= 500 else "request" if status >= 400 else ""
    return kind, status, f"HTTP {status}: {text}" if status is not None else text


def endpoint(api_base: str | None, model: str, exc: BaseException | None = None, litellm=None) -> str:
    """Where a request for `model` goes: llm.api_base, else the URL a failed request went to, else litellm's default
    for the provider (given litellm), else the provider by name."""
    if api_base:
        return api_base
    for e in _chain(exc) if exc is not None else []:
        url = getattr(getattr(e, "request", None), "url", None) if type(e).__module__.startswith("httpx") else None
        if url is not None:
            return str(url)
    if litellm is not None:
        try:
            found = litellm.get_api_base(model, {})
        except Exception:  # noqa: BLE001 - only a better URL to show
            found = None
        if found:
            return found
    return f"the {model.partition('/')[0] or model} API"


def retry_after_s(exc: BaseException | None) -> float | None:
    """The seconds a failed request's server asked to wait before the next (its ``retry-after-ms`` or ``Retry-After``
    header, in seconds or as an HTTP date), or None when it asked nothing. litellm keeps the server's answer on its
    exceptions (``.response``, an httpx.Response with its headers)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            seconds = float(ms) / 1000
        elif (value := headers.get("retry-after")) is None:
            return None
        elif value.strip().replace(".", "", 1).isdigit():
            seconds = float(value)
        else:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (AttributeError, TypeError, ValueError):  # no headers, or a value that is neither seconds nor a date
        return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None
