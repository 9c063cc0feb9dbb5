"""`/-/metrics`: who may read it, and the counts it reports (worked out from the requests made here)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlmodel import Session

from webapp.alerts.models import AlertChannel, AlertOutbox
from webapp.core.db import stored_id


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, by name and sorted labels (parsed by prometheus-client's own parser)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text) for s in family.samples
    }


def test_only_a_metrics_token_or_an_admin_reads_it(
    client: TestClient, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
) -> None:
    r = client.get("/-/metrics", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert client.get("/-/metrics", headers={"Authorization": "Bearer dd_nonsense"}).status_code == 401
    assert client_as("pm", "lead", "labeler", "support_lead").get("/-/metrics").status_code == 403
    assert api_as(scopes=["ingest"]).get("/-/metrics").status_code == 403
    assert api_as("lead", scopes=["lead"]).get("/-/metrics").status_code == 403
    scraper = api_as(scopes=["metrics"])
    r = scraper.get("/-/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=")
    # The scraper's token opens nothing else.
    assert scraper.get("/api/v1/whoami").status_code == 403
    assert client_as("admin").get("/-/metrics").status_code == 200


def test_requests_are_counted_by_route_template_and_status(client: TestClient, api_as: Callable[..., TestClient]) -> None:
    for _ in range(3):
        assert client.get("/livez").status_code == 200
    assert client.get("/no/such/page").status_code == 404
    assert client.get("/grading/drafts/17", follow_redirects=False).status_code == 303
    assert client.get("/grading/drafts/18", follow_redirects=False).status_code == 303
    got = samples(api_as(scopes=["metrics"]).get("/-/metrics").text)
    livez = (("method", "GET"), ("route", "/livez"), ("status", "200"))
    assert got[("draftdesk_http_requests_total", livez)] == 3
    assert got[("draftdesk_http_request_duration_seconds_count", livez)] == 3
    assert got[("draftdesk_http_request_duration_seconds_bucket", tuple(sorted((*livez, ("le", "+Inf")))))] == 3
    assert got[("draftdesk_http_requests_total", (("method", "GET"), ("route", "unmatched"), ("status", "404")))] == 1
    # Two draft ids, one series: the template, not the path.
    drafts = (("method", "GET"), ("route", "/grading/drafts/{draft_id}"), ("status", "303"))
    assert got[("draftdesk_http_requests_total", drafts)] == 2
    assert not any("/grading/drafts/17" in str(labels) for _, labels in got)


def test_the_outbox_gauge_counts_waiting_and_failed_messages(session: Session, api_as: Callable[..., TestClient]) -> None:
    channel = AlertChannel(name="file", kind="file", target="/dev/null")
    session.add(channel)
    session.flush()
    for i, status in enumerate(["pending", "pending", "failed", "sent", "sent", "sent"]):
        session.add(AlertOutbox(channel_id=stored_id(channel.id), idempotency_key=f"k{i}", status=status))
    session.commit()
    got = samples(api_as(scopes=["metrics"]).get("/-/metrics").text)
    assert got[("draftdesk_alert_outbox_messages", (("status", "pending"),))] == 2
    assert got[("draftdesk_alert_outbox_messages", (("status", "failed"),))] == 1
