"""The demo being built as the demo hooks of domains that may import runs read it (checks, regression, grading, ppi).

webapp.core.demo_context.DemoContext with the users as auth's rows, the demo dataset and its
cases, the demo run and its drafts (webapp.demo.context builds the one object that is both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from webapp.auth.models import User
from webapp.core.demo_context import DemoContext
from webapp.datasets.models import Dataset, EvalCase
from webapp.runs.models import Draft, Run


class RunDemoContext(DemoContext, Protocol):
    """The demo being built, with its dataset and run."""

    @property
    def users(self) -> Mapping[str, User]: ...

    @property
    def dataset(self) -> Dataset: ...

    @property
    def cases(self) -> Mapping[str, EvalCase]:
        """By case_id."""
        ...

    @property
    def run(self) -> Run: ...

    @property
    def drafts(self) -> Mapping[str, Draft]:
        """By case_id (sample 0)."""
        ...
