"""`draftdesk remote push-run|check|kb-sync`: the team's CI talks to Draft Desk over the API (docs/ci.md).

Exit codes, as `draftdesk check`: 0 the run passes, 1 it fails (check), 2 a usage error, no
connection, or a request the server refused (the message says which). The token is read from
--token or DRAFTDESK_TOKEN and never printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.progress import Progress

from draftdesk_remote.client import EXIT_ERROR, EXIT_FAIL, EXIT_PASS, Client, RemoteError, Target

BATCH = 1000  # drafts per request (the API's limit)
KB_SUFFIXES = (".jsonl", ".yaml", ".yml", ".json")

remote_app = typer.Typer(
    help="Talk to a Draft Desk server from CI: push a run, check it, sync the KB (DRAFTDESK_URL, DRAFTDESK_TOKEN).",
    no_args_is_help=True,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

UrlOpt = typer.Option(None, "--url", help="The server (default: DRAFTDESK_URL)", show_default=False)
TokenOpt = typer.Option(None, "--token", help="A `ci` token (default: DRAFTDESK_TOKEN; never printed)", show_default=False)
RetriesOpt = typer.Option(5, "--retries", min=0, help="Retries of a connection error or a 502/503/504 (with backoff)")


def _fail(message: str) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(EXIT_ERROR)


def _client(url: str | None, token: str | None, retries: int) -> Client:
    try:
        return Client(Target.resolve(url, token), retries=retries)
    except RemoteError as exc:
        raise _fail(str(exc)) from None


def _print_refusal(exc: RemoteError, where: Any = None) -> None:
    """Print each bad record a 422 names (with its file line when `where` maps a batch index to one)."""
    if isinstance(exc.detail, list):
        for d in exc.detail:
            loc = d.get("loc") or []
            index = next((x for x in loc if isinstance(x, int)), None)
            place = where(index) if where is not None and index is not None else ".".join(str(x) for x in loc[1:])
            err.print(f"{place}: {d.get('msg') or d.get('message')}", markup=False)


def read_drafts(path: Path) -> list[tuple[int, Any]]:
    """Return (line, record) of a drafts JSONL file (the `draftdesk import drafts` format); raise RemoteError."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise RemoteError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise RemoteError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                records.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise RemoteError(f"{path}:{number}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not records:
        raise RemoteError(f"{path}: the file holds no drafts")
    return records


def _verdict(answer: dict[str, Any], summary: Path | None, dotenv: Path | None) -> int:
    """Print the verdict's text, write the job summary / dotenv files; return the exit code."""
    out.print(answer.get("text") or f"{answer['verdict'].upper()}", markup=False)
    links = answer.get("links") or {}
    code = EXIT_PASS if answer.get("exit_code") == 0 else EXIT_FAIL
    if summary is not None:
        lines = [f"## Draft Desk: run `{_run_name(answer)}` {'passes' if code == 0 else 'fails'}", ""]
        lines += [f"- {r}" for r in answer.get("reasons") or []]
        lines += ["", f"- Review (PM and ML lead): {links.get('compare', '')}", f"- Pilot gate: {links.get('gate', '')}",
                  f"- Run: {links.get('run', '')}", ""]
        with summary.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    if dotenv is not None:
        values = {"DRAFTDESK_VERDICT": answer.get("verdict", ""), "DRAFTDESK_RUN_URL": links.get("run", ""),
                  "DRAFTDESK_REVIEW_URL": links.get("compare", ""), "DRAFTDESK_GATE_URL": links.get("gate", "")}
        dotenv.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")
    return code


def _run_name(answer: dict[str, Any]) -> str:
    run = answer.get("run")
    return str(run.get("name") if isinstance(run, dict) else run)


SummaryOpt = typer.Option(None, "--summary", help="Append a Markdown summary with the review and gate links (e.g. $GITHUB_STEP_SUMMARY)")
DotenvOpt = typer.Option(None, "--dotenv", help="Write DRAFTDESK_VERDICT and the links as a dotenv file (a GitLab report)")


@remote_app.command("push-run")
def push_run(
    file: Path = typer.Argument(..., help="The drafts, JSONL in the `draftdesk import drafts` format"),
    run: str = typer.Option(..., "--run", help="The run's name (unique; e.g. the CI job's id)"),
    dataset: str = typer.Option(None, "--dataset", help="The dataset (name, name@version or id; default: the dataset file's stem)"),
    dataset_file: Path = typer.Option(None, "--dataset-file", help="Upload this dataset file first (JSONL or YAML)"),
    model_version: str = typer.Option(None, "--model-version"),
    prompt_version: str = typer.Option(None, "--prompt-version"),
    retrieval_version: str = typer.Option(None, "--retrieval-version"),
    commit: str = typer.Option(None, "--commit", help="The drafting code's commit"),
    notes: str = typer.Option(None, "--notes"),
    replace: bool = typer.Option(False, "--replace", help="Replace drafts stored with other content (while the run is open)"),
    keep_open: bool = typer.Option(False, "--keep-open", help="Do not complete the run (more files follow)"),
    url: str = UrlOpt, token: str = TokenOpt, retries: int = RetriesOpt,
) -> None:
    """Create the run, send its drafts in batches of 1,000, complete it (its checks run); safe to retry."""
    if dataset is None and dataset_file is None:
        raise _fail("give --dataset NAME or --dataset-file FILE")
    try:
        records = read_drafts(file)
    except RemoteError as exc:
        raise _fail(str(exc)) from None
    with _client(url, token, retries) as client:
        try:
            if dataset_file is not None:
                dataset = upload_dataset(client, dataset_file, dataset)
            fields = {"name": run, "dataset": dataset, "model_version": model_version, "prompt_version": prompt_version,
                      "retrieval_version": retrieval_version, "commit": commit, "notes": notes}
            status, made = client.call("POST", "/runs", json={k: v for k, v in fields.items() if v is not None})
            out.print(f"run {made['name']} {'created' if status == 201 else 'already there (same fields)'}", markup=False)
            totals = send_batches(client, file, run, records, replace)
            out.print(f"drafts: {totals['created']} created, {totals['unchanged']} unchanged, {totals['replaced']} replaced", markup=False)
            if not keep_open:
                _, answer = client.call("POST", f"/runs/{quote(run, safe='')}/complete")
                out.print(f"run completed and checked: {answer['verdict'].upper()} (see `draftdesk remote check {run}`)", markup=False)
        except RemoteError as exc:
            raise _fail(str(exc)) from None


def upload_dataset(client: Client, path: Path, name: str | None) -> str:
    fmt = "yaml" if path.suffix.lower() in (".yaml", ".yml") else "jsonl"
    try:
        content = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RemoteError(f"cannot read {path}: {exc}") from None
    _, answer = client.call("POST", "/datasets", json={"name": name or path.stem, "format": fmt, "content": content})
    ds = answer.get("dataset", answer)
    label = f"{ds.get('name')}@{ds.get('version')}" if ds.get("version") else str(ds.get("name"))
    out.print(f"dataset {label} {'uploaded' if answer.get('created') else 'already there'}", markup=False)
    for warning in answer.get("warnings") or []:
        err.print(f"warning: {warning}", markup=False)
    return label


def send_batches(client: Client, file: Path, run: str, records: list[tuple[int, Any]], replace: bool) -> dict[str, int]:
    totals = {"created": 0, "unchanged": 0, "replaced": 0}
    path = f"/runs/{quote(run, safe='')}/drafts"
    with Progress(console=err, transient=True, disable=len(records) <= BATCH) as bar:
        task = bar.add_task("drafts", total=len(records))
        for start in range(0, len(records), BATCH):
            chunk = records[start : start + BATCH]
            try:
                _, answer = client.call("POST", path, json=[r for _, r in chunk], params={"replace": "true"} if replace else None)
            except RemoteError as exc:
                _print_refusal(exc, lambda i, chunk=chunk: f"{file}:{chunk[i][0]}" if 0 <= i < len(chunk) else f"{file}")
                raise
            for k in totals:
                totals[k] += int(answer.get(k, 0))
            bar.advance(task, len(chunk))
    return totals


@remote_app.command("check")
def check(
    run: str = typer.Argument(..., help="The run's name or id"),
    summary: Path = SummaryOpt, dotenv: Path = DotenvOpt,
    url: str = UrlOpt, token: str = TokenOpt, retries: int = RetriesOpt,
) -> None:
    """Check the run against today's KB and print the verdict of `draftdesk check`: exit 0 pass, 1 fail, 2 error."""
    with _client(url, token, retries) as client:
        try:
            _, answer = client.call("POST", f"/runs/{quote(run, safe='')}/checks")
        except RemoteError as exc:
            raise _fail(str(exc)) from None
    raise typer.Exit(_verdict(answer, summary, dotenv))


def kb_files(source: Path) -> list[Path]:
    """Return the export's files: SOURCE itself, or every .jsonl/.yaml/.yml/.json file under the folder (sorted)."""
    if source.is_dir():
        files = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix.lower() in KB_SUFFIXES)
        if not files:
            raise RemoteError(f"{source}: no {', '.join(KB_SUFFIXES)} file in the folder")
        return files
    if not source.exists():
        raise RemoteError(f"file not found: {source}")
    return [source]


@remote_app.command("kb-sync")
def kb_sync(
    source: Path = typer.Argument(..., help="A help-center export: a KB file (`draftdesk import kb` format) or a folder of them"),
    delete_missing: bool = typer.Option(False, "--delete-missing", help="Delete every article the export leaves out"),
    url: str = UrlOpt, token: str = TokenOpt, retries: int = RetriesOpt,
) -> None:
    """Sync the KB with a help-center export in one request (all or nothing); safe to retry."""
    try:
        files = kb_files(source)
        base = source if source.is_dir() else source.parent
        body = {"files": [{"name": str(p.relative_to(base)), "content": p.read_text(encoding="utf-8-sig")} for p in files],
                "delete_missing": delete_missing}
    except (RemoteError, OSError, UnicodeDecodeError) as exc:
        raise _fail(str(exc)) from None
    with _client(url, token, retries) as client:
        try:
            _, answer = client.call("POST", "/kb/sync", json=body)
        except RemoteError as exc:
            _print_refusal(exc)
            raise _fail(str(exc)) from None
    counts = ", ".join(f"{answer[k]} {k}" for k in ("created", "revised", "unchanged", "deprecated", "deleted"))
    out.print(f"KB synced from {len(files)} file(s): {counts} ({answer['revisions']} revision(s) stored)", markup=False)
    for note in answer.get("notes") or []:
        out.print(f"note: {note}", markup=False)


# The thin install's own `draftdesk` holds only the `remote` group (the full install mounts remote_app in its own).
app = typer.Typer(help="Draft Desk's CI client (the thin install: only `draftdesk remote`).", no_args_is_help=True)
app.add_typer(remote_app, name="remote")


def main() -> None:
    """Entry point of the thin install's `draftdesk` console script."""
    app()
