"""Smaller pieces: rubric files, judge answers, Retry-After, cache keys, atomic writes, judge-human agreement."""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import hashlib
import json
from collections import namedtuple
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.evaluator.conftest import index_entry
from webapp.core.spec import EvalSpec
from webapp.evaluator.artifact_models import JournalEntry, Sample, SampleTokens
from webapp.evaluator.artifacts import (
    Journal,
    JournalError,
    case_file_name,
    case_file_names,
    update_index,
    write_json_atomic,
)
from webapp.evaluator.cache import cache_key
from webapp.evaluator.client import _Limiter, load_prices, parse_retry_after
from webapp.evaluator.judge_validation import parse_judge
from webapp.evaluator.preparation import EvaluationError, prepare_resume
from webapp.evaluator.report import judge_human_agreement
from webapp.evaluator.rubric import RubricError, builtin_names, judge_schema, load_rubric


def hashed(slug: str, case_id: str) -> str:
    """A case file name that carries the first 10 hex digits of the id's SHA-256 after its slug."""
    return f"test_case_{slug}~{hashlib.sha256(case_id.encode()).hexdigest()[:10]}.json"


class TestRubric:
    def test_builtins(self) -> None:
        assert builtin_names() == ["default", "support-draft"]
        default = load_rubric("default")
        assert default.metric_names == ["semantic_fidelity", "clarity"]
        assert default.flag_names == ["omitted_constraints"]
        assert default.builtin is True

    def test_hash_is_sha256_of_the_file(self, tmp_path: Path) -> None:
        path = tmp_path / "r.yaml"
        text = "name: mine\nmetrics:\n  - name: accuracy\n    scale: {min: 0, max: 10}\n    description: How accurate.\n"
        path.write_text(text, encoding="utf-8")
        rubric = load_rubric(str(path))
        assert rubric.hash == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        assert rubric.builtin is False
        assert judge_schema(rubric)["properties"]["accuracy"]["maximum"] == 10

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ("name: r\nmetrics: []\n", "field 'metrics'"),
            ("name: r\nmetrics:\n  - {name: Bad Name, scale: {min: 1, max: 5}, description: d}\n", "field 'metrics.0.name'"),
            ("name: r\nmetrics:\n  - {name: a, scale: {min: 1, max: 5}, description: d}\nflags:\n  - {name: a, description: d}\n", "repeated: a"),
            ("- not a mapping\n", "must be a mapping"),
            ("name: r\nmetrics: [\n", "not valid YAML"),
        ],
    )
    def test_bad_rubric_files(self, tmp_path: Path, body: str, message: str) -> None:
        path = tmp_path / "bad.yaml"
        path.write_text(body, encoding="utf-8")
        with pytest.raises(RubricError, match=message) as info:
            load_rubric(str(path))
        assert str(path) in str(info.value)

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(RubricError, match="cannot read rubric file"):
            load_rubric(str(tmp_path / "nope.yaml"))


class TestParseJudge:
    rubric = load_rubric("default")

    def test_valid(self) -> None:
        answer = {"semantic_fidelity": 5, "clarity": 3, "omitted_constraints": False, "rationale": "ok"}
        assert parse_judge(json.dumps(answer), self.rubric) == answer

    @pytest.mark.parametrize(
        ("answer", "message"),
        [
            ("Looks great: 5/5", "not JSON"),
            ('{"clarity": 3, "omitted_constraints": false, "rationale": "x"}', "'semantic_fidelity' is a required property"),
            ('{"semantic_fidelity": 6, "clarity": 3, "omitted_constraints": false, "rationale": "x"}', "semantic_fidelity"),
            ('{"semantic_fidelity": 4.5, "clarity": 3, "omitted_constraints": false, "rationale": "x"}', "not of type 'integer'"),
            ('{"semantic_fidelity": 4, "clarity": 3, "omitted_constraints": "no", "rationale": "x"}', "not of type 'boolean'"),
            ('{"semantic_fidelity": 4, "clarity": 3, "omitted_constraints": false, "rationale": "x", "extra": 1}', "Additional properties"),
        ],
    )
    def test_invalid(self, answer: str, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            parse_judge(answer, self.rubric)


class TestRetryAfter:
    def test_seconds_and_milliseconds(self) -> None:
        assert parse_retry_after({"retry-after": "7"}) == 7.0
        assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
        assert parse_retry_after({}) is None
        assert parse_retry_after({"retry-after": "soon"}) is None

    def test_http_date(self) -> None:
        when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
        wait = parse_retry_after({"retry-after": email.utils.format_datetime(when, usegmt=True)})
        assert wait is not None and 28 <= wait <= 30


class TestCacheKey:
    base = {
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7, "seed": 1,
        "sample_index": 0, "response_format": None,
    }  # fmt: skip

    @pytest.mark.parametrize(
        "change",
        [
            {"model": "m2"},
            {"messages": [{"role": "user", "content": "hi!"}]},
            {"temperature": 0.2},
            {"seed": 2},
            {"sample_index": 1},
            {"response_format": {"type": "json_object"}},
        ],
    )
    def test_everything_that_changes_the_answer_changes_the_key(self, change: dict) -> None:
        assert cache_key(**{**self.base, **change}) != cache_key(**self.base)

    def test_same_request_same_key(self) -> None:
        assert cache_key(**self.base) == cache_key(**dict(self.base))


class TestArtifacts:
    def test_atomic_write_leaves_no_temp_file(self, tmp_path: Path) -> None:
        write_json_atomic(tmp_path / "a" / "x.json", {"k": 1})
        assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"k": 1}
        assert [p.name for p in (tmp_path / "a").iterdir()] == ["x.json"]

    def test_failed_write_keeps_the_old_file(self, tmp_path: Path) -> None:
        path = tmp_path / "x.json"
        write_json_atomic(path, {"v": 1})
        with pytest.raises(TypeError):
            write_json_atomic(path, {"v": object()})
        assert json.loads(path.read_text()) == {"v": 1}
        assert [p.name for p in tmp_path.iterdir()] == ["x.json"]

    @pytest.mark.parametrize(
        ("case_id", "name"),
        [
            ("test-001", "test_case_test-001.json"),  # plain ids keep their plain name
            ("Case_2.v1", "test_case_Case_2.v1.json"),
            ("a_b", "test_case_a_b.json"),
            ("a/b", hashed("a_b", "a/b")),
            ("a/b c", hashed("a_b_c", "a/b c")),
            ("x" * 300, hashed("x" * 100, "x" * 300)),  # long ids are cut to 100 characters
            ("café", hashed("caf_", "café")),
        ],
    )
    def test_case_file_name_is_safe(self, case_id: str, name: str) -> None:
        assert case_file_name(case_id) == name
        assert len(name.encode()) < 255

    def test_ids_with_the_same_slug_get_different_names(self) -> None:
        # "a/b" and "a b" both slug to "a_b" (the old names were both test_case_a_b.json); "a_b" is plain.
        assert len({case_file_name(i) for i in ("a/b", "a b", "a_b", "a:b")}) == 4

    def test_ids_differing_only_in_case_get_hashed_names(self) -> None:
        names = case_file_names(["Case-1", "case-1", "other"])
        assert names["other"] == "test_case_other.json"
        assert names["Case-1"] == hashed("Case-1", "Case-1")
        assert len({n.casefold() for n in names.values()}) == 3

    def test_journal_ignores_a_torn_last_line(self, tmp_path: Path) -> None:
        j = Journal(tmp_path / "s.jsonl")
        j.append(JournalEntry(case_id="a", sample=Sample(sample_index=0)))
        j.close()
        with open(tmp_path / "s.jsonl", "a") as fh:
            fh.write('{"case_id": "b", "sam')
        assert Journal.read(tmp_path / "s.jsonl") == [JournalEntry(case_id="a", sample=Sample(sample_index=0))]

    def test_journal_line_of_the_wrong_shape_is_named(self, tmp_path: Path) -> None:
        path = tmp_path / "s.jsonl"
        path.write_text('{"case_id": "a", "sample": {"sample_index": 0}}\n{"case_id": "b", "sample": {"sample_index": "x"}}\n')
        with pytest.raises(JournalError, match=r"s\.jsonl:2: field 'sample\.sample_index'"):
            Journal.read(path)

    def test_artifact_models_refuse_what_the_guide_does_not_allow(self) -> None:
        sample = Sample(sample_index=0)
        with pytest.raises(ValidationError):
            sample.status = "done"  # type: ignore[assignment]  # not a status of the guide: refused on assignment
        with pytest.raises(ValidationError):
            Sample(sample_index=0, unknown_key=1)  # type: ignore[call-arg]
        # optional keys appear only once set, in the order older versions wrote them
        assert list(sample.to_json_dict())[-2:] == ["tokens", "cost_usd"]
        sample.judge_raw = "x"
        assert list(sample.to_json_dict())[-1] == "judge_raw"
        assert SampleTokens(generator=None).to_json_dict() == {"generator": None}
        assert SampleTokens(generator=None, judge=None).to_json_dict() == {"generator": None, "judge": None}
        # scores keep the number type of the judge's JSON
        assert Sample(sample_index=0, judge_scores={"a": 4, "b": 4.5}).to_json_dict()["judge_scores"] == {"a": 4, "b": 4.5}
        assert json.dumps(Sample(sample_index=0, judge_scores={"a": 4}).to_json_dict()["judge_scores"]) == '{"a": 4}'

    def test_index_replaces_the_entry_of_the_same_run(self, tmp_path: Path) -> None:
        update_index(tmp_path, index_entry("r1", "aborted"))
        update_index(tmp_path, index_entry("r2", "completed"))
        update_index(tmp_path, index_entry("r1", "completed"))
        runs = json.loads((tmp_path / "index.json").read_text())["runs"]
        assert [(r["run_id"], r["status"]) for r in runs] == [("r2", "completed"), ("r1", "completed")]


def test_prices_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("models:\n  a: {input: 1.0, output: 2.0}\n", encoding="utf-8")
    price = load_prices(path)["a"]
    # 1,000 input tokens at $1/M plus 500 output tokens at $2/M = 0.001 + 0.001
    assert price.cost(1000, 500) == pytest.approx(0.002)
    assert load_prices(tmp_path / "missing.yaml") == {}
    path.write_text("models:\n  a: {input: 1.0}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="models.a"):
        load_prices(path)


def test_shipped_prices_load() -> None:
    prices = load_prices(Path(__file__).resolve().parents[2] / "data" / "model_prices.yaml")
    assert "gpt-4o-mini" in prices


Human = namedtuple("Human", "factual_accuracy citation_relevance tone completeness")  # a final human grade


def test_judge_human_agreement_by_hand(spec: EvalSpec) -> None:
    metrics = [m.model_dump() for m in load_rubric("support-draft").spec.metrics]
    pairs = [
        ({"factual_accuracy": 1, "citation_relevance": 5, "tone": 3, "completeness": 2}, Human("pass", 4.0, 2.5, 2.0)),
        ({"factual_accuracy": 0, "citation_relevance": 2, "tone": 4, "completeness": 5}, Human("pass", 4.5, 4.0, 3.0)),
    ]
    out = {a.key: a for a in judge_human_agreement(pairs, list(spec.rubric.criteria), metrics)}
    fa = out["factual_accuracy"]
    # judge pass/fail vs human pass/pass: one of two agree
    assert (fa.n, fa.agreement, fa.judge_mean, fa.human_mean) == (2, 0.5, 0.5, 1.0)
    cr = out["citation_relevance"]
    # |5-4| = 1, |2-4.5| = 2.5 -> mean 1.75, one within 1; sides of 3: (5, 4) same, (2, 4.5) differ
    assert (cr.mean_abs_diff, cr.within_one, cr.agreement, cr.judge_mean, cr.human_mean) == (1.75, 0.5, 0.5, 3.5, 4.25)
    tone = out["tone"]
    # |3-2.5| = 0.5, |4-4| = 0 -> 0.25; both within 1; sides: (3 pass, 2.5 fail) differ, (4, 4) same
    assert (tone.mean_abs_diff, tone.within_one, tone.agreement) == (0.25, 1.0, 0.5)
    comp = out["completeness"]
    # |2-2| = 0, |5-3| = 2 -> 1.0; one within 1; sides: (2, 2) both fail, (5, 3) both pass
    assert (comp.mean_abs_diff, comp.within_one, comp.agreement) == (1.0, 0.5, 1.0)


def test_agreement_skips_criteria_the_rubric_lacks(spec: EvalSpec) -> None:
    metrics = [m.model_dump() for m in load_rubric("default").spec.metrics]
    pairs = [({"semantic_fidelity": 4, "clarity": 4}, Human("pass", 4, 4, 4))]
    assert judge_human_agreement(pairs, list(spec.rubric.criteria), metrics) == []


def test_limiter_serves_judge_calls_before_new_generations() -> None:
    async def scenario() -> list[str]:
        limiter = _Limiter(maximum=1)
        order: list[str] = []
        await limiter.acquire(1)  # the one place is taken

        async def waiter(name: str, priority: int) -> None:
            await limiter.acquire(priority)
            order.append(name)
            limiter.release(ok=True)

        tasks = [asyncio.create_task(waiter("gen-a", 1)), asyncio.create_task(waiter("gen-b", 1))]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(waiter("judge", 0)))
        await asyncio.sleep(0)
        limiter.release(ok=True)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["judge", "gen-a", "gen-b"]


def test_limiter_halves_on_rate_limit_and_grows_back() -> None:
    limiter = _Limiter(maximum=8)
    limiter.rate_limited(0.0)
    assert limiter.limit == 4
    limiter.rate_limited(0.0)
    assert limiter.limit == 2
    for _ in range(2):  # as many successes as the limit: one more place
        limiter.inflight += 1
        limiter.release(ok=True)
    assert limiter.limit == 3


def test_limiter_skips_cancelled_waiters() -> None:
    async def scenario() -> int:
        limiter = _Limiter(maximum=1)
        await limiter.acquire()
        stale = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0)
        stale.cancel()
        await asyncio.gather(stale, return_exceptions=True)
        limiter.release(ok=True)  # the only waiter was cancelled: the place is free again
        await asyncio.wait_for(limiter.acquire(), timeout=1)
        return limiter.inflight

    assert asyncio.run(scenario()) == 1


def test_resume_names_the_field_of_a_damaged_artifact(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "dataset_evaluation.json").write_text(json.dumps({"run_id": "r1", "status": "stopped"}), encoding="utf-8")
    with pytest.raises(EvaluationError, match=r"dataset_evaluation\.json: field 'dataset_path': Field required"):
        prepare_resume("r1", output_dir=tmp_path / "runs")
