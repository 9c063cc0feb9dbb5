"""KB revisions are append-only: drop the one-current-revision index.

Revision ID: 0023_kbremote
Revises: 0022_reactions

A stored revision now keeps the status it was stored with (issue 41: stored revisions never
change), so an older revision stated "current" stays so in its row once a newer one arrives; what
it is now (deprecated) is read from the article's newest revision (webapp.kb.snapshot). The
partial unique index that allowed one "current" row per article would refuse that second row.
Rows written before this migration were kept consistent with the new reading by the old import
(it demoted a superseded revision in place), so nothing is rewritten.
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_kbremote"
down_revision = "0022_reactions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("kb_revision", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_kb_revision_one_current", sqlite_where=sa.text("status = 'current'"), postgresql_where=sa.text("status = 'current'")
        )


def downgrade() -> None:
    # Only possible while no article has two rows stated current (true of data written before 0020).
    with op.batch_alter_table("kb_revision", schema=None) as batch_op:
        batch_op.create_index(
            "uq_kb_revision_one_current",
            ["article_id"],
            unique=True,
            sqlite_where=sa.text("status = 'current'"),
            postgresql_where=sa.text("status = 'current'"),
        )
