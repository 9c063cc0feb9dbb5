"""The judge's answer: parsed as untrusted JSON, validated against the rubric's schema, turned into a verdict."""

from __future__ import annotations

import json
from typing import Any

from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from webapp.core.safe_input import loads_json
from webapp.evaluator.artifact_models import JudgeVerdict
from webapp.evaluator.rubric import Rubric, judge_schema

_VALIDATORS: dict[str, Validator] = {}


def _judge_validator(rubric: Rubric) -> Validator:
    # Checking the schema itself is costly; do it once per rubric file, not once per answer.
    validator = _VALIDATORS.get(rubric.hash)
    if validator is None:
        schema = judge_schema(rubric)
        cls = validator_for(schema)
        cls.check_schema(schema)
        validator = _VALIDATORS[rubric.hash] = cls(schema)
    return validator


def parse_judge(content: str, rubric: Rubric) -> dict[str, Any]:  # validated against the rubric's schema
    """Parse and validate the judge's answer against the rubric's schema; raise ValueError saying why not."""
    try:
        data = loads_json(content)  # a model's answer is untrusted input: depth-limited
    except json.JSONDecodeError as exc:
        raise ValueError(f"the judge's answer is not JSON ({exc.msg} at position {exc.pos})") from exc
    error = best_match(_judge_validator(rubric).iter_errors(data))
    if error is not None:
        where = "/".join(str(x) for x in error.absolute_path) or "(top level)"
        raise ValueError(f"the judge's answer does not fit the rubric schema at {where}: {error.message}")
    return data


def judge_verdict(content: str, rubric: Rubric) -> JudgeVerdict:
    """Return the verdict of one judge answer: its scores, flags and rationale, or judge_invalid_response and why."""
    try:
        data = parse_judge(content, rubric)
    except ValueError as exc:
        return JudgeVerdict(status="judge_invalid_response", error=str(exc))
    # The schema holds the types (integer scores, boolean flags): validating them into the verdict keeps them.
    return JudgeVerdict.model_validate(
        {
            "judge_scores": {m: data[m] for m in rubric.metric_names},
            "flags": {f: bool(data[f]) for f in rubric.judge_flag_names},
            "judge_rationale": data.get("rationale"),
        }
    )
