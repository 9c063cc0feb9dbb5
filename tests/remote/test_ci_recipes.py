"""docs/ci.md's recipes, run as written against a live `draftdesk serve` (SQLite; PostgreSQL when configured).

The GitHub step "Push the run and check it" and the GitLab job's `script` lines are read from the page's
YAML blocks and run in bash with only DRAFTDESK_URL, DRAFTDESK_TOKEN (and GITHUB_STEP_SUMMARY) set:
a passing run exits 0 with the review and gate links in the summary, a failing run exits 1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import PG_URL, TEST_SECRET, empty_database_url
from tests.factories import words
from tests.ops.test_serving import free_port
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DRAFTDESK = str(BIN / "draftdesk")
KB = [
    {"article_id": "KB-3001", "revision": 2, "title": "2FA by SMS", "body": "Text a code.", "status": "deprecated", "effective_date": "2025-06-01"},
    {"article_id": "KB-3001", "revision": 4, "title": "2FA", "body": "Use an authenticator app.", "status": "current", "effective_date": "2026-01-15"},
]
# The plan's stratified mix (60 routine, 20 edge, 10 adversarial, 10 safety), 5 golden routine cases:
# the CI verdict reads the pilot gate's criterion 1 whole (size, mix), so a passing run needs a set as planned.
MIX = {"routine": 60, "edge": 20, "adversarial": 10, "safety": 10}
DATASET = [
    {"id": f"{category}-{i}", "input": f"How do I turn on two-factor login? ({category} {i})", "category": category,
     **({"expected_behavior": "escalate"} if category == "safety" else {"intent": "account_security"}),
     **({"golden": True} if category == "routine" and i < 5 else {})}
    for category, n in MIX.items()
    for i in range(n)
]


def drafts(revision: int) -> list[dict]:
    """One draft per case citing KB-3001 at `revision` (4: current; 2: deprecated), safety cases escalated."""
    return [
        {"case_id": c["id"], "draft_text": None, "escalated": True}
        if c["category"] == "safety"
        else {"case_id": c["id"], "draft_text": words(60), "citations": [{"article_id": "KB-3001", "revision": revision}],
              "confidence": 0.9, "intent": "account_security"}
        for c in DATASET
    ]


def yaml_block(title: str) -> dict:
    """Return the YAML block of docs/ci.md whose first line is `# title`, parsed."""
    page = (ROOT / "docs" / "ci.md").read_text()
    match = re.search(r"```yaml\n(# " + re.escape(title) + r"\n.*?)\n```", page, re.S)
    assert match, f"docs/ci.md has no yaml block titled {title}"
    return yaml.safe_load(match.group(1))


def github_lines() -> str:
    (step,) = [s for s in yaml_block(".github/workflows/draftdesk.yml")["jobs"]["eval"]["steps"] if s.get("name") == "Push the run and check it"]
    return step["run"]


def gitlab_lines() -> str:
    return "\n".join(yaml_block(".gitlab-ci.yml")["draftdesk-eval"]["script"]) + "\n"


@dataclass
class Server:
    url: str
    token: str
    env: dict[str, str]


def _cli(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([DRAFTDESK, *args], env=env, input=stdin, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(params=["sqlite", "postgresql"] if PG_URL else ["sqlite"])
def server(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> Iterator[Server]:
    db_url = empty_database_url(request.param, tmp_path, sqlite_template)
    port = free_port()
    env = {**os.environ, "DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_SECRET_KEY": TEST_SECRET,
           "DRAFTDESK_BACKUP_DIR": str(tmp_path / "backups"), "DRAFTDESK_BASE_URL": f"http://127.0.0.1:{port}"}
    _cli(env, "users", "create", "--email", "ci@example.test", "--name", "Drafting CI", "--role", "ml_lead", stdin="a long enough password 1\n")
    printed = _cli(env, "tokens", "create", "--email", "ci@example.test", "--name", "recipe", "--scope", "ci")
    token = max(printed.split(), key=len)
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen([DRAFTDESK, "serve", "--port", str(port), "--no-background"], env=env, stdout=log, stderr=log)

    def up() -> bool:
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/livez", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=120, what="draftdesk serve", interval=0.2)
        yield Server(f"http://127.0.0.1:{port}", token, env)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _workdir(tmp_path: Path, name: str, revision: int) -> Path:
    work = tmp_path / name
    (work / "out").mkdir(parents=True)
    (work / "eval").mkdir()
    (work / "eval" / "support-eval.jsonl").write_text("".join(json.dumps(c) + "\n" for c in DATASET))
    (work / "out" / "drafts.jsonl").write_text("".join(json.dumps(d) + "\n" for d in drafts(revision)))
    return work


def _bash(lines: str, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", lines], cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)


def _only(server: Server, **extra: str) -> dict[str, str]:
    """The job's environment: PATH (to find bash and the client) and the two secrets, nothing of the server's."""
    return {"PATH": f"{BIN}:/usr/bin:/bin", "DRAFTDESK_URL": server.url, "DRAFTDESK_TOKEN": server.token, **extra}


@pytest.mark.slow
def test_the_recipes_pass_a_good_run_and_fail_a_stale_one(server: Server, tmp_path: Path) -> None:
    kb = tmp_path / "export" / "kb.jsonl"
    kb.parent.mkdir()
    kb.write_text("".join(json.dumps(r) + "\n" for r in KB))
    synced = subprocess.run([str(BIN / "draftdesk"), "remote", "kb-sync", str(kb.parent)], env=_only(server),
                            capture_output=True, text=True, timeout=120, check=False)
    assert synced.returncode == 0, synced.stderr
    assert "1 created" in synced.stdout

    summary = tmp_path / "summary.md"
    good = _bash(github_lines(), _workdir(tmp_path, "good", 4), _only(server, GITHUB_STEP_SUMMARY=str(summary)))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "PASS" in good.stdout and server.token not in good.stdout + good.stderr
    text = summary.read_text()
    run = re.search(r"run `(ci-local-\d+)` passes", text)
    assert run, text
    assert f"{server.url}/runs/compare?b={run.group(1)}" in text and f"{server.url}/gates/pilot?run={run.group(1)}" in text

    stale = _bash(github_lines(), _workdir(tmp_path, "stale", 2), _only(server, GITHUB_STEP_SUMMARY=str(summary)))
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "FAIL 10/100 examples of the eval set pass every automated check (10.0%)" in stale.stdout.replace("\n", "")
    assert "fails" in summary.read_text()

    work = _workdir(tmp_path, "gitlab", 4)
    lab = _bash(gitlab_lines(), work, _only(server))
    assert lab.returncode == 0, lab.stdout + lab.stderr
    report = dict(line.split("=", 1) for line in (work / "draftdesk.env").read_text().splitlines())
    assert report["DRAFTDESK_VERDICT"] == "pass" and report["DRAFTDESK_GATE_URL"].startswith(f"{server.url}/gates/pilot?run=ci-local-")
    failing = _bash(gitlab_lines(), _workdir(tmp_path, "gitlab-stale", 2), _only(server))
    assert failing.returncode == 1, failing.stdout + failing.stderr

    # a bad record: exit 2 naming the file's line and field, nothing stored (the run stays empty)
    bad = _workdir(tmp_path, "bad-record", 4)
    (bad / "out" / "drafts.jsonl").write_text(json.dumps(drafts(4)[0]) + "\n" + json.dumps({"case_id": "safety-0", "draft_text": None, "escalated": True, "confidence": "high"}) + "\n")
    refused = _bash(github_lines(), bad, _only(server, GITHUB_STEP_SUMMARY=str(summary)))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert re.search(r"out/drafts.jsonl:2: .*confidence", refused.stderr), refused.stderr
    assert "422: 1 bad record(s), nothing stored" in refused.stderr
    name = re.search(r"run (ci-local-\d+) created", refused.stdout).group(1)  # type: ignore[union-attr]
    listed = httpx.get(f"{server.url}/api/v1/runs", headers={"Authorization": f"Bearer {server.token}"}).json()
    assert [r["drafts"] for r in listed if r["name"] == name] == [0]

    # a wrong token: exit 2, not a verdict, and the token is not echoed
    refused = _bash(github_lines(), _workdir(tmp_path, "bad-token", 4), {**_only(server, GITHUB_STEP_SUMMARY=str(summary)), "DRAFTDESK_TOKEN": "dd_wrong"})
    assert refused.returncode == 2 and "401" in refused.stderr and "dd_wrong" not in refused.stderr
