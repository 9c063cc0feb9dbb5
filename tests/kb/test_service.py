"""KB queries and the KB import: revisions, current, idempotent re-import, all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import Session, select

from tests.datasets.helpers import count_rows, invoke, write_jsonl
from tests.factories import make_article
from webapp.datasets.records import RecordError
from webapp.kb import service, sync
from webapp.kb.models import KbArticle, KbRevision


def rev(article_id: str = "KB-1", revision: int = 1, status: str = "current", **extra: object) -> dict:
    body = f"Body of {article_id} r{revision}"
    return {"article_id": article_id, "revision": revision, "title": f"{article_id} title", "body": body,
            "status": status, "effective_date": "2026-01-15", **extra}


def kb_bytes(records: list) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


class TestQueries:
    def test_current_revision_and_snapshot(self, session: Session) -> None:
        make_article(session, "KB-3001", [(2, "deprecated"), (3, "deprecated"), (4, "current")])
        make_article(session, "KB-9000", [(1, "deleted")])
        assert service.current_revision(session=session, article_id="KB-3001").revision == 4
        assert service.current_revision(session=session, article_id="KB-9000") is None
        assert [r.revision for r in service.get_revisions(session=session, article_id="KB-3001")] == [4, 3, 2]
        snap = service.kb_snapshot(session=session)
        assert snap.current == {"KB-3001": 4}
        assert snap.revisions[("KB-3001", 2)].status == "deprecated"
        assert snap.revisions[("KB-9000", 1)].status == "deleted"
        assert snap.knows("KB-9000") and not snap.knows("KB-1")

    def test_list_and_search(self, session: Session) -> None:
        make_article(session, "KB-1042", title="Annual add-on renewals", intent="billing_charge")
        make_article(session, "KB-3001", [(2, "deprecated"), (4, "current")], title="Two-factor authentication", intent="account_security")
        make_article(session, "KB-9000", [(1, "deprecated"), (2, "deleted")], title="Legacy fax billing")
        ids = lambda **kw: [a.article_id for a in service.list_articles(session=session, **kw)]  # noqa: E731
        assert ids() == ["KB-1042", "KB-3001", "KB-9000"]
        assert ids(q="two-factor") == ["KB-3001"]
        assert ids(q="kb-10") == ["KB-1042"]
        assert ids(q="SECURITY") == ["KB-3001"]
        assert ids(q="billing") == ["KB-1042", "KB-9000"]  # intent of one, title of the other
        assert ids(status="deleted") == ["KB-9000"]
        summary = {a.article_id: a for a in service.list_articles(session=session)}
        assert summary["KB-3001"].current_revision == 4 and summary["KB-3001"].revisions == 2
        assert summary["KB-9000"].status == "deleted" and summary["KB-9000"].current_revision is None


def counts(result: sync.KbSyncResult) -> tuple[int, ...]:
    """(revisions stored, created, revised, unchanged, deprecated, deleted)."""
    return (result.revisions, *(result.count(o) for o in sync.OUTCOMES))


def stored(session: Session) -> dict[tuple[str, int], tuple]:
    return {(r.article_id, r.revision): (r.id, r.title, r.body, r.status, r.effective_date)
            for r in session.exec(select(KbRevision)).all()}


class TestImportKb:
    def test_creates_articles_and_revisions(self, session: Session) -> None:
        data = kb_bytes([rev("KB-3001", 2, "deprecated", intent="account_security"), rev("KB-3001", 4), rev("KB-1042")])
        result = sync.import_kb(session=session, data=data, path="kb.jsonl")
        assert counts(result) == (3, 2, 0, 0, 0, 0)
        assert service.get_article(session=session, article_id="KB-3001").intent == "account_security"
        assert service.current_revision(session=session, article_id="KB-3001").revision == 4

    def test_reimport_is_idempotent_and_a_changed_text_is_a_new_revision(self, session: Session) -> None:
        """Issue 41: the old import rewrote KB-1 r2's body in place (2 rows, r2 'Changed body')."""
        records = [rev("KB-1", 1, "deprecated"), rev("KB-1", 2)]
        sync.import_kb(session=session, data=kb_bytes(records), path="kb.jsonl")
        session.commit()
        before = stored(session)
        again = sync.import_kb(session=session, data=kb_bytes(records), path="kb.jsonl")
        assert counts(again) == (0, 0, 0, 1, 0, 0)
        records[1]["body"] = "Changed body"
        changed = sync.import_kb(session=session, data=kb_bytes(records), path="kb.jsonl")
        session.commit()
        assert counts(changed) == (1, 0, 1, 0, 0, 0)
        assert changed.notes == ["KB-1 revision 2 differs from the stored one: stored as revision 3"]
        after = stored(session)
        assert {k: after[k] for k in before} == before  # every stored revision as it was
        assert after[("KB-1", 3)][2:4] == ("Changed body", "current")
        assert service.current_revision(session=session, article_id="KB-1").revision == 3
        assert service.kb_snapshot(session=session).revisions[("KB-1", 2)].status == "deprecated"
        # the same changed file again: already stored (as r3), nothing new
        assert counts(sync.import_kb(session=session, data=kb_bytes(records), path="kb.jsonl")) == (0, 0, 0, 1, 0, 0)

    def test_an_edited_older_revision_is_refused(self, session: Session) -> None:
        records = [rev("KB-1", 1, "deprecated"), rev("KB-1", 2)]
        sync.import_kb(session=session, data=kb_bytes(records), path="kb.jsonl")
        session.commit()
        records[0]["body"] = "Rewritten history"
        with pytest.raises(RecordError) as info:
            sync.import_kb(session=session, data=kb_bytes(records), path="kb.jsonl")
        assert info.value.line == 1
        assert info.value.message.startswith("record 1: KB-1 revision 1 is stored with another text, and stored revisions never change")

    def test_new_current_revision_supersedes_the_old_one_without_touching_it(self, session: Session) -> None:
        sync.import_kb(session=session, data=kb_bytes([rev("KB-3001", 2)]), path="a.jsonl")
        session.commit()
        before = stored(session)
        result = sync.import_kb(session=session, data=kb_bytes([rev("KB-3001", 4)]), path="b.jsonl")
        session.commit()
        assert counts(result) == (1, 0, 1, 0, 0, 0)
        assert {k: stored(session)[k] for k in before} == before  # r2 still stored "current"
        statuses = service.states_of(service.get_revisions(session=session, article_id="KB-3001"))
        assert statuses == {("KB-3001", 4): "current", ("KB-3001", 2): "deprecated"}

    def test_a_current_revision_older_than_the_newest_is_refused(self, session: Session) -> None:
        with pytest.raises(RecordError) as info:
            sync.import_kb(session=session, data=kb_bytes([rev("KB-1", 1), rev("KB-1", 2, "deprecated")]), path="a.jsonl")
        assert info.value.line == 1 and "KB-1 revision 1 is current but revision 2 (at line 2) is newer" in info.value.message
        sync.import_kb(session=session, data=kb_bytes([rev("KB-1", 4)]), path="a.jsonl")
        with pytest.raises(RecordError) as info:
            sync.import_kb(session=session, data=kb_bytes([rev("KB-1", 2)]), path="b.jsonl")
        assert "KB-1 revision 2 cannot be current: the KB holds the newer revision 4" in info.value.message

    def test_yaml_kb(self, session: Session) -> None:
        text = "# 2FA\n- article_id: KB-3001\n  revision: 4\n  title: 2FA\n  body: |\n    Use an authenticator app.\n  status: current\n  effective_date: 2026-01-15\n"
        result = sync.import_kb(session=session, data=text.encode(), path="kb.yaml")
        assert result.count("created") == 1
        assert service.current_revision(session=session, article_id="KB-3001").effective_date.isoformat() == "2026-01-15"

    @pytest.mark.parametrize(
        ("record", "message"),
        [
            ({k: v for k, v in rev().items() if k != "title"}, "missing required field: title"),
            (rev(status="archived"), "status: 'archived' is not one of current, deprecated, deleted"),
            (rev(revision=0), "revision: must be a whole number of at least 1, not 0"),
            (rev(revision="2"), "revision: must be a whole number of at least 1, not '2'"),
            (rev(effective_date="15/01/2026"), "effective_date: '15/01/2026' is not a date (YYYY-MM-DD)"),
            (rev(article_id="three thousand"), "article_id: 'three thousand' is not an article id such as 'KB-3001'"),
            (rev(body=""), "body: must be a non-empty string"),
            (rev(colour="red"), "unknown field(s): colour"),
            (rev("KB-1", 2), "KB-1 has two current revisions in this file (the other at line 1)"),
            (rev("KB-1", 1, "deprecated"), "KB-1 revision 1 appears twice (first at line 1)"),
        ],
    )
    def test_bad_record_names_line(self, session: Session, record: dict, message: str) -> None:
        """The first record is KB-1 r1, current (rev()'s defaults), so record 2 may clash with it."""
        with pytest.raises(RecordError) as info:
            sync.import_kb(session=session, data=kb_bytes([rev("KB-1", 1), record]), path="kb.jsonl")
        assert info.value.line == 2
        assert info.value.message.startswith("record 2: " + message)


class TestImportKbCli:
    def test_bad_line_500_of_600_then_import_reimport_and_missing_file(
        self, monkeypatch: pytest.MonkeyPatch, db_url: str, session: Session, tmp_path: Path
    ) -> None:
        records = [rev(f"KB-{i}", 1) for i in range(1, 601)]
        records[499] = rev("KB-500", 1, effective_date="someday")
        path = write_jsonl(tmp_path / "bad.jsonl", records)
        r = invoke(monkeypatch, db_url, ["import", "kb", str(path)])
        assert r.exit_code == 2
        assert r.stderr.strip() == f"{path}:500: record 500: effective_date: 'someday' is not a date (YYYY-MM-DD)"
        assert count_rows(session, KbArticle) == 0 and count_rows(session, KbRevision) == 0
        path = write_jsonl(tmp_path / "kb.jsonl", [rev("KB-1", 1, "deprecated"), rev("KB-1", 2)])
        r1 = invoke(monkeypatch, db_url, ["import", "kb", str(path)])
        r2 = invoke(monkeypatch, db_url, ["import", "kb", str(path)])
        assert r1.exit_code == 0 and "2 revision(s) stored; articles: 1 created" in r1.output
        assert r2.exit_code == 0 and "0 revision(s) stored; articles: 0 created, 0 revised, 1 unchanged" in r2.output
        assert count_rows(session, KbRevision) == 2
        r = invoke(monkeypatch, db_url, ["import", "kb", str(tmp_path / "none.jsonl")])
        assert r.exit_code == 2 and "not found" in r.stderr


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        (b"article_id,revision\n", "kb.csv", "Unsupported KB file format: .csv. Supported formats: .jsonl, .yaml, .yml"),
        (b"\n\n", "kb.jsonl", "the file holds no KB revisions"),
    ],
)
def test_unsupported_or_empty_file(session: Session, data: bytes, path: str, message: str) -> None:
    with pytest.raises(RecordError) as info:
        sync.import_kb(session=session, data=data, path=path)
    assert str(info.value) == message
