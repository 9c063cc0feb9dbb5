"""JSON API of recorded prompt-evaluator runs (the same report as the run page, with the same blind rule)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.evaluator import service
from webapp.evaluator.pages import VIEW_ROLES
from webapp.evaluator.schemas import EvaluatorReportPublic
from webapp.web.deps import SpecDep, require_role

router = APIRouter(tags=["evaluator"])


def _metric(m: Any) -> dict[str, Any]:
    return {"mean": m.mean, "std": m.std, "min": m.min, "max": m.max, "count": m.count, "high_variance": m.high_variance}


def _flag(f: Any) -> dict[str, Any]:
    return {
        "true_count": f.true_count,
        "false_count": f.false_count,
        "total_count": f.total_count,
        "true_proportion": f.true_proportion,
    }


@router.get("/evaluator/runs/{run_id}", response_model=EvaluatorReportPublic)
def evaluator_run_json(
    run_id: str, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*VIEW_ROLES))
) -> dict[str, Any]:
    """Return a recorded run's statistics, variance warnings, judge scores and judge-human agreement."""
    try:
        r = service.evaluator_report(session=session, spec=spec, ref=run_id, principal=principal)
    except service.EvaluatorRunNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return {
        "run": {"id": r.run.id, "name": r.run.name, "artifact_run_id": r.ev.artifact_run_id, "status": r.ev.status},
        "rubric": {"name": r.ev.rubric_name, "hash": r.ev.rubric_hash, "metrics": r.metric_names, "flags": r.flag_names},
        "dataset_hash": r.ev.dataset_hash,
        "generator_model": r.ev.generator_model,
        "judge_model": r.ev.judge_model,
        "num_samples": r.ev.num_samples,
        "hidden_drafts": r.hidden_drafts,
        "overall_metric_stats": r.ev.overall_metric_stats if r.overall_visible else None,
        "overall_flag_stats": r.ev.overall_flag_stats if r.overall_visible else None,
        "cases": [
            {
                "test_case_id": c.case_id,
                "status": c.status,
                "visible": c.visible,
                "per_metric_stats": {k: _metric(m) for k, m in c.metrics.items()} if c.visible else None,
                "per_flag_stats": {k: _flag(f) for k, f in c.flags.items()} if c.visible else None,
            }
            for c in r.cases
        ],
        "variance_warnings": [{"test_case_id": cid, "metric": m.metric, **_metric(m)} for cid, m in r.warnings],
        "judge_scores": [
            {
                "draft_id": j.draft_id,
                "test_case_id": j.case_id,
                "sample_index": j.sample_index,
                "status": j.status,
                "visible": j.visible,
                "scores": j.scores if j.visible else None,
                "flags": j.flags if j.visible else None,
                "rationale": j.rationale if j.visible else None,
                "error": j.error if j.visible else None,
            }
            for j in r.judge_rows
        ],
        "agreement": [asdict(a) for a in r.agreement],
        "judge_repeats": r.ev.judge_repeats,
        "judge_self_agreement": [asdict(a) for a in r.self_agreement],
        "graded_drafts": r.graded,
    }
