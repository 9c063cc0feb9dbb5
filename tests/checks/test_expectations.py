"""A case's expectations (confidence bounds, expected citations) as data: imported, validated, enforced by the checks."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session

from tests.factories import make_article, make_dataset, make_run, words
from webapp.checks import service as checks_service
from webapp.core.spec import EvalSpec
from webapp.datasets import service as datasets_service
from webapp.datasets.loader import DatasetError, SupportFieldError, expectation_fields


class TestFields:
    def test_read_as_typed_values(self) -> None:
        assert expectation_fields(
            {"expected_confidence_min": 0.6, "expected_confidence_max": 0.8, "expected_citations": ["KB-2011", "KB-2098"]}
        ) == {"expected_confidence_min": 0.6, "expected_confidence_max": 0.8, "expected_citations": ["KB-2011", "KB-2098"]}
        assert expectation_fields({"expected_confidence_above": 1}) == {"expected_confidence_above": 1.0}

    @pytest.mark.parametrize(
        ("metadata", "message"),
        [
            ({"expected_confidence_above": 1.2}, "expected_confidence_above: must be a number from 0 to 1, not 1.2"),
            ({"expected_confidence_min": "high"}, "expected_confidence_min: must be a number from 0 to 1, not 'high'"),
            ({"expected_confidence_max": True}, "expected_confidence_max: must be a number from 0 to 1, not True"),
            ({"expected_confidence_above": 0.8, "expected_confidence_min": 0.6}, "give one lower bound"),
            ({"expected_confidence_min": 0.8, "expected_confidence_max": 0.6}, "expected_confidence_max: 0.6 leaves no confidence"),
            ({"expected_confidence_above": 0.8, "expected_confidence_max": 0.8}, "expected_confidence_max: 0.8 leaves no confidence"),
            ({"expected_citations": "KB-1042"}, "expected_citations: must be a non-empty list of article ids"),
            ({"expected_citations": []}, "expected_citations: must be a non-empty list of article ids"),
        ],
    )
    def test_bad_values_name_the_field(self, metadata: dict[str, object], message: str) -> None:
        with pytest.raises(SupportFieldError, match=message.replace("(", r"\(").replace(")", r"\)")):
            expectation_fields(metadata)

    def test_a_bad_record_fails_the_import_with_file_line_and_writes_nothing(self, session: Session) -> None:
        lines = [{"id": "a", "input": "q"}, {"id": "b", "input": "q", "expected_confidence_min": 2}]
        data = "".join(json.dumps(x) + "\n" for x in lines).encode()
        with pytest.raises(DatasetError) as exc:
            datasets_service.import_dataset(session=session, data=data, path="eval.jsonl")
        assert exc.value.location == "eval.jsonl:2: test case 'b': expected_confidence_min: must be a number from 0 to 1, not 2"
        assert datasets_service.list_datasets(session=session) == []


class TestEnforcedOnARun:
    def test_a_failed_expectation_is_a_failed_check_with_its_message(self, session: Session, spec: EvalSpec) -> None:
        make_article(session, "KB-2011")
        make_article(session, "KB-2098")
        lines = [
            {"id": "golden-edge", "input": "Downgrade and exports?", "category": "edge", "intent": "plan_change", "golden": True,
             "expected_behavior": "draft", "expected_confidence_min": 0.6, "expected_confidence_max": 0.8,
             "expected_citations": ["KB-2011", "KB-2098"]},
        ]
        data = "".join(json.dumps(x) + "\n" for x in lines).encode()
        ds = datasets_service.import_dataset(session=session, data=data, path="golden.jsonl").dataset
        # Over-confident (0.92) and cites only the downgrade article: both expectations fail.
        run = make_run(session, ds, [{
            "case_id": "golden-edge", "draft_text": words(80), "citations": [{"article_id": "KB-2011", "revision": 1}],
            "confidence": 0.92, "intent": "plan_change",
        }])
        assert run.id is not None
        summary = checks_service.check_run(session=session, spec=spec, run_id=run.id).summary
        (outcome,) = summary.outcomes
        assert {r.key: r.reason for r in outcome.failures} == {
            "case_expectations": "case golden-edge expects confidence between 0.6 and 0.8 but the response has 0.92; "
            "expects citations of KB-2011 and KB-2098 but the draft does not cite KB-2098"
        }
        assert summary.golden_failures == [outcome]

    def test_cases_without_expectations_are_not_applicable(self, session: Session, spec: EvalSpec) -> None:
        make_article(session, "KB-1")
        ds = make_dataset(session, [{"case_id": "r1", "category": "routine", "intent": "billing_charge"}])
        run = make_run(session, ds, [{"case_id": "r1", "draft_text": words(60), "citations": [{"article_id": "KB-1", "revision": 1}],
                                      "confidence": 0.9, "intent": "billing_charge"}])
        assert run.id is not None
        (outcome,) = checks_service.check_run(session=session, spec=spec, run_id=run.id).summary.outcomes
        assert {r.key: r.status for r in outcome.results}["case_expectations"] == "not_applicable" and outcome.passed
