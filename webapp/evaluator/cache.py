"""On-disk cache of model answers, keyed by everything that changes the answer."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from webapp.evaluator.artifacts import write_json_atomic


def cache_key(
    *,
    model: str,
    messages: list[dict[str, Any]],
    temperature: float,
    seed: int | None,
    sample_index: int,
    response_format: dict[str, Any] | None,
) -> str:
    """Return the sha256 of the request: model, messages, temperature, seed, sample index, response format.

    The sample index is part of the key so that the samples of one case stay independent draws
    rather than five copies of the first answer.
    """
    payload = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "seed": seed,
        "sample_index": sample_index,
        "response_format": response_format,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Answers stored one JSON file per key under a folder (two-level fan-out)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored answer ({content, usage, model}) or None."""
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None

    def put(self, key: str, answer: dict[str, Any]) -> None:
        """Store a successful answer (errors are never stored, so they are retried next time)."""
        # No fsync: a cache file lost in a crash only costs the call again (a torn one reads as a miss).
        write_json_atomic(self._path(key), answer, pretty=False, durable=False)

    def __contains__(self, key: str) -> bool:
        return self._path(key).is_file()
