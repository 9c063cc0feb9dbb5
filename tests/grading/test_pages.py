"""Grading pages: queues, the grading form without JavaScript, blind pages, adjudication, agreement, references."""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
import re
from collections.abc import Callable
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlmodel import Session, select
from typer.testing import CliRunner

from tests.factories import make_dataset, make_run, make_user
from tests.grading.conftest import (
    DRAFT_TEXT,
    FORM,
    GradingWorld,
    disagree,
    grade,
    grade_pair,
    post_form,
    principal_of,
)
from webapp.app import cli as root
from webapp.auth.models import ROLES, User
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.demo.context import DemoContext
from webapp.grading import cli as grading_cli
from webapp.grading import demo, pages, routes
from webapp.grading.adjudication import list_adjudications, return_grade
from webapp.grading.home import home_cards
from webapp.grading.models import Grade, ReferenceVersion
from webapp.grading.references import save_reference
from webapp.grading.status import final_grades, grading_status
from webapp.runs.models import Draft
from webapp.web.deps import RoleCheck


@pytest.fixture
def lead(world: GradingWorld, client_as: Callable[..., TestClient]) -> TestClient:
    return client_as("lead", email="lead@example.test")


def page(client_as: Callable[..., TestClient], who: str, url: str) -> str:
    return client_as("labeler", email=f"{who}@example.test").get(url).text


class TestGradingPage:
    def test_page_shows_context_and_shortcuts_and_an_error_keeps_what_was_typed(
        self, session: Session, world: GradingWorld, client_as: Callable[..., TestClient]
    ) -> None:
        w, c = world, client_as("labeler", email="alice@example.test")
        text = "Use the <b>sign-in</b> page."
        save_reference(session=session, case_pk=w.drafts[0].case_pk, author_id=w.bob.id, text=text)
        session.commit()
        html = c.get(f"/grading/drafts/{w.drafts[0].id}").text
        assert DRAFT_TEXT in html and "KB-1 revision 1" in html and "deprecated" in html
        assert "Use the &lt;b&gt;sign-in&lt;/b&gt; page." in html  # escaped user text
        assert "<kbd>Ctrl</kbd>+<kbd>Enter</kbd>" in html and 'data-key="q"' in html
        assert "Cited article directly answers the question." in html  # the spec's guidance
        typed = {**FORM, "factual_accuracy": "fail", "rationale": "my long <thoughts>"}
        r = post_form(c, f"/grading/drafts/{w.drafts[0].id}", typed)
        assert r.status_code == 422
        assert "Unsupported claim: a factual" in r.text and "unsupported_claim:" not in r.text
        assert "my long &lt;thoughts&gt;" in r.text
        assert re.search(r'value="fail"\s+checked', r.text)

    def test_a_filter_with_url_characters_survives_save_and_next(
        self, session: Session, world: GradingWorld, client_as: Callable[..., TestClient]
    ) -> None:
        # issue 36: the filter was joined raw into the URL, so an intent with & # + % broke save-and-next
        w, c = world, client_as("labeler", email="alice@example.test")
        odd = "billing & refunds #2 +50%"
        for case in session.exec(select(EvalCase)).all():
            case.intent = odd
            session.add(case)
        session.commit()
        r = post_form(c, f"/grading/runs/{w.run.id}/next", {"intent": odd})
        first = urlsplit(r.headers["location"])
        assert first.path == f"/grading/drafts/{w.drafts[0].id}" and parse_qs(first.query) == {"intent": [odd]}
        r = post_form(c, r.headers["location"], {**FORM, "next": "1", "intent": odd})
        nxt = urlsplit(r.headers["location"])
        assert r.status_code == 303 and nxt.path == f"/grading/drafts/{w.drafts[1].id}"
        assert parse_qs(nxt.query) == {"intent": [odd]}

    def test_form_post_saves_opens_next_and_a_revision_shows_in_history(
        self, session: Session, world: GradingWorld, client_as: Callable[..., TestClient]
    ) -> None:
        w, c = world, client_as("labeler", email="alice@example.test")
        url = f"/grading/drafts/{w.drafts[0].id}"
        assert post_form(c, f"/grading/runs/{w.run.id}/next", {}).headers["location"] == url
        r = post_form(c, url, {**FORM, "next": "1"})
        assert r.status_code == 303 and r.headers["location"] == f"/grading/drafts/{w.drafts[1].id}"
        # The message rides in the signed cookie, shown once on the next item.
        nxt = c.get(r.headers["location"]).text
        assert f"Grade saved (draft {w.drafts[0].id}). Next item." in nxt
        assert "Grade saved" not in c.get(r.headers["location"]).text
        session.expire_all()
        alices = session.exec(select(Grade).where(Grade.grader_id == w.alice.id)).one()
        assert alices.draft_id == w.drafts[0].id
        post_form(c, url, {**FORM, "tone": "2"})
        html = c.get(url).text
        assert "<del>4</del> <ins>2</ins>" in html and "revise" in html

    def test_blind_page_hides_other_grades(
        self, session: Session, spec: EvalSpec, world: GradingWorld, client_as: Callable[..., TestClient]
    ) -> None:
        grade(session, spec, world, world.alice, rationale="ALICE-SECRET-RATIONALE")
        session.commit()
        bob, url = client_as("labeler", email="bob@example.test"), f"/grading/drafts/{world.drafts[0].id}"
        assert "ALICE-SECRET-RATIONALE" not in bob.get(url).text
        post_form(bob, url, FORM)
        assert "ALICE-SECRET-RATIONALE" in bob.get(url).text


def test_batch_done_message_is_shown_once_and_not_carried_in_the_url(
    session: Session, spec: EvalSpec, world: GradingWorld, client_as: Callable[..., TestClient]
) -> None:
    """"Nothing left for you in this batch" rides in the one-time signed flash: no ?done=1, a reload drops it."""
    for i in range(len(world.drafts)):
        grade(session, spec, world, world.alice, i)
    session.commit()
    alice = client_as("labeler", email="alice@example.test")
    r = post_form(alice, f"/grading/runs/{world.run.id}/next", {})
    assert r.status_code == 303 and r.headers["location"] == f"/grading/runs/{world.run.id}"
    assert "Nothing left for you in this batch. Thank you!" in alice.get(r.headers["location"]).text
    assert "Nothing left for you in this batch" not in alice.get(r.headers["location"]).text


class TestLeadPages:
    def test_adjudication_resolve_via_form(
        self, session: Session, spec: EvalSpec, world: GradingWorld, lead: TestClient
    ) -> None:
        disagree(session, spec, world)
        session.commit()

        def cards(user: User, role: str) -> dict[str, int]:
            got = home_cards(session=session, principal=principal_of(user, role), spec=spec)
            return {c.title: c.count for c in got}

        # The home page's cards count the open disagreement for the lead, the grading left for all.
        leads = cards(world.lead, "lead")
        assert leads["Adjudication"] == 1 and leads["References"] == 0 and leads["Grading"] == 5
        assert cards(world.carol, "labeler") == {"Grading": 5}
        html = lead.get("/grading/adjudication").text
        assert f"Draft {world.drafts[0].id}" in html and "tone: 1 vs 5" in html
        (adj,) = list_adjudications(session=session)
        r = post_form(lead, f"/grading/adjudication/{adj.id}/resolve", {**FORM, "tone": "3", "note": "mid"})
        assert r.status_code == 303 and r.headers["location"] == "/grading/adjudication"
        assert f"Draft {world.drafts[0].id}: final grade set." in lead.get("/grading/adjudication").text
        session.expire_all()
        assert final_grades(session=session, run_id=world.run.id)[world.drafts[0].id].tone == 3.0
        assert "No open disagreements." in lead.get("/grading/adjudication").text

    def test_take_a_scores_opens_the_prefilled_form_and_a_pass_with_a_claim_is_refused(
        self, session: Session, spec: EvalSpec, world: GradingWorld, lead: TestClient
    ) -> None:
        """"Take A's scores" links to the form itself (so it is scrolled into view, with a cue), and a
        final 'pass' still carrying A's unsupported claim is refused naming the field, nothing saved."""
        a = grade(session, spec, world, world.alice, factual="fail")
        grade(session, spec, world, world.bob, factual="pass")
        session.commit()
        (adj,) = list_adjudications(session=session)
        html = lead.get("/grading/adjudication").text
        assert f"take={adj.id}%3A{a.id}#adjudication-{adj.id}-resolve" in html
        taken = lead.get(f"/grading/adjudication?status=open&take={adj.id}:{a.id}").text
        assert f'id="adjudication-{adj.id}-resolve"' in taken and "grading-taken" in taken
        assert "Prefilled with A’s scores" in taken
        assert "We will refund you 200 dollars." in taken  # A's claim is in the prefilled form
        r = post_form(
            lead, f"/grading/adjudication/{adj.id}/resolve",
            {**FORM, "unsupported_claim": "We will refund you 200 dollars.", "note": "B is right"},
        )
        assert r.status_code == 422  # the queue again, the lead's form kept (issue 41)
        page_after = r.text
        assert f"Adjudication {adj.id}: Unsupported claim: a factual &#39;pass&#39; cannot keep an unsupported claim" in page_after
        session.expire_all()
        run_id, draft_id = stored_id(world.run.id), stored_id(world.drafts[0].id)
        assert draft_id not in final_grades(session=session, run_id=run_id)
        (still,) = list_adjudications(session=session)
        assert still.status == "open"
        # cleared claim: accepted
        r = post_form(lead, f"/grading/adjudication/{adj.id}/resolve", {**FORM, "note": "B is right"})
        session.expire_all()
        assert final_grades(session=session, run_id=run_id)[draft_id].factual_accuracy == "pass"

    def test_references_write_and_approve(
        self, session: Session, world: GradingWorld, lead: TestClient, client_as: Callable[..., TestClient]
    ) -> None:
        url = f"/grading/references/{world.drafts[0].case_pk}"
        alice = client_as("labeler", email="alice@example.test")
        assert post_form(alice, url, {"text": "v1 text"}).status_code == 303
        assert post_form(alice, url, {"text": "v2 text", "note": "tighter"}).status_code == 303
        assert "to approve" in lead.get("/grading/references?show=to_approve").text
        v2 = session.exec(select(ReferenceVersion).where(ReferenceVersion.version == 2)).one()
        assert post_form(alice, f"/grading/references/versions/{v2.id}/approve", {}).status_code == 403
        r = post_form(lead, f"/grading/references/versions/{v2.id}/approve", {})
        assert r.status_code == 303 and "flash" not in r.headers["location"]
        html = lead.get(url).text
        assert "v1 text" in html and "approved by Lead" in html
        assert "Version 2 approved." in html  # the signed one-time message
        assert "Version 2 approved." not in lead.get(url).text  # consumed: a reload does not repeat it
        # Approved already: a second approval is refused and the first approver stays.
        again = post_form(lead, f"/grading/references/versions/{v2.id}/approve", {})
        assert again.status_code == 409 and "already approved by Lead" in again.text

    def test_a_lead_cannot_approve_their_own_reference(
        self, session: Session, world: GradingWorld, lead: TestClient
    ) -> None:
        url = f"/grading/references/{world.drafts[0].case_pk}"
        assert post_form(lead, url, {"text": "the lead's own text"}).status_code == 303
        html = lead.get(url).text
        assert "Version 1 saved." in html and "You wrote this version: another lead approves it." in html
        mine = session.exec(select(ReferenceVersion).where(ReferenceVersion.author_id == world.lead.id)).one()
        assert f"/grading/references/versions/{mine.id}/approve" not in html
        r = post_form(lead, f"/grading/references/versions/{mine.id}/approve", {})
        assert r.status_code == 403 and "written by you" in r.text
        session.refresh(mine)
        assert mine.approved_at is None


class TestOwnRouteSecurity:
    """Every grading route has a role check, refuses the wrong role, and refuses writes without CSRF."""

    def _routes(self) -> list[tuple[str, str, RoleCheck]]:
        out = []
        for prefix, router in (("", pages.router), ("/api/v1", routes.router)):
            for r in router.routes:
                assert isinstance(r, APIRoute)
                checks = [d.call for d in r.dependant.dependencies if isinstance(d.call, RoleCheck)]
                assert checks, f"{r.path} has no role check"
                for m in r.methods - {"HEAD"}:
                    out.append((m, prefix + r.path, checks[0]))
        return out

    def test_wrong_role_and_missing_csrf(self, client_as: Callable[..., TestClient]) -> None:
        admin = client_as("admin")
        everyone = client_as(*ROLES)
        for method, path, check in self._routes():
            url = re.sub(r"\{[^}]+\}", "1", path)
            if "admin" not in check.roles:
                assert admin.request(method, url, follow_redirects=False).status_code == 403, (method, path)
            if method != "GET":
                r = everyone.request(method, url, headers={"X-CSRF-Token": ""}, follow_redirects=False)
                assert r.status_code == 403 and "CSRF" in r.text, (method, path)


def test_seed_plants_grades_disagreements_and_references(session: Session, spec: EvalSpec) -> None:
    refund = "golden-unacceptable-refund"
    case_ids = [f"c{i:02d}" for i in range(50)] + [refund]
    golden = {refund, "c01", "c02"}
    ds = make_dataset(session, [dict(case_id=c, golden=c in golden, reference="Ref.") for c in case_ids])
    refund_text = (
        "I am sorry about the trouble. We will refund your last three invoices today. Anything else?"
    )
    drafts = [
        {"case_id": c, "draft_text": refund_text if c == refund else f"Draft for {c}. All good."}
        for c in case_ids
    ]
    run = make_run(session, ds, drafts, name="demo-run-1")
    users = {
        r: make_user(session, email=f"{r}@demo.test", roles=[role], name=r)
        for r, role in (("labeler", "labeler"), ("labeler2", "labeler"), ("lead", "lead"))
    }
    by_case = {d.case_pk: d for d in session.exec(select(Draft).where(Draft.run_id == run.id))}
    cases = {c.case_id: c for c in session.exec(select(EvalCase).where(EvalCase.dataset_id == ds.id))}
    ctx = DemoContext(
        rng=random.Random(7),
        today=dt.date(2026, 11, 20),
        users=users,
        dataset=ds,
        cases=cases,
        run=run,
        drafts={cid: by_case[c.id] for cid, c in cases.items()},
    )
    demo.seed(session=session, spec=spec, ctx=ctx)
    status = grading_status(session=session, run_id=run.id)
    assert status.counts["final"] + status.counts["in_adjudication"] == 40
    assert len(list_adjudications(session=session, status="open")) >= 1
    assert len(list_adjudications(session=session, status="resolved")) == 3
    grades = list(session.exec(select(Grade).where(Grade.draft_id == ctx.drafts[refund].id)))
    assert [g.factual_accuracy for g in grades] == ["fail", "fail"]
    assert all(g.unsupported_claim == "We will refund your last three invoices today." for g in grades)
    refs = list(session.exec(select(ReferenceVersion)))
    assert len(refs) == 3 and sum(r.approved_at is not None for r in refs) == 1


def test_export_status_agreement(  # type: ignore[no-untyped-def]
    session: Session, spec: EvalSpec, world: GradingWorld, settings, tmp_path, monkeypatch
) -> None:
    grade_pair(session, spec, world)

    @contextmanager
    def fake_session(settings=None):  # type: ignore[no-untyped-def]
        yield session

    monkeypatch.setattr(grading_cli, "cli_session", fake_session)
    monkeypatch.setattr(grading_cli, "load_settings", lambda: settings)
    runner = CliRunner()
    out = tmp_path / "final.csv"
    result = runner.invoke(root.app, ["grading", "export", "run-1", str(out)])
    assert result.exit_code == 0, result.output
    assert [r["final_source"] for r in csv.DictReader(out.open())] == ["agreement"]
    assert runner.invoke(root.app, ["grading", "export", "run-1", str(tmp_path / "x.txt")]).exit_code == 2
    assert runner.invoke(root.app, ["grading", "export", "nope", str(out)]).exit_code == 2
    status = runner.invoke(root.app, ["grading", "status", "run-1"])
    assert json.loads(status.output)["final"] == 1
    agreement = runner.invoke(root.app, ["grading", "agreement", "--run", "run-1"])
    assert json.loads(agreement.output)["n_pairs"] == 1


def test_final_fail_offers_add_to_regression(
    session: Session, spec: EvalSpec, world: GradingWorld, client_as: Callable[..., TestClient]
) -> None:
    grade_pair(session, spec, world, factual="fail")  # quotes "We will refund you 200 dollars."
    html = page(client_as, "alice", f"/grading/drafts/{world.drafts[0].id}")
    assert f'action="/regression/cases/from-draft/{world.drafts[0].id}"' in html
    assert "Add to regression suite" in html and "We will refund you 200 dollars." in html


class TestBatchAndQueuePages:
    def test_batch_overview_agreement_page_and_a_full_draft_offers_next(
        self, session: Session, spec: EvalSpec, world: GradingWorld, lead: TestClient,
        client_as: Callable[..., TestClient],
    ) -> None:
        grade_pair(session, spec, world)
        html = lead.get(f"/grading/runs/{world.run.id}").text
        assert "2 of 12 grades" in html and "Alice" in html and "final" in html
        edge = lead.get(f"/grading/runs/{world.run.id}?category=edge").text
        assert "case-1" in edge and "case-0<" not in edge
        assert "format=csv" in html
        agreement = client_as("pm").get("/grading/agreement").text
        assert 'id="agreement-pairs">1<' in agreement and "Alice &amp; Bob" in agreement
        assert "quadratic weighted" in agreement
        carols = page(client_as, "carol", f"/grading/drafts/{world.drafts[0].id}")
        assert "already has the 2 graders it needs" in carols and 'id="grading-form"' not in carols

    def test_disagreeing_grade_is_locked_until_returned_to_the_queue(
        self, session: Session, spec: EvalSpec, world: GradingWorld, client_as: Callable[..., TestClient]
    ) -> None:
        grades = disagree(session, spec, world)
        session.commit()
        bob = client_as("labeler", email="bob@example.test")
        url = f"/grading/drafts/{world.drafts[0].id}"
        html = bob.get(url).text
        assert "the lead decides or returns" in html and 'id="grading-form"' not in html
        # A form posted anyway (an old tab) is refused with the same message, and nothing changes.
        r = post_form(bob, url, {**FORM, "tone": "1"})
        assert r.status_code == 409
        assert "the lead decides or returns" in r.text and 'id="grading-form"' not in r.text
        session.expire_all()
        assert session.get(Grade, grades[1].id).tone == 5  # type: ignore[union-attr]
        # Once the lead returns Bob's grade, his page offers the form again; Alice's stays locked.
        (adj,) = list_adjudications(session=session)
        ask = {"adjudication_id": adj.id, "grade_id": grades[1].id, "lead_id": world.lead.id}
        return_grade(session=session, **ask, comment="Look at the <tone> again")  # type: ignore[arg-type]
        session.commit()
        assert 'id="grading-form"' in bob.get(url).text
        queue = bob.get("/grading").text  # the returned grade waits in Bob's queue, with the lead's comment
        assert "Look at the &lt;tone&gt; again" in queue and url in queue
        alice_html = page(client_as, "alice", url)
        assert "the lead decides or returns" in alice_html and 'id="grading-form"' not in alice_html


def test_a_large_batch_lists_its_drafts_a_hundred_at_a_time(
    session: Session, client_as: Callable[..., TestClient]
) -> None:
    # 230 gradable drafts plus one escalation (not gradable, never listed): pages of 100, 100, 30
    cases = [{"case_id": f"big-{i:03d}", "category": "routine"} for i in range(231)]
    ds = make_dataset(session, cases)
    drafts = [{"case_id": f"big-{i:03d}", "draft_text": DRAFT_TEXT} for i in range(230)]
    drafts.append({"case_id": "big-230", "draft_text": None, "escalated": True})
    run = make_run(session, ds, drafts, name="big-run")
    session.commit()
    lead = client_as("lead", email="lead@example.test")
    listed = re.compile(r">big-(\d{3})</a>")

    first = lead.get(f"/grading/runs/{run.id}").text
    assert [int(n) for n in listed.findall(first)] == list(range(100))
    assert "Drafts 1–100 of 230" in first and "page 1 of 3" in first
    assert f'href="/grading/runs/{run.id}?page=2" rel="next"' in first and 'rel="prev"' not in first

    last = lead.get(f"/grading/runs/{run.id}?page=3").text
    assert [int(n) for n in listed.findall(last)] == list(range(200, 230))
    assert "Drafts 201–230 of 230" in last and 'rel="next"' not in last
    assert f'href="/grading/runs/{run.id}?page=2" rel="prev"' in last

    # past the last page shows the last; a malformed page shows the first
    assert listed.findall(lead.get(f"/grading/runs/{run.id}?page=99").text)[0] == "200"
    assert listed.findall(lead.get(f"/grading/runs/{run.id}?page=abc").text)[0] == "000"
    # the filter is kept in the pager's links
    filtered = lead.get(f"/grading/runs/{run.id}?category=routine").text
    assert f'href="/grading/runs/{run.id}?category=routine&amp;page=2"' in filtered
