"""The sign-off form confirms the signature, shows it, and is not offered twice to the same person."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.gates.test_service import build_run


def test_signing_confirms_and_hides_the_form_for_that_person(
    session: Session, client_as: Callable[..., TestClient]
) -> None:
    run = build_run(session)
    session.commit()
    pm = client_as("pm")
    page = pm.get(f"/gates/pilot?run={run.name}")
    assert 'class="stack gate-sign-form"' in page.text and "data-confirm=" in page.text
    r = pm.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go", "note": "<b>not yet</b>"})
    assert r.status_code == 200
    assert "Signed: your no-go on the pilot gate for run-1 is recorded" in r.text
    assert 'class="stack gate-sign-form"' not in r.text and "You signed this gate on" in r.text
    # the confirmation rides in the one-time flash, not the URL: a reload does not repeat it
    assert "signed=" not in str(r.url) and r.url.path == "/gates/pilot"
    reload = pm.get(str(r.url))
    assert "Signed: your no-go" not in reload.text and "You signed this gate on" in reload.text
    assert "&lt;b&gt;not yet&lt;/b&gt;" in r.text and "<b>not yet</b>" not in r.text
    # A second post (a replayed form) is refused and says why.
    again = pm.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
    assert "you already signed the pilot gate for this run" in again.text
    # The lead still sees the form.
    assert 'class="stack gate-sign-form"' in client_as("lead").get(f"/gates/pilot?run={run.name}").text


def test_ml_lead_reads_and_signs_the_gate_and_the_state_names_who_is_missing(
    session: Session, client_as: Callable[..., TestClient]
) -> None:
    run = build_run(session)
    session.commit()
    ml = client_as("ml_lead")
    page = ml.get(f"/gates/pilot?run={run.name}")
    assert page.status_code == 200 and 'class="stack gate-sign-form"' in page.text
    assert "A go needs PM and ML lead; still missing: PM, ML lead." in page.text
    r = ml.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go", "note": "judge drift"})
    assert "Signed: your no-go on the pilot gate" in r.text and "<td>ML lead</td>" in r.text
    assert "1 no-go sign-off: the decision is not approved." in r.text
    # Roles that do not sign are turned away (403), not merely refused by the service.
    assert client_as("support_lead").post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"}).status_code == 403
    assert client_as("labeler").get(f"/gates/pilot?run={run.name}").status_code == 403
