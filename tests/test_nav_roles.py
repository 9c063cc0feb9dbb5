"""Each role's navigation names the pages it needs (issue 41, item 7: the ML lead's nav had no Metrics)."""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi.testclient import TestClient

NAV_BLOCK = re.compile(r'<nav class="mainnav"[^>]*>(.*?)</nav>', re.S)


def test_the_ml_leads_nav_has_metrics_and_the_page_opens(client_as: Callable[..., TestClient]) -> None:
    ml = client_as("ml_lead")
    home = ml.get("/")
    nav = NAV_BLOCK.search(home.text)
    assert nav is not None and '<a href="/metrics"' in nav.group(1)
    assert ml.get("/metrics").status_code == 200
    assert ml.get("/metrics/hallucinations").status_code == 403  # the lead's and the head of support's queue
