"""Join the two heads of this branch (oidc's and reactions' migrations, both after 0019): no schema change.

The lead re-chains the helpers' migrations at merge; this file can go then.

Revision ID: 0021_layers
Revises: 0020_oidc, 0020_reactions
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0021_layers"
down_revision: str | Sequence[str] | None = ("0020_oidc", "0020_reactions")
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Change nothing: the two parents' tables are independent."""


def downgrade() -> None:
    """Change nothing."""
