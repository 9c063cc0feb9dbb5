"""Issue 41 item 4: six PMs pressing Draw for the same week at once store one sample and get five clear 409s."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.reviews import service
from webapp.reviews.models import ReviewItem, ReviewSample


def test_six_simultaneous_draws_give_one_draw_and_five_409s(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
) -> None:
    load(session, spec, [ev("2026-11-03", action="edit", sent_text="sent") for _ in range(25)])
    pms = [client_as("pm") for _ in range(6)]
    for pm in pms:  # each client's CSRF token is fetched before the race
        pm.get("/reviews")
    start = threading.Barrier(6)
    answers: list[tuple[int, str]] = []

    def press(pm: TestClient) -> None:
        start.wait()
        r = pm.post("/reviews/2026-W45/draw", follow_redirects=False)
        answers.append((r.status_code, r.text))

    threads = [threading.Thread(target=press, args=(pm,)) for pm in pms]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    codes = sorted(code for code, _ in answers)
    assert codes == [303, 409, 409, 409, 409, 409], answers
    assert all("the sample of 2026-W45 was drawn already" in text for code, text in answers if code == 409)
    session.expire_all()
    assert session.execute(select(func.count()).select_from(ReviewSample)).scalar_one() == 1
    assert session.execute(select(func.count()).select_from(ReviewItem)).scalar_one() == 20  # weekly_pairs, once


def test_a_draw_that_loses_the_race_at_the_unique_index_is_a_409(
    engine: Engine, session: Session, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The insert itself meets the first draw's row (both had found no sample): a 409, and the request's transaction lives."""
    load(session, spec, [ev("2026-11-03", action="edit", sent_text="sent") for _ in range(5)])
    first = service.draw_sample(session=session, spec=spec, period="2026-W45", today=service.dt.date(2026, 11, 20))
    session.commit()
    with Session(engine) as late:
        real = service.get_sample
        calls: list[str] = []

        def first_look_finds_nothing(*, session: Session, period: str) -> ReviewSample | None:
            calls.append(period)  # the first look ran before the other draw committed; the next ones read the table
            return None if len(calls) == 1 else real(session=session, period=period)

        monkeypatch.setattr(service, "get_sample", first_look_finds_nothing)
        with pytest.raises(service.SampleAlreadyDrawn, match="the sample of 2026-W45 was drawn already"):
            service.draw_sample(session=late, spec=spec, period="2026-W45", today=service.dt.date(2026, 11, 20))
        # the savepoint took the failed insert back: the session still reads
        assert late.execute(select(func.count()).select_from(ReviewSample)).scalar_one() == 1
    assert first.id is not None
