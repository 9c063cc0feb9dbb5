"""The datasets pages' views: one typed view per page, built by the service's named queries.

A page renders its view's fields as the template's variables (`webapp.web.templating.render_view`), so a template can
use only what its view declares.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.datasets import service
from webapp.datasets.mix import DatasetMix, mix_of_dataset
from webapp.datasets.models import Dataset, EvalCase


@dataclass(frozen=True)
class DatasetListView:
    """/datasets: every imported version, newest first."""

    datasets: list[Dataset]


@dataclass(frozen=True)
class DatasetDetailView:
    """/datasets/{id}: the version, its mix against the plan, its filtered cases and the filters' choices."""

    dataset: Dataset
    cases: list[EvalCase]
    facets: dict[str, list[str]]
    counts: dict[str, int]
    mix: DatasetMix
    filters: service.CaseFilter


@dataclass(frozen=True)
class DatasetCaseView:
    """/datasets/{id}/cases/{case_id}: one case of a version."""

    dataset: Dataset
    case: EvalCase


def dataset_list_view(*, session: Session) -> DatasetListView:
    """Return the list page's view."""
    return DatasetListView(datasets=service.list_datasets(session=session))


def dataset_detail_view(*, session: Session, spec: EvalSpec, ref: int, filters: service.CaseFilter) -> DatasetDetailView:
    """Return a version's page view; raise DatasetNotFound."""
    ds = service.get_dataset(session=session, ref=ref)
    dataset_id = stored_id(ds.id)
    return DatasetDetailView(
        dataset=ds,
        cases=service.list_cases(session=session, dataset_id=dataset_id, filters=filters),
        facets=service.case_facets(session=session, dataset_id=dataset_id),
        counts=service.category_counts(session=session, dataset_id=dataset_id),
        mix=mix_of_dataset(session=session, spec=spec, dataset_id=dataset_id),
        filters=filters,
    )


def dataset_case_view(*, session: Session, ref: int, case_id: str) -> DatasetCaseView:
    """Return one case's page view; raise DatasetNotFound (for the version or the case)."""
    ds = service.get_dataset(session=session, ref=ref)
    return DatasetCaseView(dataset=ds, case=service.get_case(session=session, dataset_id=stored_id(ds.id), case_id=case_id))
