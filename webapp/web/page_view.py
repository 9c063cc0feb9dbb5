"""A page's view: a frozen dataclass whose fields are the template's names.

A page renders one view (e.g. webapp.grading.item.GradingItemView, webapp.runs.pages.RunDetailView),
built by named query functions, through `webapp.web.templating.render_view`, so templates read
`batch`, `rows`, `progress`... as plain names, each typed in its view. Flash and error texts are
fields too, set by the page with `dataclasses.replace`. (Why not one `view` name in the template:
the templates stay as they are, and every name they read is still a typed field of one object.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageView:
    """A page's view: its fields become the template's names (render_view)."""
