"""Local stand-ins for the OpenAI Chat Completions and Anthropic Messages APIs.

They let the real SDK clients (and the whole pipeline) run with no network: answers
are deterministic per request and plausible (a generator request gets the prompt's
reference program back with a speed edit in a fenced block; a critique request gets
a diagnosis that follows the feedback in the prompt), usage fields are filled, and
Anthropic requests with ``thinking`` get a thinking block. Tests inject faults (HTTP
status with ``retry-after``, slow answers, malformed JSON, dropped connections,
truncated output) to drive the client's retries and error paths.

Standalone: ``python -m maxcode.llm.fake_servers --port 8765`` serves both APIs on one
port (OpenAI at ``http://127.0.0.1:8765/v1``, Anthropic at ``http://127.0.0.1:8765``).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated

import typer

FAULT_KINDS = ("status", "slow", "malformed", "drop", "truncate")
_FENCE = re.compile(r"(?:```|~~~)[^\n]*\n(.*?)(?:```|~~~)", re.S)
_MAIN = re.compile(r"int\s+main\s*\([^)]*\)\s*\{")


@dataclass(frozen=True)
class Fault:
    """What the next matching request gets instead of a normal answer."""

    kind: str  # one of FAULT_KINDS
    status: int = 500  # kind="status"
    retry_after: float | None = None  # kind="status": seconds in the retry-after header
    delay_s: float = 0.0  # kind="slow": wait before answering normally
    path: str | None = None  # only requests to this path ("/v1/messages", ...); None: any

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"fault kind {self.kind!r} is not one of {list(FAULT_KINDS)}")


def _tokens(text: str) -> int:
    """A stable token count (about four characters a token, like BPE on code)."""
    return max(1, (len(text) + 3) // 4)


def _digest(obj: object) -> int:
    return int(hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12], 16)


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def fake_answer(system: str, prompt: str, variant: int) -> str:
    """A deterministic, plausible completion for a generator or a critique request."""
    if re.search(r"\bdiagnose:", system, re.I):  # the critique prompt's first instruction
        return _critique(prompt, variant)
    blocks = _FENCE.findall(prompt)
    reference = blocks[0] if blocks else ""
    if "class Model" in reference:
        code = (
            reference.rstrip()
            + "\n\n\nclass ModelNew(Model):\n"
            + '    """Same operators as Model; a fused CUDA version comes next."""\n'
        )
        return f"Here is the optimized architecture.\n\n```python\n{code}```\n"
    return _cpp_answer(reference, variant)


def _cpp_answer(reference: str, variant: int) -> str:
    match = _MAIN.search(reference)
    if not reference or match is None:
        return "I could not find a program to optimize in the prompt."
    fast_io = "\n    std::ios::sync_with_stdio(false);\n    std::cin.tie(nullptr);"
    code = reference[: match.end()] + fast_io + reference[match.end() :]
    if "#include <iostream>" not in code and "bits/stdc++" not in code:
        code = "#include <iostream>\n" + code
    kind = variant % 5
    if kind == 1:
        code = code.replace("<< endl", "<< '\\n'").replace("<< std::endl", "<< '\\n'")
    elif kind == 2:
        code = reference
    elif kind == 3:
        return (
            "The bottleneck is unbuffered I/O; synchronizing with stdio costs a lot.\n\n"
            f"~~~c++\n{code}~~~\n"
        )
    elif kind == 4:
        code = code.replace(";", "", 1)  # a plausible slip: the candidate fails to compile
    return f"Faster version: untie the streams and keep the algorithm.\n\n```cpp\n{code}```\n"


def _critique(prompt: str, variant: int) -> str:
    if "compiled=False" in prompt:
        diagnosis = (
            "Diagnosis: the attempt does not compile; the first compiler error points at a "
            "missing declaration or a syntax slip near the reported line."
        )
        action = (
            "Suggestion: fix the reported line first and keep the rest of the program unchanged."
        )
    elif "correctness=False" in prompt:
        diagnosis = (
            "Diagnosis: the output differs from the expected output: a logic error, not speed."
        )
        action = "Suggestion: compare with the reference step by step; check bounds and integer overflow."
    else:
        diagnosis = [
            "Diagnosis: the run time is dominated by memory traffic (bandwidth-bound).",
            "Diagnosis: the algorithm does redundant work; the complexity is the bottleneck.",
            "Diagnosis: input/output handling dominates the run time.",
        ][variant % 3]
        action = "Suggestion: fuse passes over the data and avoid recomputation; reuse buffers."
    return f"{diagnosis}\n{action}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeHTTPServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once: no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: tests assert on recorded requests instead."""

    def do_POST(self) -> None:
        owner = self.server.owner
        owner._enter()
        try:
            self._post()
        finally:
            owner._leave()

    def _post(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        owner = self.server.owner
        fault = owner._next_fault(self.path)
        owner._record(self.path, self.headers, raw)
        if self.path not in ("/v1/chat/completions", "/v1/messages"):
            return self._json(
                404, {"error": {"type": "not_found", "message": f"no route {self.path}"}}
            )
        auth = self.headers.get("authorization", "") or self.headers.get("x-api-key", "")
        if not auth.removeprefix("Bearer ").strip():
            return self._json(
                401, {"error": {"type": "authentication_error", "message": "no API key"}}
            )
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return self._json(
                400, {"error": {"type": "invalid_request_error", "message": "bad JSON"}}
            )
        if body.get("stream"):
            return self._json(
                400,
                {"error": {"type": "invalid_request_error", "message": "streaming unsupported"}},
            )
        if fault is not None:
            if fault.kind == "status":
                headers = (
                    {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
                )
                err = {
                    "type": "error",
                    "error": {"type": "injected", "message": f"injected {fault.status}"},
                }
                return self._json(fault.status, err, headers)
            if fault.kind == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
                return None
            if fault.kind == "malformed":
                return self._raw(200, b'{"id": "broken", "choices": [')
            if fault.kind == "slow":
                time.sleep(fault.delay_s)
        if owner.latency_s:
            time.sleep(owner.latency_s)
        truncate = fault is not None and fault.kind == "truncate"
        if self.path == "/v1/chat/completions":
            return self._json(200, self._openai(body, truncate))
        return self._json(200, self._anthropic(body, truncate))

    def _openai(self, body: dict, truncate: bool) -> dict:
        messages = body.get("messages", [])
        system = "\n".join(
            _content_text(m.get("content")) for m in messages if m.get("role") == "system"
        )
        prompt = "\n".join(
            _content_text(m.get("content")) for m in messages if m.get("role") != "system"
        )
        text = fake_answer(system, prompt, _digest(body))
        text, finish = _limit(
            text, body.get("max_tokens") or body.get("max_completion_tokens"), truncate
        )
        p, c = _tokens(system + prompt), _tokens(text)
        return {
            "id": f"chatcmpl-{_digest(body):x}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length" if finish else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
        }

    def _anthropic(self, body: dict, truncate: bool) -> dict:
        system = _content_text(body.get("system", ""))
        prompt = "\n".join(_content_text(m.get("content")) for m in body.get("messages", []))
        text = fake_answer(system, prompt, _digest(body))
        content: list[dict] = []
        thinking_tokens = 0
        thinking = body.get("thinking") or {}
        if thinking.get("type") == "enabled":
            thought = (
                "Let me read the execution feedback and the code: which resource limits the "
                "run time, and which change would remove that limit?"
            )
            content.append({"type": "thinking", "thinking": thought, "signature": "fake-signature"})
            thinking_tokens = _tokens(thought)
        budget = body.get("max_tokens")
        text, finish = _limit(text, budget - thinking_tokens if budget else None, truncate)
        content.append({"type": "text", "text": text})
        return {
            "id": f"msg_{_digest(body):x}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": content,
            "stop_reason": "max_tokens" if finish else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": _tokens(system + prompt),
                "output_tokens": _tokens(text) + thinking_tokens,
            },
        }

    def _json(self, status: int, obj: dict, headers: dict | None = None) -> None:
        self._raw(status, json.dumps(obj).encode(), headers)

    def _raw(self, status: int, data: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def _limit(text: str, max_tokens: int | None, force: bool) -> tuple[str, bool]:
    """Cut the answer like a model that hit its token limit (mid code fence)."""
    limit = max(1, max_tokens) * 4 if max_tokens else None
    if force:
        limit = min(limit or len(text), len(text) * 2 // 3)
    if limit is not None and len(text) > limit:
        return text[:limit], True
    return text, False


class FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeLLMServer

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (timeout) breaks the pipe: expected, not worth a traceback."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeLLMServer:
    """Both APIs on one 127.0.0.1 port, in a background thread; faults are queued."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency_s: float = 0.0):
        self.latency_s = latency_s  # added to every answer, like a model's generation time
        self._httpd = FakeHTTPServer((host, port), _Handler)
        self._httpd.owner = self
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        # every request: path, header names (never values) and body fields but the messages
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests served at once: checks concurrency bounds
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(faults)

    def count(self, path: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if path is None or r["path"] == path)

    def _next_fault(self, path: str) -> Fault | None:
        with self._lock:
            for i, fault in enumerate(self._faults):
                if fault.path is None or fault.path == path:
                    del self._faults[i]
                    return fault
        return None

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _record(self, path: str, headers: object, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = {}
        params = {k: v for k, v in body.items() if k not in ("messages", "system")}
        with self._lock:
            self.requests.append(
                {
                    "path": path,
                    "headers": sorted(k.lower() for k in headers),  # type: ignore[attr-defined]
                    "params": params,
                }
            )

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(
    port: Annotated[int, typer.Option(help="port to listen on (0: any free port)")] = 8765,
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    latency: Annotated[float, typer.Option(help="seconds added to every answer")] = 0.0,
) -> None:
    """Serve the fake OpenAI and Anthropic APIs until interrupted."""
    server = FakeLLMServer(host, port, latency)
    typer.echo(f"openai base_url: {server.openai_base_url}")
    typer.echo(f"anthropic base_url: {server.anthropic_base_url}")
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        server._httpd.server_close()


if __name__ == "__main__":
    typer.run(main)
