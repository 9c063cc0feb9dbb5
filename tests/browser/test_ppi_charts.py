"""The PPI charts in Chromium (issue 35 item 4): the run's forest plot draws each figure's interval and the gate's
thresholds, and the ML lead sees the judge's agreement with people per figure across runs; tables carry the numbers."""

from __future__ import annotations

from tests.browser_support import sign_in, wait_until
from webapp.demo import content as c
from webapp.ppi.demo import RUN_NAME


def test_the_forest_plot_and_the_agreement_chart_draw(demo_server, new_page) -> None:  # type: ignore[no-untyped-def]
    email = next(e for key, e, _n, _r in c.DEMO_USERS if key == "ml_lead")
    page = new_page()
    sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
    page.goto(f"{demo_server.url}/evaluator/runs")
    wait_until(page, "document.querySelector('#chart-judge-agreement[data-drawn]') !== null")
    traces = page.evaluate("document.getElementById('chart-judge-agreement').data.map(t => [t.name, t.x.length])")
    runs = page.locator("#judge-agreement-table tbody tr").count()
    assert runs >= 2
    # one line per figure, one point per run in the table
    assert [name for name, _ in traces] == ["Factual accuracy (pass share)", "Citation relevance", "Tone", "Completeness",
                                            "Pass rate (all four criteria)"]
    assert all(points == runs for _, points in traces)
    assert page.locator("#chart-judge-agreement .main-svg").count() > 0

    page.goto(f"{demo_server.url}/ppi/runs/{RUN_NAME}")
    wait_until(page, "document.querySelector('#chart-forest[data-drawn]') !== null")
    forest = page.evaluate("document.getElementById('chart-forest').data.map(t => [t.name, t.x.length, t.error_x.array.length])")
    shapes = page.evaluate("document.getElementById('chart-forest').layout.shapes.map(s => s.x0)")
    names = {name for name, _, _ in forest}
    assert "single score" in names
    # the five figures' estimates across the two panels (grades, shares), each with its error bars
    assert sum(n for name, n, _ in forest if name == "single score") == 5
    assert all(n == bars for _, n, bars in forest)
    assert len(shapes) == 4  # the gate's threshold on the four criteria (the pass rate has none)
    assert page.locator("#ppi-signals-table tbody tr[data-figure-key]").count() == 5
    assert page.locator("#chart-forest .main-svg").count() > 0


def test_the_run_page_draws_each_criterions_sequence_band_against_the_threshold(demo_server, new_page) -> None:  # type: ignore[no-untyped-def]
    email = next(e for key, e, _n, _r in c.DEMO_USERS if key == "lead")
    page = new_page()
    sign_in(page, demo_server.url, email, c.DEMO_PASSWORD)
    page.goto(f"{demo_server.url}/ppi/runs/{RUN_NAME}")
    wait_until(page, "document.querySelectorAll('.ppi-sequence-path[data-drawn]').length === 4")
    charts = page.evaluate(
        "[...document.querySelectorAll('.ppi-sequence-path')].map(el => ({title: el.layout.title.text,"
        " traces: el.data.map(t => [t.name, t.fill || '', t.x.length]), threshold: el.layout.shapes.map(s => s.y0)}))"
    )
    assert [ch["title"] for ch in charts] == ["Factual accuracy (pass share)", "Citation relevance", "Tone", "Completeness"]
    for ch in charts:
        upper, lower = ch["traces"][:2]
        assert upper[0] == "upper bound" and lower[:2] == ["lower bound", "tonexty"]  # the band between the bounds
        assert upper[2] == lower[2] > 1  # one look per grade
        assert len(ch["threshold"]) == 1
    assert charts[1]["threshold"] == [3.5]  # the pilot gate's "above 3.5"
    drawn = "[...document.querySelectorAll('#ppi-sequence-paths .ppi-sequence-path')].filter(el => el.querySelector('.main-svg')).length"
    assert page.evaluate(drawn) == 4  # each chart drew its SVG
