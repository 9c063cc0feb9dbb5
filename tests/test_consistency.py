"""Every figure, the same everywhere: over the seeded demo (copied once per module and database; "today"
is the demo's, so its pilot window is over whatever the clock says), the home page, /metrics, both gates,
/runs/{run}/checks, /grading and the JSON API show the same pass rate, streaks, alerts, hallucination
counts and grading progress.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.conftest import BACKENDS, SPEC_PATH, TEST_SECRET, DemoTemplate, login
from webapp.app.main import create_app
from webapp.core import units
from webapp.core.config import Settings
from webapp.core.db import make_engine
from webapp.core.spec import METRIC_NAMES, EvalSpec, load_spec
from webapp.demo import content
from webapp.demo.seed import demo_today
from webapp.metrics import daily as metrics_daily
from webapp.runs.service import resolve_run

# Each test here takes more than a few seconds (see docs/development.md: running subsets).
pytestmark = pytest.mark.slow


RUN = content.RUN_NAME


@dataclass
class Demo:
    spec: EvalSpec
    run_id: int
    as_role: dict[str, TestClient]

    def page(self, role: str, url: str) -> str:
        r = self.as_role[role].get(url)
        assert r.status_code == 200, (url, r.status_code)
        return r.text

    def api(self, role: str, url: str) -> Any:
        r = self.as_role[role].get(url)
        assert r.status_code == 200, (url, r.status_code, r.text[:300])
        return r.json()

    def criteria(self, gate: str) -> dict[str, Any]:
        """Return a gate's criteria for the demo run by key, as the API reports them."""
        return {c["key"]: c for c in self.api("pm", f"/api/v1/gates/{gate}?run={RUN}")["criteria"]}


@pytest.fixture(scope="module", params=BACKENDS)
def demo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, demo_template: DemoTemplate) -> Iterator[Demo]:
    """A copy of the seeded demo, and a signed-in client per role."""
    url = demo_template.copy(request.param, tmp_path_factory.mktemp("consistency"))
    spec = load_spec(SPEC_PATH)
    engine = make_engine(url)
    with Session(engine) as session:
        run_id = resolve_run(session=session, ref=RUN).id
    engine.dispose()
    patch = pytest.MonkeyPatch()
    patch.setattr(metrics_daily, "today_in", lambda spec: demo_today(spec))
    app = create_app(Settings(database_url=url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))
    with ExitStack() as stack:
        clients: dict[str, TestClient] = {}
        for key, email, _name, roles in content.DEMO_USERS:
            client = stack.enter_context(TestClient(app))
            clients[roles[0] if key != "labeler2" else key] = login(client, email, content.DEMO_PASSWORD)
        yield Demo(spec, run_id, clients)
    app.state.engine.dispose()
    patch.undo()


def _plain(fragment: str) -> str:
    """Return the visible text of an HTML fragment, whitespace collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", fragment))).strip()


def _between(page: str, start: str, end: str) -> str:
    """Return the HTML from the first `start` to the next `end`."""
    i = page.index(start)
    return page[i : page.index(end, i + len(start))]


def _criterion_cells(page: str, key: str) -> list[str]:
    """Return the visible text of the cells of a gate report's criterion row."""
    row = _between(page, f'<tr id="criterion-{key}">', "</tr>")
    return [_plain(c) for c in re.findall(r"<td>(.*?)</td>", row, re.S)]


def _kpi(page: str, element_id: str) -> tuple[int, str]:
    """Return the value and the label text of a KPI box of the metrics page."""
    box = _between(page, f'id="{element_id}"', "</div></div>")
    m = re.search(r'<div class="value">(\d+)</div>', box)
    assert m, box
    return int(m.group(1)), _plain(box.split(">", 1)[1])


def _home_cards(page: str) -> dict[str, str]:
    """Return the home page's cards: title (without its count) -> the card's text."""
    cards = {}
    for card in re.findall(r'<a class="card home-card[^"]*"[^>]*>(.*?)</a>', page, re.S):
        title = _plain(re.sub(r'<span class="count">.*?</span>', "", re.search(r"<h2>(.*?)</h2>", card, re.S).group(1)))  # type: ignore[union-attr]
        cards[title] = _plain(card)
    return cards


def test_automated_check_pass_rate(demo: Demo) -> None:
    """/runs/{run}/checks, both gates and the API: the same examples passing, out of the same total, the same rate."""
    overall = demo.api("lead", f"/api/v1/runs/{RUN}/checks")["overall"]
    passed, total, rate = overall["passed"], overall["total"], overall["pass_rate"]
    assert rate == pytest.approx(passed / total)
    shown = units.percent(rate)

    checks = _plain(demo.page("lead", f"/runs/{demo.run_id}/checks"))
    assert f"{shown} drafts pass every applicable check ({passed}/{total})" in checks

    # The gate counts the set's examples (an example passes when every draft of it passes); the
    # demo run has one draft per case of its 100-case set, so both figures are the same numbers.
    assert total == demo.spec.gates.pilot.min_cases
    measured = f"{passed}/{total} examples pass ({shown})"
    cells = _criterion_cells(demo.page("pm", f"/gates/pilot?run={RUN}"), "automated_checks")
    assert cells[1].startswith(measured)
    # the gate's threshold, written the same way on the checks page (not "80%" there and "80.0%" here)
    required = units.percent(demo.spec.gates.pilot.automated_pass_rate)
    assert cells[2].startswith(f"≥ {required}") and f"{required} pilot gate" in checks
    parts = {p["key"]: p for p in demo.criteria("production")["full_eval_set"]["parts"]}
    for criterion in (demo.criteria("pilot")["automated_checks"], parts["automated_checks"]):
        assert criterion["value"] == pytest.approx(rate) and criterion["measured"].startswith(measured)


def test_business_day_streaks(demo: Demo) -> None:
    """/metrics, /gates/production and the API: the gate's streak over the pilot window, and the range's."""
    pilot = demo.spec.online_metrics.pilot
    streaks = demo.api("pm", "/api/v1/metrics/streaks")
    gate = streaks["gate"]
    assert gate["window"] == {"kind": "pilot", "start": pilot.start.isoformat(), "end": pilot.end.isoformat()}
    gate_scope = f"pilot window {pilot.start} – {pilot.end}, all traffic"

    page = demo.page("pm", "/metrics")
    rng_value, rng_text = _kpi(page, "streak-range")
    assert rng_value == streaks["range"]["longest"] and f"now {streaks['range']['current']} in a row" in rng_text
    assert streaks["range"]["scope"] in rng_text
    if (gate["longest"], gate["current"]) != (streaks["range"]["longest"], streaks["range"]["current"]):
        gate_value, gate_text = _kpi(page, "streak-gate")
    else:
        gate_value, gate_text = rng_value, rng_text
    assert gate_value == gate["longest"] and f"now {gate['current']} in a row" in gate_text and gate_scope in gate_text

    # the range set to the pilot window shows the gate's figure as the range's
    in_pilot = demo.page("pm", f"/metrics?start={pilot.start}&end={pilot.end}")
    value, text = _kpi(in_pilot, "streak-range")
    assert value == gate["longest"] and f"now {gate['current']} in a row" in text and 'id="streak-gate"' not in in_pilot

    cells = _criterion_cells(demo.page("pm", f"/gates/production?run={RUN}"), "pilot_targets")
    assert cells[1].startswith(f"longest streak {gate['longest']} business days") and f"current {gate['current']}" in cells[1]
    assert gate_scope in cells[1]
    targets = demo.criteria("production")["pilot_targets"]
    assert targets["value"] == gate["longest"]
    missed = [e["label"][-10:] for e in targets["evidence"]]
    assert missed == [d["day"] for d in gate["missed_days"]]


def test_alert_states(demo: Demo) -> None:
    """The metrics page's alert list, its 'alerts firing' count, the home card, GET /api/v1/alerts and the weekly
    human-graded quality alert (GET /api/v1/ppi/production-weeks) agree: the quality alert counts once, whatever its weeks."""
    api = {a["metric"]: a for a in demo.api("support_lead", "/api/v1/alerts")}
    page = demo.page("support_lead", "/metrics")
    shown = dict(re.findall(r'<tr data-metric="([a-z_0-9]+)">.*?metrics-state-([a-z]+)', page, re.S))
    assert shown == {m: a["state"] for m, a in api.items()}
    for m, a in api.items():
        row = _plain(_between(page, f'<tr data-metric="{m}">', "</tr>"))
        assert row.startswith(a["rule"]) and units.text(m, a["value"]) in row
    quality = [w["week"] for w in demo.api("support_lead", "/api/v1/ppi/production-weeks") if w["below_target"]]
    firing = sum(a["state"] == "firing" for a in api.values()) + (1 if quality else 0)
    assert quality, "the demo's week 2026-W46 fires, so the human-quality alert is counted"
    assert re.search(rf'<div class="value">{firing}</div><div class="label">alerts? firing', page)
    home = _home_cards(demo.page("support_lead", "/"))
    assert (f"{firing} alert{'s' if firing != 1 else ''} firing" if firing else "No alerts firing") in home


def test_hallucination_counts(demo: Demo) -> None:
    """Confirmed reports in the pilot (gate, API, metrics table) and reports waiting (home, queue) agree."""
    pilot = demo.spec.online_metrics.pilot
    days = demo.api("pm", f"/api/v1/metrics/daily?start={pilot.start}&end={pilot.end}")
    confirmed = sum(d["hallucination_reports"] or 0 for d in days)
    assert confirmed >= 1  # the demo plants one, so the comparison means something

    table = _between(demo.page("pm", f"/metrics?start={pilot.start}&end={pilot.end}"), '<table class="metrics-table">', "</table>")
    column = 2 + METRIC_NAMES.index("hallucination_reports")  # after events and shown
    cells = [re.findall(r'<td class="num[^"]*">(.*?)</td>', row, re.S) for row in table.split("<tr>")[2:]]
    assert sum(int(c[column]) for c in cells if c[column] != "—") == confirmed

    assert _criterion_cells(demo.page("pm", f"/gates/production?run={RUN}"), "no_hallucinations")[1].startswith(f"{confirmed} confirmed")
    production_api = demo.criteria("production")
    assert production_api["no_hallucinations"]["value"] == confirmed
    # the plan's weekly target: the gate's pilot weeks add up to the same confirmed reports
    assert sum(p["value"] for p in production_api["no_hallucinations"]["parts"]) == confirmed
    # the streak's evidence names each day's count, as the daily figures have it
    evidence = {e["label"][-10:]: e["detail"] for e in production_api["pilot_targets"]["evidence"]}
    for d in days:
        if d["hallucination_reports"] and d["target_met"]["hallucination_reports"] is False and d["day"] in evidence:
            assert f"confirmed hallucinations {d['hallucination_reports']} (target == 0)" in evidence[d["day"]]
    assert any("confirmed hallucinations" in v for v in evidence.values())

    queue = demo.page("lead", "/metrics/hallucinations")
    pending = int(re.search(r"Pending \((\d+)\)", queue).group(1))  # type: ignore[union-attr]
    assert int(re.search(r"Confirmed \((\d+)\)", queue).group(1)) >= confirmed  # type: ignore[union-attr]
    home = _home_cards(demo.page("lead", "/"))
    assert f"{pending} hallucination report{'s' if pending != 1 else ''} to confirm" in home


def test_grading_progress(demo: Demo) -> None:
    """Final grades and open disagreements: grading API, /grading, /gates/pilot and the home page agree."""
    counts = demo.api("lead", f"/api/v1/grading/runs/{demo.run_id}/final-grades")["counts"]
    final, total = counts["final"], counts["total"]
    assert 0 < final < total  # the demo is part-graded

    grading = demo.page("lead", "/grading")
    row = _plain(_between(grading, f'<a href="/grading/runs/{demo.run_id}">', "</tr>"))
    assert re.search(rf"\b{total} .* {final} {counts['in_adjudication']} ", row), row

    pilot_api = demo.api("pm", f"/api/v1/gates/pilot?run={RUN}")
    human = {c["key"]: c for c in pilot_api["criteria"]}["human_grading"]
    assert human["summary"] == f"{total - final} of {total} drafts have no final grade yet"
    assert human["summary"] in _criterion_cells(demo.page("pm", f"/gates/pilot?run={RUN}"), "human_grading")[0]
    assert len([e for e in human["evidence"] if e["detail"] == "no final grade"]) == total - final

    # the home page's gate card says what the gate says
    home = _home_cards(demo.page("pm", "/"))
    assert f"{RUN}: {pilot_api['status']}. " + "; ".join(pilot_api["missing"][:2]) + "." in home["Pilot launch gate"]

    open_adjudications = len(demo.api("lead", "/api/v1/adjudications?status=open")["items"])
    assert f"{open_adjudications} disagreement{'s' if open_adjudications != 1 else ''} to adjudicate" in _home_cards(
        demo.page("lead", "/")
    )["Adjudication"]
