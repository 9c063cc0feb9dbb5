"""docs/configuration.md's settings table is generated from `Settings` and must not drift from it."""

from __future__ import annotations

import re

import pytest

from webapp.core import config_docs
from webapp.core.config import PROJECT_ROOT, Settings


def test_the_committed_page_is_what_the_generator_writes_with_every_setting_once() -> None:
    page = config_docs.DOC.read_text(encoding="utf-8")
    assert config_docs.render(page) == page, "docs/configuration.md is out of date: run .venv/bin/python -m webapp.core.config_docs"
    assert config_docs.main(["--check"]) == 0
    rows = re.findall(r"^\| `(DRAFTDESK_[A-Z_]+)` \| (.*?) \| (.+) \|$", page, flags=re.M)
    documented = [name for name, _, _ in rows]
    assert documented == [f"DRAFTDESK_{name.upper()}" for name in Settings.model_fields]
    by_name = {name: (default, meaning) for name, default, meaning in rows}
    # defaults worked out by hand from webapp/core/config.py
    assert by_name["DRAFTDESK_DATABASE_URL"][0] == "`sqlite:///data/draftdesk.db`"
    assert by_name["DRAFTDESK_SPEC"][0] == "`data/eval_spec.yaml`"
    assert by_name["DRAFTDESK_SECURE_COOKIES"][0] == "unset"  # None: decided by the mode
    assert by_name["DRAFTDESK_SESSION_HOURS"][0] == "`12`"
    assert all(meaning.strip() for _, meaning in by_name.values())
    assert str(PROJECT_ROOT) not in page  # no path of this machine


def test_a_setting_without_a_description_or_a_page_without_markers_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(config_docs.DocsDriftError, match="exactly one"):
        config_docs.render("# Configuration\n\nno markers here\n")
    monkeypatch.setattr(Settings.model_fields["session_hours"], "description", None)
    with pytest.raises(config_docs.DocsDriftError, match=r"Settings\.session_hours has no description"):
        config_docs.settings_table()


def test_a_drifted_page_is_reported_and_rewritten(tmp_path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    page = tmp_path / "configuration.md"
    page.write_text(f"# C\n\n{config_docs.BEGIN}\n| `DRAFTDESK_OLD` | x | y |\n{config_docs.END}\n\nafter\n", encoding="utf-8")
    monkeypatch.setattr(config_docs, "DOC", page)
    monkeypatch.setattr(config_docs, "PROJECT_ROOT", tmp_path)
    assert config_docs.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert config_docs.main([]) == 0
    written = page.read_text(encoding="utf-8")
    assert "DRAFTDESK_OLD" not in written and "| `DRAFTDESK_DATABASE_URL` |" in written and written.endswith("\n\nafter\n")
    assert config_docs.main(["--check"]) == 0


def test_the_readme_points_at_the_generated_table() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/configuration.md)" in readme
    assert "| `DRAFTDESK_" not in readme  # no second, hand-kept table to drift
