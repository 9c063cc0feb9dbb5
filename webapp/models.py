"""Import every domain's models so that SQLModel.metadata holds the whole schema."""

from __future__ import annotations

from sqlmodel import SQLModel

from webapp.domains import domain_modules


def load_all_models() -> type[SQLModel]:
    """Import webapp.<domain>.models for every domain that has one; return SQLModel (its metadata is full)."""
    domain_modules("models")
    return SQLModel


metadata = load_all_models().metadata
