"""`python -m draftdesk_remote`: the thin install's `draftdesk` (only `remote`)."""

from draftdesk_remote.cli import main

main()
