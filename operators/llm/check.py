"""The LLM configuration checked before a run starts, the way a user would check it: the run needs an LLM only when
an operator or the initialiser asks one (``uses_llm``); then its key must be set, and its server must answer
(``check_llm``): a custom ``api_base`` is asked for ``GET /models`` (free; the model must be listed), and when it
has no such route, or for a hosted provider, the model gets one tiny request (a few tokens, neither cached nor
recorded nor counted in the run's budget). A failure is one line naming the cause (the provider's own message, the
URL) and the fix; ``llm.check=false`` skips the check (replies already in the cache replay without any server).

litellm is imported only for the tiny request: a listed model, or a missing key, is found without it.
"""
from __future__ import annotations

import dataclasses
import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

from kernelevo.core.errors import KernelevoError
from operators.llm.client import LLMClient, LLMSettings
from operators.llm.diagnosis import cause
from operators.llm.ledger import LLMError
from operators.llm.operators import LLM_OPERATORS
from operators.llm.settings import LLMPlan

MODELS_TIMEOUT_S = 15.0  # the most GET /models may take (a black-holed address answers nothing)
SKIP = "llm.check=false skips this check"
PRESETS_DIR = Path(__file__).resolve().parent / "presets"  # one YAML file per LLM preset, its name the `llm=` option


class LLMCheckFailed(KernelevoError):
    """The LLM a run would use cannot be used: the message names the cause and the fix."""


def presets() -> list[str]:
    """The `llm=` options that choose an LLM: the presets (presets/*.yaml; llm=none chooses none)."""
    return sorted(path.stem for path in PRESETS_DIR.glob("*.yaml"))


def uses_llm(operators: list, llm: LLMPlan | None) -> bool:
    """Whether the run would ask an LLM (an LLM operator, or ``llm.initialise``); KernelevoError when it would and no
    LLM is chosen (``llm=none``): before anything is made, rather than after generation 0."""
    wanted = [op.name for op in operators if isinstance(op, LLM_OPERATORS)]
    if wanted and not (llm is not None and llm.provider):
        raise KernelevoError(f"the operators {', '.join(sorted(set(wanted)))} need an LLM and none is chosen: add "
                             f"llm={'|'.join(presets())} (operators/llm/presets/), or use operators=offline")
    return bool(wanted) or (llm is not None and llm.initialise not in (False, None))


def unused_llm(operators: list, llm: LLMPlan | None) -> None:
    """KernelevoError where an LLM is chosen (``llm=openai``) and the run would never ask it (no LLM operator, no
    ``llm.initialise``), rather than a run that silently runs offline: a new run's check (a resume keeps its run's
    settings)."""
    if llm is not None and llm.provider and not uses_llm(operators, llm):
        raise KernelevoError(f"an LLM is chosen ({', '.join(llm.models)}) but no operator of the run asks one "
                             f"(operators=offline, the default) and llm.initialise is false: add operators=llm (or "
                             f"operators=llm_mutation), or llm.initialise=true, or leave llm= out to run offline")


def check_llm(llm: LLMPlan) -> str:
    """Check the run's LLM as a user would; returns one line saying what answered, or "" when ``llm.check`` is
    false. LLMCheckFailed naming the cause and the fix."""
    if llm.check is False:
        return ""
    settings = llm.client
    client, models = LLMClient(dataclasses.replace(settings, cache_dir=None)), llm.models
    try:
        listed = _listed(client, models) if settings.api_base else None
        if listed is not None:
            return listed
        for model in models:
            try:
                client.probe(model)
            except LLMError as exc:
                if exc.kind != "rate_limit":  # a rate limit: the provider knows the key and the model
                    raise
        return f"llm: {', '.join(models)} answered a request at {client.settings.api_base or 'its provider'}"
    except LLMError as exc:
        raise LLMCheckFailed(f"the LLM check failed: {exc}; {fix(exc, settings)}; {SKIP}") from None


def fix(exc: LLMError, settings: LLMSettings) -> str:
    """What to do about a failed check, by what failed."""
    where = "llm.api_base" if settings.api_base else "the network (or a proxy)"
    variable = settings.api_key_env
    return {
        "key": ("or choose llm=local (a local server) or operators=offline (no LLM)" if variable else
                "set llm.api_key_env to the variable that holds the key"),
        "connection": (f"start the server (vLLM: vllm serve MODEL; Ollama: ollama serve) or point llm.api_base at "
                       f"it" if settings.api_base else f"check {where}"),
        "timeout": f"check that the server is up and not overloaded, or raise llm.timeout_s ({settings.timeout_s:g})",
        "auth": (f"check the key in {variable}" if variable else
                 "set llm.api_key_env to the variable that holds the key the server wants"),
        "not_found": "check llm.model (provider/NAME, NAME as the provider spells it) and llm.api_base",
        "quota": f"add credit to the account, or use another key than {variable}",
    }.get(exc.kind, f"check llm.model and {where}")


def _listed(client: LLMClient, models: list[str]) -> str | None:
    """Whether the server at llm.api_base lists every model (GET /models): the line saying so; None when it has no
    such list (a tiny request tells then); LLMError when nothing answers there, or it refuses the key, or a model is
    not in its list."""
    base = client.settings.api_base
    url = f"{base.rstrip('/')}/models"
    key = client.api_key(models[0])
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=min(client.settings.timeout_s, MODELS_TIMEOUT_S)) as answer:
            body = answer.read()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise LLMError(f"GET {url} answered HTTP {exc.code}: {_message(exc)}", kind="auth",
                           status=exc.code) from None
        return None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        timed_out = isinstance(reason, (socket.timeout, TimeoutError))
        what = "no answer in time" if timed_out else "no connection"
        raise LLMError(f"nothing answers at {base}: {what} ({cause(reason, key)})",
                       kind="timeout" if timed_out else "connection") from None
    try:
        ids = [entry["id"] for entry in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError):
        return None
    missing = [model for model in models if not _served(model, ids)]
    if not ids:
        return None
    if missing:
        prefix = missing[0].partition("/")[0] if "/" in missing[0] else "openai"
        shown = ", ".join(ids[:8]) + (", ..." if len(ids) > 8 else "")
        raise LLMError(f"{url} does not list the model {missing[0]!r}; it lists {shown} "
                       f"(llm.model={prefix}/{ids[0]}?)", kind="not_found")
    return f"llm: {', '.join(models)} listed by {url}"


def _served(model: str, ids: list[str]) -> bool:
    """Whether `model` (litellm's provider/NAME; NAME may hold a '/' itself) is one of the server's ids."""
    return model in ids or model.partition("/")[2] in ids


def _message(exc: urllib.error.HTTPError) -> str:
    """The server's own message of an HTTP error (an OpenAI-style error body), else its reason."""
    try:
        return str(json.loads(exc.read())["error"]["message"])
    except (ValueError, KeyError, TypeError, OSError):
        return str(exc.reason)
