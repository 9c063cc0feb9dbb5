"""What every domain's demo hook may read of the demo being built (`seed(*, session, spec, ctx)`).

The builder (webapp/demo/seed.py) creates users, the KB, the 100-case dataset and the demo run,
then calls each domain's `webapp/<domain>/demo.py` in order (webapp.demo.context.DEMO_HOOK_DOMAINS)
with one context. A hook reads it through the narrowest of two Protocols: this one (randomness,
today, the users by role, and `extra`, where a hook leaves what a later one or the builder reads),
or webapp.runs.demo_context.RunDemoContext, which adds the dataset, its cases, the run and its
drafts for the domains that may import runs. Hooks must be deterministic: draw randomness only
from ctx.rng.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Mapping
from typing import Protocol


class DemoUser(Protocol):
    """A demo user as a hook below runs reads one: its id."""

    @property
    def id(self) -> int | None: ...


class DemoContext(Protocol):
    """The demo being built, as any domain's demo hook reads it."""

    @property
    def rng(self) -> random.Random: ...

    @property
    def today(self) -> dt.date: ...

    @property
    def users(self) -> Mapping[str, DemoUser]:
        """By role: "labeler" (first senior agent), "labeler2", "lead", "pm", "support_lead", "ml_lead", "admin"."""
        ...

    @property
    def extra(self) -> dict[str, object]: ...
