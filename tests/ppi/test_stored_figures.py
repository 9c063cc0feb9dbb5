"""Issue 42 item 2: a run's PPI figures are stored by the reactions and read by the pages, which never cross-fit.

With a jobs loop in the process (`loop_mode`: what `serve` does while its loop runs) a page reads the
stored figure; after a new final grade it shows the figure it has with "Updating" until the
reaction ran, and a gate is not signed meanwhile (409). The stored figures equal the ones computed
directly from the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NoReturn

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from tests.ppi.conftest import JUDGE, build_run
from tests.ppi.test_report import graded_run
from tests.reactions_support import run_pending_reactions
from webapp.core import figures
from webapp.core.db import stored_id
from webapp.core.facts import record_fact
from webapp.core.spec import EvalSpec
from webapp.grading.models import FinalGrade
from webapp.ppi import report as ppi_report
from webapp.ppi import stored_figures
from webapp.ppi.models import PpiDraw
from webapp.ppi.report import run_report
from webapp.ppi.sequence_path import sequence_paths
from webapp.ppi.service import draw_sample

Clients = Callable[..., TestClient]


@pytest.fixture
def loop_mode() -> Iterator[None]:
    """Reads as in `serve` with its jobs loop: they never compute a figure, the reactions do."""
    figures.set_refresh_on_read(False)
    yield
    figures.set_refresh_on_read(True)


def _no_cross_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way to compute the figures raise: what renders afterwards was read stored."""

    def boom(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("a page computed the PPI figures")

    monkeypatch.setattr(ppi_report, "figure_of", boom)
    monkeypatch.setattr(stored_figures, "run_report", boom)
    monkeypatch.setattr(stored_figures, "criterion_looks", boom)  # the sequence's paths: stored too


def test_pages_read_the_stored_figures_which_equal_the_direct_ones(
    session: Session, spec: EvalSpec, client_as: Clients, api_as: Clients, loop_mode: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = graded_run(session, n=120, budget=40)
    run_id = stored_id(run.id)
    done = run_pending_reactions(session.get_bind(), spec)  # type: ignore[arg-type]
    assert any(name == "ppi.figures_after_sample" for _, name in done.done)
    direct = run_report(session=session, spec=spec, run_id=run_id)
    read = stored_figures.run_figures(session=session, spec=spec, run_id=run_id)
    assert read.state == "current" and read.value == direct  # the JSON round trip keeps every figure exactly
    assert direct is not None and direct.figures["tone"].estimate is not None
    tone = direct.figures["tone"].estimate.estimate
    paths = stored_figures.run_sequence_paths(session=session, spec=spec, run_id=run_id)
    assert paths.state == "current" and paths.value == sequence_paths(session=session, spec=spec, run_id=run_id)
    assert paths.value and all(p.points for p in paths.value)
    _no_cross_fit(monkeypatch)
    page = client_as("lead").get(f"/ppi/runs/{run.name}")
    assert page.status_code == 200 and f"{tone:.2f}" in page.text and "figures-updating" not in page.text
    api = api_as("pm").get(f"/api/v1/ppi/runs/{run.name}")
    assert api.status_code == 200 and api.json()["figures_state"] == "current"
    assert next(f for f in api.json()["figures"] if f["key"] == "tone")["interval"]["estimate"] == pytest.approx(tone)
    gate = client_as("pm").get(f"/gates/pilot?run={run.name}")
    assert gate.status_code == 200 and "figures-updating" not in gate.text
    assert api_as("pm").get(f"/api/v1/gates/pilot?run={run.name}").json()["figures_state"] == "current"


def test_a_new_final_grade_marks_updating_until_the_reaction_ran(
    session: Session, spec: EvalSpec, client_as: Clients, api_as: Clients, loop_mode: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = graded_run(session, n=120, budget=40)
    run_id = stored_id(run.id)
    run_pending_reactions(session.get_bind(), spec)  # type: ignore[arg-type]
    before = stored_figures.run_figures(session=session, spec=spec, run_id=run_id).value
    assert before is not None
    paths_before = stored_figures.run_sequence_paths(session=session, spec=spec, run_id=run_id).value
    # a drawn draft's final grade changes (as a revision would) and its fact is recorded; no reaction yet
    drawn = session.exec(select(PpiDraw.draft_id).where(PpiDraw.run_id == run_id, col(PpiDraw.drawn).is_(True))).first()
    final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == drawn)).one()
    final.tone = 1.0 if final.tone != 1.0 else 5.0
    session.add(final)
    record_fact(session, "draft_finalised", draft_id=int(drawn or 0))
    session.commit()
    read = stored_figures.run_figures(session=session, spec=spec, run_id=run_id)
    assert read.state == "updating" and read.value == before  # the figure as it was, marked
    paths = stored_figures.run_sequence_paths(session=session, spec=spec, run_id=run_id)
    assert paths.state == "updating" and paths.value == paths_before
    with monkeypatch.context() as m:
        _no_cross_fit(m)
        page = client_as("lead").get(f"/ppi/runs/{run.name}")
        assert page.status_code == 200 and "Updating: grades or draws changed" in page.text
        assert api_as("pm").get(f"/api/v1/ppi/runs/{run.name}").json()["figures_state"] == "updating"
        pm = client_as("pm")
        gate = pm.get(f"/gates/pilot?run={run.name}")
        assert "Updating: grades or draws changed" in gate.text
        # a decision is not signed on figures still updating: 409 with the reason, nothing stored
        signed = pm.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
        assert signed.status_code == 409 and "figures are updating" in signed.text
        assert "You signed this gate on" not in pm.get(f"/gates/pilot?run={run.name}").text
    run_pending_reactions(session.get_bind(), spec)  # type: ignore[arg-type]
    after = stored_figures.run_figures(session=session, spec=spec, run_id=run_id)
    assert after.state == "current" and after.value == run_report(session=session, spec=spec, run_id=run_id)
    assert after.value != before
    paths = stored_figures.run_sequence_paths(session=session, spec=spec, run_id=run_id)
    assert paths.state == "current" and paths.value == sequence_paths(session=session, spec=spec, run_id=run_id) != paths_before
    assert "figures-updating" not in client_as("lead").get(f"/ppi/runs/{run.name}").text
    pm = client_as("pm")
    assert pm.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"}).status_code == 200


def test_a_new_sample_says_computing_until_its_figures_are_stored(
    session: Session, spec: EvalSpec, client_as: Clients, api_as: Clients, loop_mode: None
) -> None:
    run, _ = build_run(session, n=60, golden=0)
    draw_sample(session=session, run_id=stored_id(run.id), budget=20, judge_version=JUDGE, seed=3)
    session.commit()
    page = client_as("lead").get(f"/ppi/runs/{run.name}")
    assert page.status_code == 200 and "Computing… the figures" in page.text
    api = api_as("pm").get(f"/api/v1/ppi/runs/{run.name}")
    assert api.status_code == 503 and api.headers["Retry-After"] == "2" and api.json()["detail"].startswith("run:")
    gate = client_as("pm").get(f"/gates/pilot?run={run.name}")
    assert gate.status_code == 200 and "Computing… the human-grading figures" in gate.text
    run_pending_reactions(session.get_bind(), spec)  # type: ignore[arg-type]
    page = client_as("lead").get(f"/ppi/runs/{run.name}")
    assert "Computing…" not in page.text and "people grade the" in page.text
    assert api_as("pm").get(f"/api/v1/ppi/runs/{run.name}").status_code == 200


def test_without_a_jobs_loop_a_stale_figure_is_computed_on_read(session: Session, spec: EvalSpec) -> None:
    """`serve --no-background`, the CLI and the tests' apps have nobody to refresh a figure later: the read does."""
    run = graded_run(session, n=120, budget=40)
    run_id = stored_id(run.id)
    assert figures.refresh_on_read()
    read = stored_figures.run_figures(session=session, spec=spec, run_id=run_id)
    assert read.state == "current" and read.value == run_report(session=session, spec=spec, run_id=run_id)
    assert figures.stored(session, stored_figures.RUN_KIND, str(run_id)) is None  # a read stores nothing


def test_the_sweep_stores_what_changed_without_a_fact(session: Session, spec: EvalSpec) -> None:
    run = graded_run(session, n=120, budget=40)
    run_id = stored_id(run.id)
    assert stored_figures.refresh_stale(session=session, spec=spec) == [run_id]  # graded without facts: stale
    session.commit()
    assert stored_figures.refresh_stale(session=session, spec=spec) == []  # current now: nothing recomputed
    # a changed plan file makes it stale again
    other = spec.model_copy(update={"gates": spec.gates.model_copy(update={"human_grading": "intervals"})})
    assert stored_figures.refresh_stale(session=session, spec=other) == [run_id]
