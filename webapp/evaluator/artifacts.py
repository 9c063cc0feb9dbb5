"""Run artifacts on disk: atomic JSON writes, the per-run directory, the journal and runs/index.json.

What the files hold is defined by the models of `artifact_models`; this module only writes and
reads them (atomically, under a lock for the shared index).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from webapp.evaluator.artifact_models import ArtifactModel, IndexEntry, JournalEntry
from webapp.evaluator.json_types import JsonObject

MAIN_ARTIFACT = "dataset_evaluation.json"
JOURNAL = "samples.jsonl"
INDEX = "index.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def encode_json(data: object, *, pretty: bool = True) -> str:
    """Return the JSON text of an artifact (compact unless pretty; the indenting encoder is pure Python, slow)."""
    return json.dumps(data, ensure_ascii=False, indent=2 if pretty else None) + "\n"


def write_text_atomic(path: Path, text: str, *, durable: bool = True) -> None:
    """Write text to a temporary file in the same folder (fsync'd when durable), then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: object, *, pretty: bool = True, durable: bool = True) -> None:
    """Write JSON atomically: a killed process leaves the old file or the new one, never a torn one.

    `durable=False` skips the fsync, for files whose loss costs nothing but a repeated call (the cache).
    """
    # Encode before opening the file, so an unserialisable value leaves nothing behind.
    write_text_atomic(path, encode_json(data, pretty=pretty), durable=durable)


def write_artifact(path: Path, model: ArtifactModel, *, pretty: bool = True, durable: bool = True) -> None:
    """Write an artifact model as JSON atomically (see write_json_atomic)."""
    write_json_atomic(path, model.to_json_dict(), pretty=pretty, durable=durable)


_SLUG_MAX = 100
_HASH_LEN = 10


def case_file_name(case_id: str, *, force_hash: bool = False) -> str:
    """Return the per-case file name: `test_case_<id>.json`, or `test_case_<slug>~<hash>.json`.

    An id made only of `A-Za-z0-9._-` (at most 100 characters) keeps its plain name. Every other id
    gets its slug (each other character replaced by '_', cut at 100 characters) followed by '~' and
    the first 10 hex digits of the SHA-256 of the raw id (UTF-8): "a/b" and "a b" share the slug
    `a_b` but not the hash, and no plain name contains '~', so a hashed name never equals a plain
    one. The name depends on the id alone, so it is the same on every run and after --resume.
    `force_hash` gives the hashed form to a plain id too (see case_file_names).
    """
    slug = _UNSAFE.sub("_", case_id)[:_SLUG_MAX]
    if slug == case_id and not force_hash:
        return f"test_case_{case_id}.json"
    digest = hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:_HASH_LEN]
    return f"test_case_{slug}~{digest}.json"


def case_file_names(case_ids: Iterable[str]) -> dict[str, str]:
    """Return each id's file name, unique even on a case-insensitive file system.

    Plain ids that differ only in letter case ("Case-1", "case-1") would be one file on macOS or
    Windows: those (and only those) get the hashed form. Every other id keeps case_file_name's name.
    """
    ids = list(case_ids)
    folded: dict[str, int] = {}
    for case_id in ids:
        name = case_file_name(case_id).casefold()
        folded[name] = folded.get(name, 0) + 1
    return {
        case_id: case_file_name(case_id, force_hash=folded[case_file_name(case_id).casefold()] > 1) for case_id in ids
    }


def read_json(path: Path) -> Any:  # noqa: ANN401 - any JSON value: callers validate it into their model
    """Read a JSON file."""
    return json.loads(path.read_text(encoding="utf-8"))


class JournalError(ValueError):
    """A journal line that is JSON but not a finished sample; the message names FILE:LINE."""


class Journal:
    """Append-only record of finished samples, so a killed run can be resumed sample by sample."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8")

    def append(self, entry: JournalEntry) -> None:
        """Append one sample as a JSON line and flush it to the OS."""
        self._fh.write(json.dumps(entry.to_json_dict(), ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        self._fh.close()

    @staticmethod
    def read(path: Path) -> list[JournalEntry]:
        """Return the journal's entries; a torn line (the process was killed mid-write) is ignored."""
        if not path.exists():
            return []
        out: list[JournalEntry] = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            try:
                out.append(JournalEntry.model_validate(raw))
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
                raise JournalError(f"{path}:{number}: field '{loc}': {first['msg']}") from exc
        return out


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`: flock on POSIX, msvcrt on Windows, else an exclusive-create file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        fcntl = None
    if fcntl is not None:
        with open(path, "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        return
    if sys.platform == "win32":
        import msvcrt

        with open(path, "a+b") as lock:
            while True:
                try:
                    msvcrt.locking(lock.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after 10 s; keep waiting
                    continue
            try:
                yield
            finally:
                lock.seek(0)
                msvcrt.locking(lock.fileno(), msvcrt.LK_UNLCK, 1)
        return
    yield from _exclusive_file(path)


def _exclusive_file(path: Path, *, stale_after: float = 30.0) -> Iterator[None]:
    # Last resort: whoever creates the file holds the lock; it is removed on release, and one
    # left by a killed process is broken after `stale_after` seconds.
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            try:
                if time.time() - path.stat().st_mtime > stale_after:
                    path.unlink(missing_ok=True)
                    continue
            except FileNotFoundError:
                continue
            time.sleep(0.02)
    os.close(fd)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _index_runs(index_path: Path) -> list[JsonObject]:
    """Return the entries of an index file (none when it is missing, not JSON, or not an index)."""
    if not index_path.exists():
        return []
    try:
        data = read_json(index_path)
    except json.JSONDecodeError:
        return []
    runs = data.get("runs", []) if isinstance(data, dict) else []
    return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []


def update_index(output_dir: Path, entry: IndexEntry) -> None:
    """Insert or replace this run's entry in <output_dir>/index.json (one entry per run_id)."""
    index_path = output_dir / INDEX
    # A lock file, because two evaluations may finish at once in the same output folder.
    with _locked(output_dir / ".index.lock"):
        runs = [r for r in _index_runs(index_path) if r.get("run_id") != entry.run_id]
        runs.append(entry.to_json_dict())
        write_json_atomic(index_path, {"runs": runs})
