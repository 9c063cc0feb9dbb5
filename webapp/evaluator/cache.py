"""On-disk cache of model answers, keyed by everything that changes the answer.

It lives in the user's cache directory (platformdirs), so evaluations with different output
folders share it. Writers never lock: each answer is written to a temporary file in the same
folder and renamed over its name (os.replace), so two runs writing at once, on any OS, leave
one complete answer per key and no lock file behind.

The writes run on one background thread (issue 41, item 6): written on the event loop, each
answer's mkdir, temporary file and rename held the loop for about 2 ms a call, which at
concurrency 32 put the evaluator 20% behind a bare AsyncOpenAI loop. An answer waiting to be
written is served from memory; `flush()` (the client's close, and interpreter exit) waits for
them all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from webapp.evaluator.json_types import CachedAnswer, CacheRequest, ChatMessage, JsonObject

ENV_CACHE_DIR = "PROMPT_EVALUATOR_CACHE_DIR"
APP_NAME = "prompt-evaluator"
_AGE_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE_RE = re.compile(r"(\d+)([mhdw])")
_REPLACE_ATTEMPTS = 5


def default_cache_dir(explicit: Path | None = None) -> Path:
    """Return the cache folder: --cache-dir, else $PROMPT_EVALUATOR_CACHE_DIR, else the user's cache dir."""
    if explicit is not None:
        return explicit
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir(APP_NAME))


def parse_age(text: str) -> int:
    """Return the seconds of an age like 30d, 12h, 90m or 2w; raise ValueError."""
    m = _AGE_RE.fullmatch(text.strip())
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"{text!r} is not an age like 30d, 12h, 90m or 2w")
    return int(m.group(1)) * _AGE_UNITS[m.group(2)]


def cache_key(
    *,
    model: str,
    messages: list[ChatMessage],
    temperature: float,
    seed: int | None,
    sample_index: int,
    response_format: JsonObject | None,
    repeat: int = 0,
) -> str:
    """Return the sha256 of the request: model, messages, temperature, seed, sample index, response format.

    The sample index is part of the key so that the samples of one case stay independent draws
    rather than five copies of the first answer; so is the judge's repeat number (when not 0).
    """
    payload: CacheRequest = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "seed": seed,
        "sample_index": sample_index,
        "response_format": response_format,
    }
    if repeat:
        payload["repeat"] = repeat  # absent for the first judgement, so older cache entries stay valid
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class CacheInfo:
    """What `prompt-evaluator cache info` reports."""

    root: Path
    entries: int
    size_bytes: int
    oldest: float | None
    newest: float | None


class ResponseCache:
    """Answers stored one JSON file per key under a folder (two-level fan-out)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._pending: dict[str, CachedAnswer] = {}  # put, not yet on disk
        self._lock = threading.Lock()
        self._writer: ThreadPoolExecutor | None = None
        self._dirs: set[Path] = set()  # fan-out folders known to exist

    def flush(self) -> None:
        """Wait until every answer put so far is on disk."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedAnswer | None:
        """Return the stored answer ({content, usage, model}) or None."""
        with self._lock:
            pending = self._pending.get(key)
        if pending is not None:
            return pending
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # missing, being replaced on Windows, or torn: a miss
            return None

    def put(self, key: str, answer: CachedAnswer) -> None:
        """Store a successful answer (errors are never stored, so they are retried next time).

        Best effort: a cache that cannot be written costs the call again, it never fails the run.
        Written on the background thread; served from memory until then.
        """
        with self._lock:
            self._pending[key] = answer
            if self._writer is None:
                self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-writer")
            writer = self._writer
        writer.submit(self._write, key, answer)

    def _write(self, key: str, answer: CachedAnswer) -> None:
        try:
            self._write_file(key, answer)
        finally:
            with self._lock:
                if self._pending.get(key) is answer:
                    del self._pending[key]

    def _write_file(self, key: str, answer: CachedAnswer) -> None:
        path = self._path(key)
        text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
        try:
            if path.parent not in self._dirs:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._dirs.add(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
        except OSError:
            return
        try:
            # No fsync: a cache file lost in a crash only costs the call again.
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            for attempt in range(_REPLACE_ATTEMPTS):
                try:
                    os.replace(tmp, path)
                    return
                except PermissionError:  # Windows: a reader has the target open; it closes at once
                    time.sleep(0.01 * (attempt + 1))
        except OSError:
            pass
        Path(tmp).unlink(missing_ok=True)

    def touch(self, key: str) -> None:
        """Mark an answer as used now, so `cache clear --older-than` keeps what is still reused."""
        with contextlib.suppress(OSError):
            os.utime(self._path(key))

    def __contains__(self, key: str) -> bool:
        with self._lock:
            if key in self._pending:
                return True
        return self._path(key).is_file()

    def _entries(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.glob("??/*.json") if not p.name.startswith(".")]

    def info(self) -> CacheInfo:
        """Count the stored answers and their bytes, with the oldest and newest last use."""
        entries = self._entries()
        stats = [p.stat() for p in entries]
        mtimes = [s.st_mtime for s in stats]
        return CacheInfo(
            self.root, len(entries), sum(s.st_size for s in stats), min(mtimes, default=None), max(mtimes, default=None)
        )

    def clear(self, *, older_than: float | None = None) -> int:
        """Remove answers last used more than `older_than` seconds ago (all without it); return how many.

        Temporary files older than a minute (left by a killed writer) go too, and so do emptied folders.
        """
        now = time.time()
        removed = 0
        for path in self._entries():
            try:
                if older_than is None or now - path.stat().st_mtime > older_than:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
        if self.root.is_dir():
            for tmp in self.root.glob("??/.*.tmp"):
                try:
                    if older_than is None or now - tmp.stat().st_mtime > 60:
                        tmp.unlink()
                except FileNotFoundError:
                    continue
            for folder in self.root.iterdir():
                if folder.is_dir() and len(folder.name) == 2:
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # only succeeds when empty
        return removed
