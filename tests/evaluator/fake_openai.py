"""A fake OpenAI-compatible Chat Completions server on loopback, for tests and the benchmark.

Answers are deterministic functions of the request (model, messages, seed, temperature), so a
resumed run gets exactly the answers an uninterrupted one would. Markers in the messages make
it misbehave on purpose:

- `[[gen-500]]` in the user message of a generator request: HTTP 500 every time;
- `[[judge-500]]` / `[[judge-notjson]]` / `[[judge-missing]]` in a judge request's text: HTTP 500,
  a non-JSON answer, or JSON without the rubric's first metric;
- `[[judge-notjson-seed=N]]`: a non-JSON answer to the judge request sent with seed N only (one call of
  several made for a draft, each with its own seed);
- `[[draft-bad]]` in a support-draft request: an answer that is not the draft form.

A judge request at a temperature above 0 without a seed gets a different answer each time it is
repeated (the repeat count is part of the answer's hash), as a sampling model would; with a seed
(or at temperature 0) the same request gets the same answer.

`logprobs: true` in a judge request gets the answer's tokens with log-probabilities (unless
`logprobs_enabled` is False, as for endpoints that give none). Each integer score token v of a
scale lo..hi has the alternatives v: 0.6, v - 1: 0.25, v + 1: 0.15 (an alternative off the scale
gives its share to v), all times 0.9, plus a space token with 0.1: `score_alternatives` is the rule.

`rate_limit_first = N` answers the first N requests with 429 and `Retry-After: retry_after`;
`unavailable_first = N` answers the next N with 503 (no Retry-After); `script` lists (status, headers)
answers for the first calls; the key `bad-key` gets 401.
Setting `hold_after = N` keeps every call after the N-th waiting until `release()` (a test stops
a run in the middle without racing it); `stop()` releases them too.
Run standalone: `python -m tests.evaluator.fake_openai --port 8999 --delay 0.5`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import socket
import threading
import time
from collections import Counter
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.waiting import wait_for


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _answer_for_schema(schema: dict[str, Any], h: str, *, drop_first_int: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dropped = False
    for i, (name, prop) in enumerate(schema.get("properties", {}).items()):
        byte = int(h[(2 * i) % 60 : (2 * i) % 60 + 2], 16)
        kind = prop.get("type")
        if kind == "integer":
            if drop_first_int and not dropped:
                dropped = True
                continue
            lo, hi = prop.get("minimum", 1), prop.get("maximum", 5)
            # Lean towards the top of the scale, like a real judge on decent outputs.
            out[name] = hi - (byte % 7 if byte % 7 < (hi - lo + 1) else 0)
        elif kind == "boolean":
            out[name] = byte % 5 == 0
        else:
            out[name] = f"fake rationale {h[:6]}"
    return out


def _support_draft(h: str, text: str) -> dict[str, Any]:
    cited = []
    # Cite the first article the prompt lists, at the revision it shows.
    marker = text.find("[KB-")
    if marker >= 0:
        head = text[marker + 1 : text.find("]", marker)]
        parts = head.split(" revision ")
        if len(parts) == 2 and parts[1].isdigit():
            cited.append({"article_id": parts[0], "revision": int(parts[1])})
    escalate = "no way out" in text.lower()
    words = " ".join(f"word{int(h[i:i + 2], 16)}" for i in range(0, 60, 2))
    body = f"Thank you for reaching out. {words} Please let us know if anything else comes up. " * 2
    return {
        "intent": "billing_charge",
        "draft": None if escalate else body,
        "citations": cited,
        "confidence": 0.5 if escalate else 0.85,
        "escalate": escalate,
    }


def score_alternatives(value: int, lo: int, hi: int) -> list[tuple[str, float]]:
    """Return the fake's top log-probs at a score token: (token, probability) with v first, then v - 1, v + 1, a space."""
    probs = {value: 0.6}
    for other, p in ((value - 1, 0.25), (value + 1, 0.15)):
        if lo <= other <= hi:
            probs[other] = p
        else:
            probs[value] += p
    return [(str(v), 0.9 * p) for v, p in probs.items()] + [(" ", 0.1)]


_TOKEN = re.compile(r"\d|[A-Za-z_]+|\s+|[^\w\s]")


def token_logprobs(content: str, schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the answer's tokens as the API gives them with `logprobs: true` (score tokens with alternatives)."""
    scales: dict[int, tuple[int, int]] = {}
    for name, prop in schema.get("properties", {}).items():
        if prop.get("type") == "integer":
            m = re.search(f'"{re.escape(name)}": (\\d)', content)
            if m:
                scales[m.start(1)] = (prop.get("minimum", 1), prop.get("maximum", 5))
    out: list[dict[str, Any]] = []
    for m in _TOKEN.finditer(content):
        token = m.group(0)
        scale = scales.get(m.start())
        top = [(token, 1.0)] if scale is None else score_alternatives(int(token), *scale)
        alternatives = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in top]
        out.append({"token": token, "logprob": alternatives[0]["logprob"], "bytes": list(token.encode()), "top_logprobs": alternatives})
    return out


class FakeOpenAI:
    """The fake server's state and app; `start()` runs it in a thread on 127.0.0.1."""

    def __init__(self, *, delay: float = 0.0) -> None:
        self.delay = delay
        # answers (status, headers) given to the first calls, in order, before any normal answer
        self.script: list[tuple[int, dict[str, str]]] = []
        # calls after this number are held until `release()`, so a test can stop a run in the middle
        # without racing it to the end on a busy machine (and without a wall-clock stall)
        self.hold_after: int | None = None
        self._released = threading.Event()
        self.rate_limit_first = 0
        self.unavailable_first = 0
        self.retry_after = 0.2
        self.calls = 0
        self.in_flight = 0  # requests received and not yet answered
        self.by_kind: Counter[str] = Counter()
        self.logprobs_enabled = True
        self._repeats: Counter[str] = Counter()
        self.rate_limited_at: list[float] = []
        self.served_at: list[float] = []
        self.requests: list[dict[str, Any]] = []  # bodies of answered requests, for assertions
        self.answered: list[tuple[dict[str, Any], str]] = []  # (request body, answer content) of each 200 answer
        self._lock = threading.Lock()
        chat, stats = Route("/v1/chat/completions", self._chat, methods=["POST"]), Route("/stats", self._stats)
        self.app = Starlette(routes=[chat, stats])
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _stats(self, request: Request) -> Response:
        return JSONResponse({"calls": self.calls, "by_kind": dict(self.by_kind)})

    def release(self) -> None:
        """Let the calls held by `hold_after` (and any later ones) be answered."""
        self._released.set()

    async def _chat(self, request: Request) -> Response:
        self.in_flight += 1
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: Request) -> Response:
        body = await request.json()
        refused = self._refusal(request, body)
        if isinstance(refused, Response):
            return refused
        if refused:  # held: no request is answered before release()
            while not self._released.is_set():
                await asyncio.sleep(0.005)  # polls the condition
        if self.delay:
            await asyncio.sleep(self.delay)
        messages = body.get("messages", [])
        text = "\n".join(str(m.get("content", "")) for m in messages)
        schema_info = (body.get("response_format") or {}).get("json_schema") or {}
        is_judge = schema_info.get("name", "").startswith("judge_")
        h = _digest(body.get("model"), messages, body.get("seed"), body.get("temperature"))
        if is_judge and body.get("seed") is None and (body.get("temperature") or 0) > 0:
            with self._lock:
                self._repeats[h] += 1
                h = _digest(h, self._repeats[h])
        self.by_kind["judge" if is_judge else "generator"] += 1
        self.served_at.append(time.monotonic())
        if len(self.requests) < 10_000:
            self.requests.append(body)
        content = self._judge_content(body, h) if is_judge else self._generator_content(body, h, text)
        if isinstance(content, Response):
            return content
        if len(self.answered) < 10_000:
            self.answered.append((body, content))
        usage = {"prompt_tokens": len(text) // 4 + 1, "completion_tokens": len(content) // 4 + 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        if is_judge and body.get("logprobs") and self.logprobs_enabled:
            choice["logprobs"] = {"content": token_logprobs(content, schema_info.get("schema", {}))}
        return JSONResponse(
            {"id": f"chatcmpl-{h[:12]}", "object": "chat.completion", "created": 1_700_000_000,
             "model": body.get("model", "fake"), "choices": [choice], "usage": usage}
        )  # fmt: skip

    def _refusal(self, request: Request, body: dict[str, Any]) -> Response | bool:
        """Count the call; return the error answer it gets (bad key, script, 503, 429), else whether it is held."""
        if request.headers.get("authorization") == "Bearer bad-key":
            self.by_kind["401"] += 1
            return JSONResponse({"error": {"message": "Incorrect API key provided"}}, status_code=401)
        with self._lock:
            self.calls += 1
            held = self.hold_after is not None and self.calls > self.hold_after
            limited = self.rate_limit_first > 0
            if limited:
                self.rate_limit_first -= 1
            unavailable = not limited and self.unavailable_first > 0
            if unavailable:
                self.unavailable_first -= 1
            scripted = self.script.pop(0) if self.script and not (limited or unavailable) else None
        if scripted is not None:
            status, headers = scripted
            self.by_kind[str(status)] += 1
            return JSONResponse({"error": {"message": f"scripted {status}"}}, status_code=status, headers=headers)
        if unavailable:
            self.by_kind["503"] += 1
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        if limited:
            self.rate_limited_at.append(time.monotonic())
            self.by_kind["429"] += 1
            return JSONResponse(
                {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}},
                status_code=429,
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        return held

    @staticmethod
    def _user(body: dict[str, Any]) -> str:
        messages = body.get("messages", [])
        return str(messages[-1].get("content", "")) if messages else ""

    def _judge_content(self, body: dict[str, Any], h: str) -> str | Response:
        """The judge's answer to a request (or the error its markers ask for)."""
        user = self._user(body)
        if "[[judge-500]]" in user:
            return JSONResponse({"error": {"message": "judge exploded"}}, status_code=500)
        if "[[judge-notjson]]" in user or f"[[judge-notjson-seed={body.get('seed')}]]" in user:
            return "I think this output is quite good, 4 out of 5."
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema", {})
        return json.dumps(_answer_for_schema(schema, h, drop_first_int="[[judge-missing]]" in user))

    def _generator_content(self, body: dict[str, Any], h: str, text: str) -> str | Response:
        """The generator's answer to a request (or the error its markers ask for)."""
        user = self._user(body)
        if "[[gen-500]]" in user:
            return JSONResponse({"error": {"message": "generator exploded"}}, status_code=500)
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        if name == "support_draft":
            return "not a draft" if "[[draft-bad]]" in user else json.dumps(_support_draft(h, text))
        return f"Generated answer {h[:12]} for: {user[:60]}"

    def start(self, port: int = 0) -> FakeOpenAI:
        """Start serving on 127.0.0.1 (a free port unless given) in a background thread."""
        if port == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", backlog=2048, access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        server = self._server
        wait_for(lambda: server.started, timeout=10, what="the fake OpenAI server to start")
        return self

    def stop(self) -> None:
        """Stop the server and wait for its thread."""
        self.release()  # held calls end, so the server can shut down
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


def main() -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description=(__doc__ or "A fake OpenAI server").splitlines()[0])
    parser.add_argument("--port", type=int, default=8999)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    server = FakeOpenAI(delay=args.delay)
    config = uvicorn.Config(server.app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="off", backlog=2048)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
