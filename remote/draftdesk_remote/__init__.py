"""Draft Desk's CI client: `draftdesk remote push-run|check|kb-sync` over the JSON API (docs/ci.md).

It imports httpx, typer and rich only, never the server's packages (tests/remote/test_thin_install.py).
"""
