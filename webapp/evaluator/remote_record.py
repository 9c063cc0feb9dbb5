"""`evaluate-dataset --record --url URL`: record a finished run over the pipeline API, not in the local database.

The calls are those of `draftdesk remote push-run` (the thin CI client's own functions, so there is
one HTTP client): upload the dataset file the run read (`POST /datasets`, idempotent), create the
run (`POST /runs`), send its drafts in batches of 1,000 (`POST /runs/{run}/drafts`) and complete it
(`POST /runs/{run}/complete`, whose answer is the CI verdict). Every call is idempotent, so sending
the same run again (`--resume RUN_ID --record --url URL` once it completed) changes nothing.

What the API has no place for stays in the run's artifacts: the judge's per-sample scores and
rationales, the per-case and overall statistics and the judge's self-agreement (docs/evaluator.md).
This module imports nothing of the database: the local database is never opened on this path.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from draftdesk_remote.cli import send_batches, upload_dataset
from draftdesk_remote.client import DEFAULT_RETRIES, Client, RemoteError, Target

from webapp.evaluator.artifact_models import DatasetEvaluation
from webapp.evaluator.draft_fields import draft_lines, run_fields

__all__ = ["RemoteError", "RemoteRecord", "record_remote"]


@dataclass(frozen=True)
class RemoteRecord:
    """What recording over the API did: the run's name, its drafts and the verdict of its checks."""

    run_name: str
    dataset: str
    created: int
    unchanged: int
    verdict: str  # "pass" or "fail"
    text: str  # the verdict as `draftdesk check RUN` prints it


def _dataset_file(document: DatasetEvaluation) -> Path:
    """Return the dataset file the run read; raise RemoteError if it is gone or changed since."""
    path = Path(document.dataset_path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RemoteError(f"cannot read the run's dataset {path}: {exc.strerror or exc}") from None
    if f"sha256:{hashlib.sha256(data).hexdigest()}" != document.dataset_hash:
        raise RemoteError(f"{path} changed since the run read it; not recorded")
    return path


def record_remote(
    document: DatasetEvaluation, *, url: str | None, token: str | None, retries: int = DEFAULT_RETRIES, artifact: Path
) -> RemoteRecord:
    """Upload the dataset, create the run, send its drafts and complete it; raise RemoteError (nothing is stored locally)."""
    target = Target.resolve(url, token)
    dataset_path = _dataset_file(document)
    fields = run_fields(document)
    lines = draft_lines(document)
    with Client(target, retries=retries) as client:
        dataset = upload_dataset(client, dataset_path, dataset_path.stem)
        body = {"name": fields.name, "dataset": dataset, "model_version": fields.model,
                "prompt_version": fields.prompt_version, "notes": fields.notes}  # fmt: skip
        client.call("POST", "/runs", json=body)
        # A record's "line" is its place in the list: a refused record is named by the artifact and its number.
        totals = send_batches(client, artifact, fields.name, [(i + 1, d.model_dump(mode="json")) for i, d in enumerate(lines)], False)
        _, answer = client.call("POST", f"/runs/{quote(fields.name, safe='')}/complete")
    return RemoteRecord(
        run_name=fields.name,
        dataset=dataset,
        created=totals["created"],
        unchanged=totals["unchanged"],
        verdict=str(answer.get("verdict", "")),
        text=str(answer.get("text") or ""),
    )
