"""Grading pages: queues, the grading form without JavaScript, blind pages, adjudication, agreement, references."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import csrf_for
from tests.factories import make_dataset, make_run
from tests.grading.conftest import DRAFT_TEXT, build_world, disagree
from webapp.auth.models import ROLES
from webapp.deps import RoleCheck
from webapp.grading import pages, routes
from webapp.grading.adjudication import list_adjudications, return_grade
from webapp.grading.grades import record_grade
from webapp.grading.models import Grade, ReferenceVersion
from webapp.grading.references import save_reference
from webapp.grading.scores import validate_scores
from webapp.grading.status import final_grades, grading_status

FORM = {
    "factual_accuracy": "pass",
    "citation_relevance": "4",
    "tone": "4",
    "completeness": "4",
    "rationale": "clear",
}


def signed_in(client_as: Callable[..., TestClient], email: str, role: str = "labeler") -> TestClient:
    return client_as(role, email=email)


def post_form(c: TestClient, url: str, data: dict[str, str]) -> object:
    return c.post(url, data={**data, "csrf_token": csrf_for(c)}, follow_redirects=False)


class TestGradingPage:
    def test_page_shows_context_and_shortcuts(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        save_reference(
            session=session,
            case_pk=w.drafts[0].case_pk,
            author_id=w.bob.id,
            text="Use the <b>sign-in</b> page.",
        )
        session.commit()
        c = signed_in(client_as, "alice@example.test")
        html = c.get(f"/grading/drafts/{w.drafts[0].id}").text
        assert DRAFT_TEXT in html and "KB-1 revision 1" in html and "deprecated" in html
        assert "Use the &lt;b&gt;sign-in&lt;/b&gt; page." in html  # escaped user text
        assert "<kbd>Ctrl</kbd>+<kbd>Enter</kbd>" in html and 'data-key="q"' in html
        assert "Cited article directly answers the question." in html  # the spec's guidance

    def test_form_post_saves_and_opens_next(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        c = signed_in(client_as, "alice@example.test")
        r = post_form(c, f"/grading/runs/{w.run.id}/next", {})
        assert r.headers["location"] == f"/grading/drafts/{w.drafts[0].id}"
        r = post_form(c, f"/grading/drafts/{w.drafts[0].id}", {**FORM, "next": "1"})
        assert r.status_code == 303 and r.headers["location"].startswith(f"/grading/drafts/{w.drafts[1].id}?")
        session.expire_all()
        assert (
            session.exec(select(Grade).where(Grade.grader_id == w.alice.id)).one().draft_id == w.drafts[0].id
        )

    def test_error_keeps_what_was_typed(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        w = build_world(session)
        c = signed_in(client_as, "alice@example.test")
        r = post_form(
            c,
            f"/grading/drafts/{w.drafts[0].id}",
            {**FORM, "factual_accuracy": "fail", "rationale": "my long <thoughts>"},
        )
        assert r.status_code == 422
        assert (
            "Unsupported claim: a factual" in r.text
            and "unsupported_claim:" not in r.text
            and "my long &lt;thoughts&gt;" in r.text
        )
        assert re.search(r'value="fail"\s+checked', r.text)

    def test_blind_page_hides_other_grades(
        self, session: Session, client_as: Callable[..., TestClient], spec
    ) -> None:  # type: ignore[no-untyped-def]
        w = build_world(session)
        record_grade(
            session=session,
            spec=spec,
            draft_id=w.drafts[0].id,
            grader_id=w.alice.id,
            scores=validate_scores(spec=spec, data={**FORM, "rationale": "ALICE-SECRET-RATIONALE"}),
        )
        session.commit()
        bob = signed_in(client_as, "bob@example.test")
        assert "ALICE-SECRET-RATIONALE" not in bob.get(f"/grading/drafts/{w.drafts[0].id}").text
        post_form(bob, f"/grading/drafts/{w.drafts[0].id}", FORM)
        assert "ALICE-SECRET-RATIONALE" in bob.get(f"/grading/drafts/{w.drafts[0].id}").text

    def test_revision_shows_in_history(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        w = build_world(session)
        c = signed_in(client_as, "alice@example.test")
        post_form(c, f"/grading/drafts/{w.drafts[0].id}", FORM)
        post_form(c, f"/grading/drafts/{w.drafts[0].id}", {**FORM, "tone": "2"})
        html = c.get(f"/grading/drafts/{w.drafts[0].id}").text
        assert "<del>4</del> <ins>2</ins>" in html and "revise" in html


class TestLeadPages:
    def test_adjudication_resolve_via_form(
        self, session: Session, client_as: Callable[..., TestClient], spec
    ) -> None:  # type: ignore[no-untyped-def]
        w = build_world(session)
        for user, tone in ((w.alice, 1), (w.bob, 5)):
            record_grade(
                session=session,
                spec=spec,
                draft_id=w.drafts[0].id,
                grader_id=user.id,
                scores=validate_scores(spec=spec, data={**FORM, "tone": tone}),
            )
        session.commit()
        lead = signed_in(client_as, "lead@example.test", "lead")
        html = lead.get("/grading/adjudication").text
        assert f"Draft {w.drafts[0].id}" in html and "tone: 1 vs 5" in html
        (adj,) = list_adjudications(session=session)
        r = post_form(
            lead, f"/grading/adjudication/{adj.id}/resolve", {**FORM, "tone": "3", "note": "middle"}
        )
        assert r.status_code == 303 and "final+grade+set" in r.headers["location"]
        session.expire_all()
        assert final_grades(session=session, run_id=w.run.id)[w.drafts[0].id].tone == 3.0
        assert "No open disagreements." in lead.get("/grading/adjudication").text

    def test_agreement_page_for_pm(
        self, session: Session, client_as: Callable[..., TestClient], spec
    ) -> None:  # type: ignore[no-untyped-def]
        w = build_world(session)
        for user in (w.alice, w.bob):
            record_grade(
                session=session,
                spec=spec,
                draft_id=w.drafts[0].id,
                grader_id=user.id,
                scores=validate_scores(spec=spec, data=FORM),
            )
        session.commit()
        html = client_as("pm").get("/grading/agreement").text
        assert (
            'id="agreement-pairs">1<' in html and "Alice &amp; Bob" in html and "quadratic weighted" in html
        )

    def test_references_write_and_approve(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        case_pk = w.drafts[0].case_pk
        alice = signed_in(client_as, "alice@example.test")
        assert post_form(alice, f"/grading/references/{case_pk}", {"text": "v1 text"}).status_code == 303
        assert (
            post_form(
                alice, f"/grading/references/{case_pk}", {"text": "v2 text", "note": "tighter"}
            ).status_code
            == 303
        )
        lead = signed_in(client_as, "lead@example.test", "lead")
        assert "to approve" in lead.get("/grading/references?show=to_approve").text
        v2 = session.exec(select(ReferenceVersion).where(ReferenceVersion.version == 2)).one()
        assert post_form(alice, f"/grading/references/versions/{v2.id}/approve", {}).status_code == 403
        assert post_form(lead, f"/grading/references/versions/{v2.id}/approve", {}).status_code == 303
        html = lead.get(f"/grading/references/{case_pk}").text
        assert "v1 text" in html and "approved by Lead" in html


class TestHomeCards:
    def test_cards_count_work(self, session: Session, spec) -> None:  # type: ignore[no-untyped-def]
        from tests.grading.conftest import principal_of
        from webapp.grading.home import home_cards

        w = build_world(session)
        for user, tone in ((w.alice, 1), (w.bob, 5)):
            record_grade(
                session=session,
                spec=spec,
                draft_id=w.drafts[0].id,
                grader_id=user.id,
                scores=validate_scores(spec=spec, data={**FORM, "tone": tone}),
            )
        cards = {
            c.title: c.count
            for c in home_cards(session=session, principal=principal_of(w.lead, "lead"), spec=spec)
        }
        assert cards["Adjudication"] == 1 and cards["References"] == 0 and cards["Grading"] == 5
        carol = {
            c.title: c.count
            for c in home_cards(session=session, principal=principal_of(w.carol, "labeler"), spec=spec)
        }
        assert carol == {"Grading": 5}


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


class TestDemoHook:
    def test_seed_plants_grades_disagreements_and_references(self, session: Session, spec) -> None:  # type: ignore[no-untyped-def]
        import datetime as dt

        from tests.factories import make_dataset, make_run, make_user
        from webapp.demo.context import DemoContext
        from webapp.grading import demo
        from webapp.runs.models import Draft

        case_ids = [f"c{i:02d}" for i in range(50)] + ["golden-unacceptable-refund"]
        ds = make_dataset(
            session,
            [
                {
                    "case_id": cid,
                    "golden": cid.startswith("golden") or cid in ("c01", "c02"),
                    "reference": "Ref.",
                }
                for cid in case_ids
            ],
        )
        refund_text = (
            "I am sorry about the trouble. We will refund your last three invoices today. Anything else?"
        )
        drafts = [
            {
                "case_id": cid,
                "draft_text": refund_text if cid.startswith("golden") else f"Draft for {cid}. All good.",
            }
            for cid in case_ids
        ]
        run = make_run(session, ds, drafts, name="demo-run-1")
        users = {
            r: make_user(
                session, email=f"{r}@demo.test", roles=["lead" if r == "lead" else "labeler"], name=r
            )
            for r in ("labeler", "labeler2", "lead")
        }
        all_drafts = {d.case_pk: d for d in session.exec(select(Draft).where(Draft.run_id == run.id))}
        from webapp.datasets.models import EvalCase

        cases = {c.case_id: c for c in session.exec(select(EvalCase).where(EvalCase.dataset_id == ds.id))}
        ctx = DemoContext(
            rng=random.Random(7),
            today=dt.date(2026, 11, 20),
            users=users,
            dataset=ds,
            cases=cases,
            run=run,
            drafts={cid: all_drafts[c.id] for cid, c in cases.items()},
        )
        demo.seed(session=session, spec=spec, ctx=ctx)
        status = grading_status(session=session, run_id=run.id)
        assert status.counts["final"] + status.counts["in_adjudication"] == 40
        assert len(list_adjudications(session=session, status="open")) >= 1
        assert len(list_adjudications(session=session, status="resolved")) == 3
        refund = ctx.drafts["golden-unacceptable-refund"]
        grades = list(session.exec(select(Grade).where(Grade.draft_id == refund.id)))
        assert [g.factual_accuracy for g in grades] == ["fail", "fail"]
        assert all(g.unsupported_claim == "We will refund your last three invoices today." for g in grades)
        refs = list(session.exec(select(ReferenceVersion)))
        assert len(refs) == 3 and sum(r.approved_at is not None for r in refs) == 1


class TestCli:
    def test_export_status_agreement(self, session: Session, spec, settings, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        import csv
        import json
        from contextlib import contextmanager

        from typer.testing import CliRunner

        from webapp import cli as root
        from webapp.grading import cli as grading_cli

        w = build_world(session)
        for user in (w.alice, w.bob):
            record_grade(
                session=session,
                spec=spec,
                draft_id=w.drafts[0].id,
                grader_id=user.id,
                scores=validate_scores(spec=spec, data=FORM),
            )

        @contextmanager
        def fake_session(settings=None):  # type: ignore[no-untyped-def]
            yield session

        monkeypatch.setattr(grading_cli, "cli_session", fake_session)
        monkeypatch.setattr(grading_cli, "load_settings", lambda: settings)
        runner = CliRunner()
        out = tmp_path / "final.csv"
        result = runner.invoke(root.app, ["grading", "export", "run-1", str(out)])
        assert result.exit_code == 0, result.output
        rows = list(csv.DictReader(out.open()))
        assert [r["final_source"] for r in rows] == ["agreement"]
        assert runner.invoke(root.app, ["grading", "export", "run-1", str(tmp_path / "x.txt")]).exit_code == 2
        assert runner.invoke(root.app, ["grading", "export", "nope", str(out)]).exit_code == 2
        status = runner.invoke(root.app, ["grading", "status", "run-1"])
        assert json.loads(status.output)["final"] == 1
        agreement = runner.invoke(root.app, ["grading", "agreement", "--run", "run-1"])
        assert json.loads(agreement.output)["n_pairs"] == 1


class TestRegressionLink:
    def test_final_fail_offers_add_to_regression(
        self, session: Session, client_as: Callable[..., TestClient], spec
    ) -> None:  # type: ignore[no-untyped-def]
        w = build_world(session)
        for user in (w.alice, w.bob):
            record_grade(
                session=session,
                spec=spec,
                draft_id=w.drafts[0].id,
                grader_id=user.id,
                scores=validate_scores(
                    spec=spec,
                    data={
                        **FORM,
                        "factual_accuracy": "fail",
                        "unsupported_claim": "We will refund you 200 dollars.",
                    },
                ),
            )
        session.commit()
        html = signed_in(client_as, "alice@example.test").get(f"/grading/drafts/{w.drafts[0].id}").text
        assert f'action="/regression/cases/from-draft/{w.drafts[0].id}"' in html
        assert "Add to regression suite" in html and "We will refund you 200 dollars." in html


class TestBatchAndQueuePages:
    def test_batch_overview_with_filters_and_progress(
        self, session: Session, client_as: Callable[..., TestClient], spec
    ) -> None:  # type: ignore[no-untyped-def]
        w = build_world(session)
        for user in (w.alice, w.bob):
            record_grade(
                session=session,
                spec=spec,
                draft_id=w.drafts[0].id,
                grader_id=user.id,
                scores=validate_scores(spec=spec, data=FORM),
            )
        session.commit()
        lead = signed_in(client_as, "lead@example.test", "lead")
        html = lead.get(f"/grading/runs/{w.run.id}").text
        assert "2 of 12 grades" in html and "Alice" in html and "final" in html
        assert "case-1" in lead.get(f"/grading/runs/{w.run.id}?category=edge").text
        assert "case-0<" not in lead.get(f"/grading/runs/{w.run.id}?category=edge").text
        assert "format=csv" in html

    def test_queue_lists_returned_grade(
        self, session: Session, client_as: Callable[..., TestClient], spec
    ) -> None:  # type: ignore[no-untyped-def]
        w = build_world(session)
        grades = disagree(session, spec, w)
        (adj,) = list_adjudications(session=session)
        return_grade(
            session=session,
            adjudication_id=adj.id,
            grade_id=grades[1].id,
            lead_id=w.lead.id,
            comment="Look at the <tone> again",
        )
        session.commit()
        html = signed_in(client_as, "bob@example.test").get("/grading").text
        assert "Look at the &lt;tone&gt; again" in html and f"/grading/drafts/{w.drafts[0].id}" in html

    def test_disagreeing_grade_is_locked_on_the_page(
        self, session: Session, client_as: Callable[..., TestClient], spec
    ) -> None:  # type: ignore[no-untyped-def]
        w = build_world(session)
        grades = disagree(session, spec, w)
        session.commit()
        bob = signed_in(client_as, "bob@example.test")
        url = f"/grading/drafts/{w.drafts[0].id}"
        html = bob.get(url).text
        assert "the lead decides or returns" in html and 'id="grading-form"' not in html
        # A form posted anyway (an old tab) is refused with the same message, and nothing changes.
        r = post_form(bob, url, {**FORM, "tone": "1"})
        assert r.status_code == 409  # type: ignore[attr-defined]
        assert "the lead decides or returns" in r.text and 'id="grading-form"' not in r.text  # type: ignore[attr-defined]
        session.expire_all()
        assert session.get(Grade, grades[1].id).tone == 5  # type: ignore[union-attr]
        # Once the lead returns Bob's grade, his page offers the form again; Alice's stays locked.
        (adj,) = list_adjudications(session=session)
        return_grade(
            session=session, adjudication_id=adj.id, grade_id=grades[1].id, lead_id=w.lead.id, comment="tone"
        )
        session.commit()
        assert 'id="grading-form"' in bob.get(url).text
        alice_html = signed_in(client_as, "alice@example.test").get(url).text
        assert "the lead decides or returns" in alice_html and 'id="grading-form"' not in alice_html

    def test_full_draft_offers_next_item_instead_of_form(
        self, session: Session, client_as: Callable[..., TestClient], spec
    ) -> None:  # type: ignore[no-untyped-def]
        w = build_world(session)
        for user in (w.alice, w.bob):
            record_grade(
                session=session,
                spec=spec,
                draft_id=w.drafts[0].id,
                grader_id=user.id,
                scores=validate_scores(spec=spec, data=FORM),
            )
        session.commit()
        html = signed_in(client_as, "carol@example.test").get(f"/grading/drafts/{w.drafts[0].id}").text
        assert "already has the 2 graders it needs" in html and 'id="grading-form"' not in html


class TestBatchPaging:
    def test_a_large_batch_lists_its_drafts_a_hundred_at_a_time(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        # 230 gradable drafts plus one escalation (not gradable, never listed): pages of 100, 100, 30
        cases = [{"case_id": f"big-{i:03d}", "category": "routine"} for i in range(231)]
        ds = make_dataset(session, cases)
        drafts = [{"case_id": f"big-{i:03d}", "draft_text": DRAFT_TEXT} for i in range(230)]
        drafts.append({"case_id": "big-230", "draft_text": None, "escalated": True})
        run = make_run(session, ds, drafts, name="big-run")
        session.commit()
        lead = signed_in(client_as, "lead@example.test", "lead")
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
