"""The JSON shapes the evaluator sends and stores, typed once (issue 36: no hand-built untyped dicts).

`JsonObject` is any JSON object (pydantic's recursive `JsonValue`): used where the value really is
free-form JSON (a rubric's JSON schema, the response_format sent to the API, a test case's
metadata). The shapes with known keys are TypedDicts: what a request is keyed by in the answer
cache, and what the cache holds.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from pydantic import JsonValue

JsonObject = dict[str, JsonValue]


# One Chat Completions message ({"role": ..., "content": ...}); a plain dict, as the PPI judge builds them too.
ChatMessage = dict[str, str]


class CacheRequest(TypedDict):
    """What identifies a request in the answer cache (webapp.evaluator.cache.cache_key)."""

    model: str
    messages: list[ChatMessage]
    temperature: float
    seed: int | None
    sample_index: int
    response_format: JsonObject | None
    repeat: NotRequired[int]


class CachedAnswer(TypedDict):
    """One cached answer file: the content and its token counts."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    # asked with log-probs (issue 35): [[token, logprob, [[alternative, logprob], ...]], ...], or None with
    # logprobs_absent true when the endpoint gave none
    logprobs: NotRequired[list[list[object]] | None]
    logprobs_absent: NotRequired[bool]
