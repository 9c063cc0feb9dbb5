"""The start-up warm-up: every template compiled before the first request."""

from __future__ import annotations

from pathlib import Path

import jinja2

from webapp.spec import EvalSpec
from webapp.templating import templates
from webapp.warmup import warm_up

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def test_every_template_is_compiled_before_the_first_request(spec: EvalSpec, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    on_disk = sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*.html"))
    assert len(on_disk) > 40
    assert warm_up(spec) == len(on_disk)

    # after the warm-up, rendering a page loads nothing from disk: every template is in the cache
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"template loaded after the warm-up: {args[1:2]}")

    monkeypatch.setattr(jinja2.FileSystemLoader, "get_source", refuse)
    for name in on_disk:
        templates.env.get_template(name)
