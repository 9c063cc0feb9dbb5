"""Import every domain's models (and ops', the job runs) so that SQLModel.metadata holds the whole schema."""

from __future__ import annotations

from sqlmodel import SQLModel

from webapp.core import facts as _facts  # noqa: F401 (facts and their reactions' marks: infrastructure tables)
from webapp.core import figures as _figures  # noqa: F401 (stored figures: an infrastructure table)
from webapp.core.domains import domain_modules


def load_all_models() -> type[SQLModel]:
    """Import webapp.<domain>.models for every domain that has one; return SQLModel (its metadata is full)."""
    domain_modules("models")
    domain_modules("models", ("ops",))  # the job runs (webapp/ops/models.py): not a domain, but a table
    return SQLModel


metadata = load_all_models().metadata
