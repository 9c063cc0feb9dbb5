"""Chat Completions through the official `openai` SDK: concurrency limit, retries, cache, usage and cost.

The SDK's own retries are switched off (max_retries=0) so that one place decides, with tenacity
and the shared policy of `webapp.core.retry_policy`: 429, 5xx, 408/409/425, timeouts and connection
errors are retried with exponential backoff and jitter, waiting what `Retry-After` asks when it
asks; a 429 also halves how many requests may be in flight (raised again one at a time as calls
succeed), so a rate-limited run slows down instead of failing.
"""

from __future__ import annotations

import asyncio
import email.utils
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

import httpx2
import openai
from openai.types.chat import ChatCompletion
from tenacity import AsyncRetrying, RetryCallState, RetryError, retry_if_exception_type, stop_after_attempt

from webapp.core.retry_policy import TransientError, asked_or, backoff, is_transient_status
from webapp.core.safe_input import load_yaml
from webapp.evaluator.cache import ResponseCache, cache_key
from webapp.evaluator.json_types import CachedAnswer, CacheRequest, ChatMessage, JsonObject

MAX_WAIT_S = 120.0


class LlmCallError(RuntimeError):
    """A call that failed for good (not retryable, or out of attempts)."""


class RateLimitedError(TransientError):
    """A 429: retried like any transient error, and the whole client slows down."""


class LlmConfigError(LlmCallError):
    """The endpoint refuses every call (bad key, no access, unknown model): stop the run, don't fail each sample."""


CONFIG_STATUS = frozenset({401, 403, 404})


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Return the USD cost of a call with these token counts."""
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1_000_000


def load_prices(path: Path) -> dict[str, Price]:
    """Read USD prices per million tokens per model from a YAML file; a missing file means no prices."""
    if not path.is_file():
        return {}
    raw = load_yaml(path.read_text(encoding="utf-8")) or {}
    models = raw.get("models", {}) if isinstance(raw, dict) else {}
    out: dict[str, Price] = {}
    for name, p in models.items():
        if not isinstance(p, dict) or "input" not in p or "output" not in p:
            raise ValueError(f"{path}: models.{name}: needs 'input' and 'output' (USD per million tokens)")
        out[str(name)] = Price(float(p["input"]), float(p["output"]))
    return out


@dataclass(frozen=True)
class TokenLogprob:
    """One token of an answer with its log-probability and the most likely alternatives at its place."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass
class Answer:
    """One model answer: its text, token usage, whether it came from the cache, and its tokens' log-probs when asked."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    logprobs: list[TokenLogprob] | None = None


@dataclass
class ClientStats:
    api_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    rate_limited: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    request_seconds: float = 0.0  # summed over requests: / wall time = mean requests in flight
    requests: int = 0  # calls asked for (from the cache or the API), not counting retries
    retries_waiting: int = 0  # calls sleeping before their next attempt, right now


def parse_retry_after(headers: httpx2.Headers | dict[str, str] | None) -> float | None:
    """Return the wait in seconds a Retry-After (or retry-after-ms) header asks for, or None."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Limiter:
    """An adjustable cap on requests in flight, served by priority, plus a shared 'nobody sends before' time.

    Judge calls go before new generations (priority 0 before 1), so cases finish one after another
    and their files stream out during the run instead of all at the end.
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.inflight = 0
        self.not_before = 0.0
        self.successes = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    async def acquire(self, priority: int = 1) -> None:
        if self.inflight < self.limit and not self._waiters:
            self.inflight += 1
        else:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiters, (priority, next(self._seq), fut))
            self._wake()  # a place may be free behind waiters that were cancelled
            try:
                await fut  # resolved by _wake with the place already counted as ours
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._give_back()
                raise
        try:
            # Everyone waits out a rate limit; holding the place while waiting changes nothing.
            while (delay := self.not_before - time.monotonic()) > 0:
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self._give_back()
            raise

    def _give_back(self) -> None:
        self.inflight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.inflight < self.limit:
            _, _, fut = heapq.heappop(self._waiters)
            if fut.cancelled():
                continue
            self.inflight += 1
            fut.set_result(None)

    def release(self, *, ok: bool) -> None:
        if ok:
            self.successes += 1
            if self.limit < self.maximum and self.successes >= self.limit:
                self.limit += 1
                self.successes = 0
        self._give_back()

    def rate_limited(self, wait: float) -> None:
        self.not_before = max(self.not_before, time.monotonic() + wait)
        self.limit = max(1, self.limit // 2)
        self.successes = 0


class ChatClient:
    """Async Chat Completions with the cache, the limiter and bounded retries."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        concurrency: int = 8,
        cache: ResponseCache | None = None,
        reuse_cache: bool = True,
        prices: dict[str, Price] | None = None,
        max_attempts: int = 6,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        timeout: float = 120.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", max_retries=0, timeout=timeout
        )
        self.cache = cache
        # Without reuse, answers are still written (a later --seed/--cache run can reuse them) but never read.
        self.reuse_cache = reuse_cache
        self.prices = prices or {}
        self.max_attempts = max_attempts
        self.backoff = backoff(base=backoff_base, cap=backoff_cap)
        self.sleep = sleep  # tests pass one that records the waits instead of sleeping
        self.limiter = _Limiter(maximum=max(1, concurrency))
        self.stats = ClientStats()
        self.refused: LlmConfigError | None = None  # once set, no further request is sent

    async def close(self) -> None:
        """Close the HTTP connections and wait for the cache's writes."""
        await self._client.close()
        if self.cache is not None:
            await asyncio.to_thread(self.cache.flush)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Return the USD cost of tokens on a model, or None when the model has no price."""
        price = self.prices.get(model)
        return price.cost(prompt_tokens, completion_tokens) if price else None

    def is_cached(self, **request: Unpack[CacheRequest]) -> bool:
        """Tell whether this request's answer would come from the cache."""
        return self.cache is not None and self.reuse_cache and cache_key(**request) in self.cache

    def cached_answer(self, top_logprobs: int | None = None, **request: Unpack[CacheRequest]) -> Answer | None:
        """Return the cached answer of a request (None when absent or when reuse is off).

        The cache key does not hold `top_logprobs` (asking for log-probs does not change the answer):
        a request asking for them takes a cached answer only when it was stored with them, or stored
        from an endpoint that gives none (`logprobs_absent`).
        """
        if self.cache is None or not self.reuse_cache:
            return None
        return self._cached(cache_key(**request), top_logprobs)

    def _cached(self, key: str, top_logprobs: int | None) -> Answer | None:
        if self.cache is None or not self.reuse_cache:
            return None
        hit = self.cache.get(key)
        if hit is None:
            return None
        logprobs = _logprobs_from_json(hit.get("logprobs"))
        if top_logprobs is not None and logprobs is None and not hit.get("logprobs_absent"):
            return None  # cached before log-probs were asked for: ask again (the answer is rewritten with them)
        self.cache.touch(key)
        tokens = (int(hit.get("prompt_tokens", 0)), int(hit.get("completion_tokens", 0)))
        return Answer(hit["content"], *tokens, True, logprobs=logprobs if top_logprobs is not None else None)

    def cache_report(self) -> str:
        """Say how this invocation used the cache: "reused N of M", "fresh" (not read) or "off" (--no-cache)."""
        if self.cache is None:
            return "off"
        if not self.reuse_cache:
            return "fresh"
        return f"reused {self.stats.cache_hits} of {self.stats.requests}"

    async def complete(
        self,
        *,
        model: str,
        messages: list[ChatMessage],
        temperature: float,
        seed: int | None,
        sample_index: int,
        response_format: JsonObject | None = None,
        priority: int = 1,
        repeat: int = 0,
        on_start: Callable[[], None] | None = None,
        top_logprobs: int | None = None,
    ) -> Answer:
        """Return the model's answer to the messages, from the cache or the API; raise LlmCallError.

        Lower `priority` numbers are sent first when calls queue for a place; `on_start` is called
        once, when the answer is found in the cache or the first attempt gets its place.
        `top_logprobs` (0-20) asks for the answer's token log-probabilities with that many
        alternatives per token (`logprobs: true`); the answer's `logprobs` is None when the endpoint
        gives none.
        """
        request: CacheRequest = {
            "model": model,
            "messages": messages,
            "temperature": temperature,
            "seed": seed,
            "sample_index": sample_index,
            "response_format": response_format,
        }
        if repeat:
            request["repeat"] = repeat
        self.stats.requests += 1
        key = cache_key(**request)  # once: the lookup and the store share it
        cached = self._cached(key, top_logprobs)
        if cached is not None:
            self.stats.cache_hits += 1
            if on_start is not None:
                on_start()
            return cached
        kwargs: dict[str, object] = {"model": model, "messages": messages, "temperature": temperature}
        if seed is not None:
            kwargs["seed"] = seed
        if response_format is not None:
            kwargs["response_format"] = response_format
        if top_logprobs is not None:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = top_logprobs
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=asked_or(self.backoff, most=MAX_WAIT_S),
            retry=retry_if_exception_type(TransientError),
            before_sleep=self._count_retry,
            sleep=self._sleep,
        )
        attempts = itertools.count(1)

        async def attempt() -> ChatCompletion:
            return await self._attempt(kwargs, model, priority, on_start if next(attempts) == 1 else None)

        try:
            resp = await retrying(attempt)
        except RetryError as exc:
            raise LlmCallError(f"{exc.last_attempt.exception()} (gave up after {self.max_attempts} attempts)") from None
        return self._accept(resp, model, key, logprobs=top_logprobs is not None)

    async def _attempt(
        self, kwargs: dict[str, object], model: str, priority: int, on_start: Callable[[], None] | None
    ) -> ChatCompletion:
        """Send one request with a place in the limiter; raise TransientError for what is worth another attempt."""
        await self.limiter.acquire(priority)
        if on_start is not None:
            on_start()
        if self.refused is not None:
            self.limiter.release(ok=False)
            raise LlmConfigError(str(self.refused))
        ok = False
        sent = time.perf_counter()
        try:
            self.stats.api_calls += 1
            # The SDK's generic POST (documented for endpoints it has no method for) skips the
            # recursive transform of typed params, which costs milliseconds of CPU per call
            # once a judge schema is in the request; the answer is still a typed ChatCompletion.
            resp = await self._client.post("/chat/completions", body=kwargs, cast_to=ChatCompletion)
            ok = True
            return resp
        except openai.APIStatusError as exc:
            status = exc.status_code
            error = f"HTTP {status}: {_short(exc.message)}"
            if status in CONFIG_STATUS:
                hint = "check OPENAI_API_KEY" if status in (401, 403) else f"check the model name {model!r} and --base-url"
                self.refused = LlmConfigError(f"{error} ({hint})")
                raise self.refused from exc
            if not is_transient_status(status):
                raise LlmCallError(error) from exc
            asked = parse_retry_after(exc.response.headers)
            if status == 429:
                self.stats.rate_limited += 1
                raise RateLimitedError(error, retry_after=asked) from exc
            raise TransientError(error, retry_after=asked) from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise TransientError(f"{type(exc).__name__}: {_short(str(exc))}") from exc
        finally:
            self.stats.request_seconds += time.perf_counter() - sent
            self.limiter.release(ok=ok)

    def _count_retry(self, state: RetryCallState) -> None:
        self.stats.retries += 1
        if state.outcome is not None and isinstance(state.outcome.exception(), RateLimitedError):
            # everyone waits out a rate limit, and fewer requests are sent at once afterwards
            self.limiter.rate_limited(state.upcoming_sleep)

    async def _sleep(self, seconds: float) -> None:
        self.stats.retries_waiting += 1
        try:
            await self.sleep(seconds)
        finally:
            self.stats.retries_waiting -= 1

    def _accept(self, resp: ChatCompletion, model: str, key: str, *, logprobs: bool = False) -> Answer:
        if not resp.choices:
            raise LlmCallError("the answer has no choices")
        content = resp.choices[0].message.content
        if content is None:
            refusal = getattr(resp.choices[0].message, "refusal", None)
            raise LlmCallError(f"the model refused: {refusal}" if refusal else "the answer has no content")
        usage = resp.usage
        pt = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        ct = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        self.stats.prompt_tokens += pt
        self.stats.completion_tokens += ct
        cost = self.cost(model, pt, ct)
        if cost is None:
            self.stats.cost_known = False
        else:
            self.stats.cost_usd += cost
        tokens = _token_logprobs(resp.choices[0]) if logprobs else None
        if self.cache is not None:
            entry: CachedAnswer = {"content": content, "prompt_tokens": pt, "completion_tokens": ct}
            if logprobs:
                entry["logprobs"] = None if tokens is None else [[t.token, t.logprob, [list(a) for a in t.top]] for t in tokens]
                entry["logprobs_absent"] = tokens is None
            self.cache.put(key, entry)
        return Answer(content, pt, ct, False, logprobs=tokens)


def _token_logprobs(choice: object) -> list[TokenLogprob] | None:
    """Return a choice's token log-probs (None when the endpoint gave none)."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return [
        TokenLogprob(t.token, float(t.logprob), tuple((a.token, float(a.logprob)) for a in (t.top_logprobs or ())))
        for t in content
    ]


def _logprobs_from_json(raw: object) -> list[TokenLogprob] | None:
    """Read the token log-probs a cache entry stores as [token, logprob, [[alt, logprob], ...]] lists."""
    if not isinstance(raw, list):
        return None
    out: list[TokenLogprob] = []
    for item in raw:
        token, logprob, top = item
        out.append(TokenLogprob(str(token), float(logprob), tuple((str(a), float(p)) for a, p in top)))
    return out


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
