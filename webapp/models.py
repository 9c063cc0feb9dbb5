"""Import every domain's models so that SQLModel.metadata holds the whole schema."""

from __future__ import annotations

import importlib

from sqlmodel import SQLModel

from webapp.main import DOMAINS


def load_all_models() -> type[SQLModel]:
    """Import webapp.<domain>.models for every domain that has one; return SQLModel (its metadata is full)."""
    for domain in DOMAINS:
        name = f"webapp.{domain}.models"
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name not in (name, f"webapp.{domain}"):
                raise
    return SQLModel


metadata = load_all_models().metadata
