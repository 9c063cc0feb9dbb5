"""The answer cache: when answers are reused, where the cache lives, concurrent writers, `cache info|clear`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import platformdirs
import pytest
from typer.testing import CliRunner, Result

from tests.evaluator.conftest import Evaluate, Evaluated
from tests.evaluator.fake_openai import FakeOpenAI
from webapp.evaluator.artifacts import read_json
from webapp.evaluator.cache import ResponseCache, parse_age
from webapp.evaluator.cli import app

ROOT = Path(__file__).resolve().parents[2]


def words(result: Result) -> str:
    return " ".join(result.output.split())


def cache_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


class TestReuseRule:
    def test_without_seed_samples_are_fresh_but_written(
        self, evaluated: Evaluated, dataset: Path, fake: FakeOpenAI, tmp_path: Path, cache_dir: Path
    ) -> None:
        first, doc = evaluated("-n", "2", dataset=dataset, out=tmp_path / "a")
        assert fake.calls == 12
        assert "cache: fresh" in words(first)
        assert doc["cache"] == "fresh"
        assert len(cache_files(cache_dir)) == 12  # every answer is still stored
        _, doc = evaluated("-n", "2", dataset=dataset, out=tmp_path / "b")
        assert fake.calls == 24  # re-running for variance draws new samples
        assert doc["cache"] == "fresh"

    def test_cache_flag_reuses_without_seed(
        self, evaluated: Evaluated, dataset: Path, fake: FakeOpenAI, tmp_path: Path
    ) -> None:
        _, a = evaluated("-n", "2", dataset=dataset, out=tmp_path / "a")
        again, b = evaluated("-n", "2", "--cache", dataset=dataset, out=tmp_path / "b")
        assert fake.calls == 12
        assert "cache: reused 12 of 12" in words(again)
        assert b["cache"] == "reused 12 of 12"
        assert a["test_case_results"] == b["test_case_results"]

    def test_seed_reuses_and_counts_partial_hits(
        self, evaluated: Evaluated, dataset: Path, fake: FakeOpenAI, tmp_path: Path
    ) -> None:
        _, doc = evaluated("-n", "2", "--seed", "3", "--max-cases", "1", dataset=dataset, out=tmp_path / "a")
        assert doc["cache"] == "reused 0 of 4"
        again, b = evaluated("-n", "2", "--seed", "3", dataset=dataset, out=tmp_path / "b")
        assert fake.calls == 4 + 8
        assert "cache: reused 4 of 12" in words(again)
        assert b["cache"] == "reused 4 of 12"
        third, c = evaluated("-n", "2", "--seed", "3", dataset=dataset, out=tmp_path / "c")
        assert fake.calls == 12  # an unchanged rerun makes no call and gives the same results
        assert "12 from the cache, 0 API call(s)" in words(third)
        assert c["test_case_results"] == b["test_case_results"]
        assert read_json(tmp_path / "c" / "index.json")["runs"][0]["execution"]["api_calls"] == 0

    def test_no_cache_neither_reads_nor_writes(
        self, evaluated: Evaluated, dataset: Path, fake: FakeOpenAI, tmp_path: Path, cache_dir: Path
    ) -> None:
        _, doc = evaluated("-n", "1", "--seed", "1", "--no-cache", dataset=dataset, out=tmp_path / "a")
        assert cache_files(cache_dir) == []
        assert doc["cache"] == "off"
        evaluated("-n", "1", "--seed", "1", dataset=dataset, out=tmp_path / "b")
        evaluated("-n", "1", "--seed", "1", "--no-cache", dataset=dataset, out=tmp_path / "c")
        assert fake.calls == 18
        evaluated("-n", "1", "--seed", "1", "-t", "0.2", dataset=dataset, out=tmp_path / "d")
        assert fake.calls == 24  # another temperature is another request


class TestLocation:
    def test_default_is_the_user_cache_dir_shared_by_output_dirs(
        self, evaluated: Evaluated, dataset: Path, fake: FakeOpenAI, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.delenv("PROMPT_EVALUATOR_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        expected = Path(platformdirs.user_cache_dir("prompt-evaluator"))
        assert expected == tmp_path / "xdg" / "prompt-evaluator"
        evaluated("-n", "1", "--seed", "2", dataset=dataset, out=tmp_path / "one")
        assert len(cache_files(expected)) == 6
        assert not (tmp_path / "one" / ".cache").exists()
        evaluated("-n", "1", "--seed", "2", dataset=dataset, out=tmp_path / "two")
        assert fake.calls == 6  # another -o pays for nothing

    def test_flag_overrides_the_environment(
        self, evaluate: Evaluate, dataset: Path, tmp_path: Path, cache_dir: Path
    ) -> None:
        # PROMPT_EVALUATOR_CACHE_DIR (set for every test to `cache_dir`) is used when no flag is given:
        # see test_without_seed_samples_are_fresh_but_written
        flag = tmp_path / "flag-cache"
        assert evaluate("-n", "1", "--max-cases", "1", "--cache-dir", str(flag), dataset=dataset).exit_code == 0
        assert len(cache_files(flag)) == 2
        assert cache_files(cache_dir) == []


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from webapp.evaluator.cache import ResponseCache
    cache = ResponseCache(Path(sys.argv[1]))
    tag = sys.argv[2]
    for round_ in range(15):
        for i in range(40):
            key = f"{i:02d}" + "ab" * 31
            cache.put(key, {"content": tag * 2000, "prompt_tokens": i, "completion_tokens": round_})
            got = cache.get(key)
            assert got is not None and got["prompt_tokens"] == i and len(got["content"]) == 2000 * len(tag), got
    print("ok")
    """
)


class TestConcurrentWriters:
    def test_two_processes_writing_the_same_keys(self, tmp_path: Path) -> None:
        root = tmp_path / "shared"
        procs = [
            subprocess.Popen([sys.executable, "-c", WRITER, str(root), tag], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for tag in ("a", "b")
        ]
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            assert out.strip() == "ok"
        files = cache_files(root)
        assert len(files) == 40  # one file per key: no temporary or lock file left behind
        for f in files:
            assert f.suffix == ".json" and not f.name.startswith(".")
            data = json.loads(f.read_text(encoding="utf-8"))
            assert data["content"] in ("a" * 2000, "b" * 2000)

    def test_works_without_fcntl(self, tmp_path: Path) -> None:
        # Windows has no fcntl: the cache, the command and the run index must not need it.
        code = textwrap.dedent(
            f"""
            import sys
            sys.modules["fcntl"] = None
            from pathlib import Path
            from webapp.evaluator.cache import ResponseCache
            from webapp.evaluator import cli, execution
            from webapp.evaluator.artifacts import update_index
            from tests.evaluator.conftest import index_entry
            c = ResponseCache(Path(r"{tmp_path / 'c'}"))
            c.put("ab" * 32, {{"content": "x"}})
            assert c.get("ab" * 32) == {{"content": "x"}}
            update_index(Path(r"{tmp_path / 'runs'}"), index_entry("r1"))
            update_index(Path(r"{tmp_path / 'runs'}"), index_entry("r2"))
            print("ok")
            """
        )
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert [r["run_id"] for r in read_json(tmp_path / "runs" / "index.json")["runs"]] == ["r1", "r2"]
        assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["index.json"]


def cache_cmd(*args: str) -> Result:
    return CliRunner().invoke(app, ["cache", *args])


def put(root: Path, key: str, age_days: float, size: int = 10) -> Path:
    cache = ResponseCache(root)
    cache.put(key, {"content": "x" * size})
    cache.flush()  # written on the cache's background thread
    path = root / key[:2] / f"{key}.json"
    when = time.time() - age_days * 86400
    os.utime(path, (when, when))
    return path


class TestCacheCommand:
    def test_info_counts_entries_and_bytes(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        root = tmp_path / "c"
        paths = [put(root, f"{i:02x}" * 32, age_days=i) for i in range(3)]
        result = cache_cmd("info", "--cache-dir", str(root))
        assert result.exit_code == 0, result.output
        total = sum(p.stat().st_size for p in paths)
        text = words(result)
        assert str(root) in text
        assert "3 answer(s)" in text
        assert f"{total:,} bytes" in text
        monkeypatch.setenv("PROMPT_EVALUATOR_CACHE_DIR", str(tmp_path / "env"))
        put(tmp_path / "env", "cd" * 32, age_days=0)
        result = cache_cmd("info")  # without --cache-dir: the environment's folder
        assert result.exit_code == 0
        assert str(tmp_path / "env") in words(result) and "1 answer(s)" in words(result)

    def test_clear_older_than_keeps_recent_answers(self, tmp_path: Path) -> None:
        root = tmp_path / "c"
        old = put(root, "aa" * 32, age_days=45)
        older = put(root, "ab" * 32, age_days=31)
        recent = put(root, "bb" * 32, age_days=29)
        result = cache_cmd("clear", "--older-than", "30d", "--cache-dir", str(root))
        assert result.exit_code == 0, result.output
        assert "removed 2 answer(s)" in words(result)
        assert not old.exists() and not older.exists() and recent.exists()
        assert not (root / "aa").exists()  # emptied fan-out folders go too

    def test_clear_everything_and_leftover_temp_files(self, tmp_path: Path) -> None:
        root = tmp_path / "c"
        put(root, "aa" * 32, age_days=0)
        stray = root / "aa" / ".dead-writer.tmp"
        stray.write_text("{", encoding="utf-8")
        result = cache_cmd("clear", "--cache-dir", str(root))
        assert result.exit_code == 0
        assert "removed 1 answer(s)" in words(result)
        assert cache_files(root) == []

    @pytest.mark.parametrize("value", ["30", "abc", "-3d", "0d", "3y"])
    def test_bad_older_than_is_a_usage_error(self, tmp_path: Path, value: str) -> None:
        root = tmp_path / "c"
        keep = put(root, "aa" * 32, age_days=400)
        result = cache_cmd("clear", "--older-than", value, "--cache-dir", str(root))
        assert result.exit_code == 2
        assert "--older-than" in words(result)
        assert keep.exists()

    @pytest.mark.parametrize(("value", "seconds"), [("30d", 30 * 86400), ("12h", 12 * 3600), ("90m", 5400), ("2w", 14 * 86400)])
    def test_durations(self, value: str, seconds: int) -> None:
        assert parse_age(value) == seconds


class TestBackgroundWrites:
    """Answers are written on the cache's own thread, off the event loop (issue 41, item 6)."""

    def test_an_answer_is_served_at_once_and_on_disk_after_flush(self, tmp_path: Path) -> None:
        cache = ResponseCache(tmp_path)
        key = "ab" * 32
        cache.put(key, {"content": "hello", "prompt_tokens": 1, "completion_tokens": 2})
        assert key in cache and cache.get(key) == {"content": "hello", "prompt_tokens": 1, "completion_tokens": 2}
        cache.flush()
        stored = tmp_path / key[:2] / f"{key}.json"
        assert json.loads(stored.read_text(encoding="utf-8"))["content"] == "hello"
        assert ResponseCache(tmp_path).get(key) == {"content": "hello", "prompt_tokens": 1, "completion_tokens": 2}
