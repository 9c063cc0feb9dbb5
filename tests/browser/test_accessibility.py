"""Every page a demo role lives on passes axe-core's WCAG 2.1 A/AA rules in Chromium, with zero violations.

axe-core comes from npm (package.json, installed by `./dev setup` into node_modules; never committed). It is
evaluated into each page through the DevTools protocol (`page.evaluate`), in the page's main world: the
page's Content-Security-Policy governs the page's own scripts, not the protocol, so the page is audited
under its real policy (no `bypass_csp`, no test-only route serving the file, no inline `<script>` that the
policy would refuse, as `page.add_script_tag` makes).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from tests.browser_support import sign_in
from webapp.demo import content as c

AXE_PATH = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
RUN_AXE = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
  return result.violations.map((v) => ({
    id: v.id,
    impact: v.impact,
    nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary.replace(/\\s+/g, ' ')}`),
  }));
}"""

# The pages each role lives on. `{name}` parts are found by following the first link on the page named
# in LINKS whose path matches the pattern (or the nth such link; the demo's ids are not fixed).
PAGES: dict[str, tuple[str, ...]] = {
    "labeler": ("/", "/grading", "{batch}", "{grading_item}", "/runs", "/kb", "{kb_article}", "/datasets"),
    "lead": (
        "/", "/grading", "{batch}", "{grading_item}", "/grading/adjudication", "/grading/adjudication?status=rework",
        "/grading/agreement", "/grading/references", "/runs", "{run}", "{draft}", "/runs/compare", "{run_checks}",
        "/regression", "/regression/alerts", "/metrics", "/metrics/hallucinations", "/gates",
        "{gate_pilot}", "{gate_production}", "/ppi/runs/demo-ppi", "/survey", "/kb", "/datasets", "{dataset}",
        "{dataset_case}", "/evaluator/runs", "/cadence",
    ),
    "pm": ("/", "/reviews", "{review_week}", "{earlier_review_week}", "/metrics", "{gate_pilot}", "{gate_production}", "/survey", "/cadence"),
    "support_lead": ("/", "/reviews", "{review_week}", "{earlier_review_week}", "/metrics", "/metrics/hallucinations", "{gate_pilot}", "/survey", "/cadence"),
    "ml_lead": ("/", "/evaluator/runs", "/ppi/runs/demo-ppi", "{gate_production}", "/runs", "/cadence"),
    "admin": ("/", "/admin", "/admin/users", "/admin/tokens", "/admin/imports", "/admin/alerts", "/cadence"),
}
LINKS: dict[str, tuple[str, str] | tuple[str, str, int]] = {
    "batch": ("/grading", r"^/grading/runs/\d+$"),
    "grading_item": ("{batch}", r"^/grading/drafts/\d+"),
    "kb_article": ("/kb", r"^/kb/[^/?]+$"),
    "run": ("/runs", r"^/runs/[^/?]+$"),
    "draft": ("{run}", r"^/drafts/\d+$"),
    "run_checks": ("{run}", r"^/runs/[^/]+/checks$"),
    "dataset": ("/datasets", r"^/datasets/[^/?]+$"),
    "dataset_case": ("{dataset}", r"^/datasets/[^/]+/cases/"),
    "gate_pilot": ("/gates", r"^/gates/pilot(\?|$)"),
    "gate_production": ("/gates", r"^/gates/production(\?|$)"),
    "review_week": ("/reviews", r"^/reviews/\d{4}-W\d{2}$"),
    "earlier_review_week": ("/reviews", r"^/reviews/\d{4}-W\d{2}$", 1),  # the demo's reviewed week (verdict badges)
}


@cache
def _axe_source() -> str:
    assert AXE_PATH.is_file(), f"{AXE_PATH} is missing: run ./dev setup (package.json lists axe-core)"
    return AXE_PATH.read_text(encoding="utf-8")


def _resolve(page: Any, base: str, path: str, found: dict[str, str]) -> str:
    """Return the path, with a `{name}` placeholder replaced by the first matching link of its parent page."""
    name = path.strip("{}")
    if path == name:
        return path
    if name not in found:
        parent, pattern, *nth = LINKS[name]
        page.goto(f"{base}{_resolve(page, base, parent, found)}")
        hrefs = page.eval_on_selector_all("a[href^='/']", "els => els.map(e => e.getAttribute('href'))")
        matches = list(dict.fromkeys(h.split("#")[0] for h in hrefs if re.match(pattern, h.split("#")[0])))
        assert len(matches) > (nth[0] if nth else 0), f"no link {nth} matching {pattern} on {parent}: {matches}"
        found[name] = matches[nth[0] if nth else 0]
    return found[name]


def audit(page: Any, url: str) -> list[str]:
    """Open the page, run axe-core's WCAG 2.1 A/AA rules on it and return one line per failing element."""
    response = page.goto(url)
    assert response is not None and response.ok, f"{url}: HTTP {response.status if response else 'none'}"
    page.wait_for_load_state("networkidle")
    return audit_current(page)


def test_every_page_a_role_lives_on_has_no_wcag_violation(demo_server: Any, new_page: Any) -> None:
    users = {key: email for key, email, _name, _roles in c.DEMO_USERS}
    problems: list[str] = []
    audited: set[str] = set()
    for role, paths in PAGES.items():
        page = new_page()
        sign_in(page, demo_server.url, users[role], c.DEMO_PASSWORD)
        found: dict[str, str] = {}
        for path in paths:
            resolved = _resolve(page, demo_server.url, path, found)
            failures = audit(page, f"{demo_server.url}{resolved}")
            audited.add(re.sub(r"/\d+", "/N", resolved.split("?")[0]))
            problems += [f"{role} {resolved}: {f}" for f in failures]
    assert len(audited) >= 30, sorted(audited)
    pages_failing = {p.split(": ")[0] for p in problems}
    assert not problems, f"{len(problems)} axe violations on {len(pages_failing)} pages:\n" + "\n".join(problems)


def test_axe_finds_a_contrast_failure_when_there_is_one(demo_server: Any, new_page: Any) -> None:
    """The audit is live: grey-on-white text below 4.5:1 on a real page is reported."""
    page = new_page()
    sign_in(page, demo_server.url, "lead.chen@demo.draftdesk", c.DEMO_PASSWORD)
    page.goto(f"{demo_server.url}/kb")
    # Through the protocol (the page's CSP forbids inline styles): #aaa on white is 2.3:1.
    page.evaluate("document.querySelector('main').style.color = '#aaa'")
    failures = audit_current(page)
    assert any(f.startswith("color-contrast") for f in failures), failures
    # The app never serves axe-core: it exists for this audit only.
    assert page.request.get(f"{demo_server.url}/static/vendor/axe.min.js").status == 404


def audit_current(page: Any) -> list[str]:
    """Run axe-core on the page as it is now (no navigation)."""
    page.evaluate(f"{_axe_source()}\n;0")
    violations = page.evaluate(RUN_AXE, WCAG_TAGS)
    return [f"{v['id']} ({v['impact']}) {node}" for v in violations for node in v["nodes"]]
