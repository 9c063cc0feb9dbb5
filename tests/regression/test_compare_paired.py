"""/runs/compare reads the cases both runs have: headline, change with its noise verdict, per-check rows, cases apart.

Hand-worked world (10 routine cases; a "PII" draft contains an email address, a "low" draft is shown
at confidence 0.42, which fails the low-confidence fallback check; every other draft is good):

  case   c1  c2  c3  c4  c5   c6   c7   c8   c9  c10
  run A  ok  ok  ok  ok  PII  PII  low  low  -   -
  run B  ok  ok  ok  ok  ok   PII  -    -    ok  -

Paired cases (drafted and checked in both): c1..c6 = 6. c7, c8 only in A; c9 only in B.
All checks: A passes 4/6 (66.7%), B 5/6 (83.3%): +16.7 pts, 1 fixed (c5), 0 broke; the exact
McNemar p with 1 change is 1.000: within noise. No PII: A fails c5, c6 (4/6), B fails c6 (5/6): +16.7 pts.
Low-confidence fallback: no paired case fails it in either run: 6/6 → 6/6, 0.0 pts (before, its row
read 0/2 → no applicable draft, and the headline 4/8 = 50.0% → 6/7 = 85.7%, +35.7 pts).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.checks.conftest import good
from tests.factories import make_article, make_dataset, make_run, words
from webapp.checks import service as checks_service
from webapp.core.spec import EvalSpec
from webapp.regression import comparison


def ok(cid: str) -> dict:
    return good(cid, "billing_charge")


def pii(cid: str) -> dict:
    return {**ok(cid), "draft_text": words(55) + " write to jane.doe@example.com any time"}


def low(cid: str) -> dict:
    return {**ok(cid), "confidence": 0.42}


def _world(session: Session, spec: EvalSpec) -> tuple[int, int]:
    make_article(session, "KB-1042", ((1, "current"),))
    ds = make_dataset(session, [{"case_id": f"c{i}", "category": "routine", "intent": "billing_charge"} for i in range(1, 11)])
    a = make_run(session, ds, [ok("c1"), ok("c2"), ok("c3"), ok("c4"), pii("c5"), pii("c6"), low("c7"), low("c8")], name="run-a")
    b = make_run(session, ds, [ok("c1"), ok("c2"), ok("c3"), ok("c4"), ok("c5"), pii("c6"), ok("c9")], name="run-b")
    for run in (a, b):
        checks_service.check_run(session=session, spec=spec, run_id=run.id or 0)
    session.commit()
    return a.id or 0, b.id or 0


def test_comparison_reads_the_paired_cases(session: Session, spec: EvalSpec) -> None:
    a, b = _world(session, spec)
    cmp = comparison.compare_runs(session=session, spec=spec, a_id=a, b_id=b)
    o = cmp.overall
    assert cmp.paired == 6
    assert (o.a_passed, o.a_total, o.b_passed, o.b_total) == (4, 6, 5, 6)
    assert o.delta is not None and abs(o.delta - 1 / 6) < 1e-12
    assert (o.test.fixed, o.test.broke, o.test.p_value, o.test.significant) == (1, 0, 1.0, False)
    assert cmp.apart == "2 cases only in A, 1 only in B"
    assert cmp.headline_tone == ""  # within noise: not painted as an improvement
    rows = {c.key: c for c in cmp.checks}
    pii_row = rows["no_pii"]
    assert (pii_row.a_passed, pii_row.a_total, pii_row.b_passed, pii_row.b_total) == (4, 6, 5, 6)
    assert pii_row.fixed_cases == ["c5"] and pii_row.broke_cases == []
    fallback = rows["low_confidence_fallback"]
    assert (fallback.a_passed, fallback.a_total, fallback.b_passed, fallback.b_total) == (6, 6, 6, 6)
    assert fallback.delta == 0 and fallback.test.changed == 0
    # No row moves unless a case changed: Δ = (fixed - broke) / paired cases for every check.
    for row in cmp.checks:
        assert row.delta is not None and abs(row.delta - (len(row.fixed_cases) - len(row.broke_cases)) / 6) < 1e-12


def test_page_headline_noise_verdict_and_cases_apart(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
) -> None:
    _world(session, spec)
    page = client_as("lead").get("/runs/compare?a=run-a&b=run-b").text
    head = re.search(r'id="compare-headline"><div class="value">([^<]+)</div><div class="label">([^<]+)<', page)
    change = re.search(r'id="compare-change"><div class="value compare-delta ([^"]*)">([^<]+)</div><div class="label">([^<]+)<', page)
    assert head is not None and change is not None
    assert head.group(1) == "66.7% → 83.3%"
    assert head.group(2) == "of the 6 cases both runs have passing all checks (4/6 → 5/6)"
    assert (change.group(1), change.group(2), change.group(3)) == ("", "+16.7 pts", "change, within noise (p = 1.000)")
    assert '<span id="compare-apart">2 cases only in A, 1 only in B</span>' in page
    fallback_row = re.search(r"<td>Low-confidence fallback</td>(.*?)</tr>", page, re.S)
    assert fallback_row is not None
    cells = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fallback_row.group(1))).strip()
    assert cells == "100.0% 6/6 100.0% 6/6 0.0 pts none"
