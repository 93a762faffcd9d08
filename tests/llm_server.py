"""A scripted OpenAI-compatible chat-completions server for tests (no real LLM anywhere).

Each POST to ``/v1/chat/completions`` (or ``/chat/completions``) consumes the next entry of the script:

* ``{"content": "...", "finish_reason": "stop", "usage": {"prompt_tokens": N, "completion_tokens": M}}``
  answers 200 with a ``chat.completion`` object whose ``model`` echoes the request;
* ``{"status": 429}`` (or any other HTTP status >= 400) answers that status with an OpenAI-style error body;
* any entry may carry ``"delay_s": X`` to sleep before answering (to provoke client time-outs), and ``"headers":
  {...}`` to send with its answer (e.g. ``{"Retry-After": "1"}`` on a 429).

Instead of a list, ``script`` may be a function of the request's JSON body returning the entry (replies chosen by
what was asked, e.g. by the role named in the system message). An exhausted script answers 500 with the message
``script exhausted``.

``GET /v1/models`` (or ``/models``), which consumes no entry, lists ``models`` (by default the ``scripted-model``
the tests configure); ``models=None`` answers 404 (a server without that route), an int answers that HTTP status.

The server runs on 127.0.0.1 on an ephemeral port (or ``port``), uses daemon threads, and wakes every sleeping
handler when it is stopped, so ``__exit__`` never hangs.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")
MAX_BODY_BYTES = 16 * 1024 * 1024
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error"}


def completion_body(entry: dict, request: dict, seq: int) -> dict:
    """The 200 ``chat.completion`` JSON for a content entry."""
    usage = entry.get("usage", {})
    prompt_tokens = int(usage.get("prompt_tokens", 0))
    completion_tokens = int(usage.get("completion_tokens", 0))
    return {
        "id": f"chatcmpl-scripted-{seq}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted-model"),
        "choices": [{"index": 0,
                     "message": {"role": "assistant", "content": entry.get("content", "")},
                     "finish_reason": entry.get("finish_reason", "stop")}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def error_body(status: int, message: str) -> dict:
    """An OpenAI-style error JSON."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


class _Handler(BaseHTTPRequestHandler):
    """Answers one request from the owning ScriptedLLMServer's script."""

    server_version = "ScriptedLLM/1.0"

    def log_message(self, format, *args):  # noqa: A002 - signature fixed by BaseHTTPRequestHandler
        """Silence the default stderr access log."""

    def do_GET(self):
        owner: ScriptedLLMServer = self.server.owner
        path, models = self.path.split("?", 1)[0], owner.models
        with owner._lock:
            owner.model_requests += 1
        if path not in MODELS_PATHS or models is None:
            self._send(404, error_body(404, f"no route for GET {self.path}"))
        elif isinstance(models, int):
            self._send(models, error_body(models, f"scripted HTTP {models}"))
        else:
            self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "scripted"}
                                                        for model in models]})

    def do_POST(self):
        owner: ScriptedLLMServer = self.server.owner
        path = self.path.split("?", 1)[0]
        body = self._read_json()
        if path not in CHAT_PATHS:
            self._send(404, error_body(404, f"no route for POST {path}"))
            return
        # header names are case-insensitive (newer OpenAI clients send them in lower case): recorded in one form
        headers = {"-".join(part.capitalize() for part in name.split("-")): value
                   for name, value in self.headers.items()}
        entry, seq = owner._take(path, headers, body)
        try:
            self._answer(owner, entry, body, seq)
        finally:
            owner._finished()

    def _answer(self, owner: "ScriptedLLMServer", entry: dict, body, seq: int) -> None:
        """Sleep if scripted, then send the scripted reply or error."""
        if entry.get("delay_s"):
            owner._stopping.wait(float(entry["delay_s"]))
        headers = entry.get("headers", {})
        if isinstance(body, dict) and body.get("stream"):
            self._send(400, error_body(400, "streaming is not supported by the scripted server"))
        elif "status" in entry:
            status = int(entry["status"])
            self._send(status, error_body(status, entry.get("message", f"scripted HTTP {status}")), headers)
        else:
            self._send(200, completion_body(entry, body if isinstance(body, dict) else {}, seq), headers)

    def _read_json(self):
        """The request body parsed as JSON (None when absent or malformed)."""
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY_BYTES)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        """Write a JSON response (with `headers` besides its own); a client that already hung up (time-out) is
        ignored."""
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, str(value))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        """Dropped connections are expected (client time-outs); keep stderr clean."""


class ScriptedLLMServer:
    """Context manager: an OpenAI-compatible server answering from ``script``, one entry per chat request."""

    def __init__(self, script, models=("scripted-model",), port: int = 0):
        self._script = script if callable(script) else [dict(entry) for entry in script]
        self.models = models if models is None or isinstance(models, int) else list(models)
        self.model_requests = 0  # GET requests (the model list), none of them in `requests`
        self._port = port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[tuple[str, dict, object]] = []
        self._active = 0
        self._max_active = 0
        self._times: list[float] = []  # monotonic times of every request's arrival and answer
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients, e.g. ``http://127.0.0.1:PORT/v1``."""
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[tuple[str, dict, object]]:
        """Every chat request received so far, as (path, headers, json body)."""
        with self._lock:
            return list(self._requests)

    @property
    def max_concurrent(self) -> int:
        """The most chat requests that were being answered at the same time."""
        with self._lock:
            return self._max_active

    @property
    def in_flight(self) -> int:
        """Chat requests being answered now (arrived, not yet answered)."""
        with self._lock:
            return self._active

    @property
    def busy_span_s(self) -> float:
        """Seconds from the first request's arrival to the last answer."""
        with self._lock:
            return max(self._times) - min(self._times) if self._times else 0.0

    def _take(self, path: str, headers: dict, body) -> tuple[dict, int]:
        """Record a request and pop the next script entry (a 500 'script exhausted' entry when none is left)."""
        with self._lock:
            self._times.append(time.monotonic())
            self._requests.append((path, headers, body))
            seq = len(self._requests)
            self._active += 1
            self._max_active = max(self._max_active, self._active)
            if callable(self._script):
                return dict(self._script(body)), seq
            if self._script:
                return self._script.pop(0), seq
        return {"status": 500, "message": "script exhausted"}, seq

    def _finished(self) -> None:
        with self._lock:
            self._active -= 1
            self._times.append(time.monotonic())

    def start(self) -> "ScriptedLLMServer":
        """Bind to an ephemeral port on 127.0.0.1 and serve in a daemon thread."""
        self._httpd = _Server(("127.0.0.1", self._port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Wake sleeping handlers, stop serving and close the socket."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
