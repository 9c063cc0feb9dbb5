"""What the demo builder hands to each domain's demo hook, and the order it calls them in.

The builder (webapp/demo/seed.py) creates users, the KB, the 100-case dataset and the demo run,
then calls `seed(*, session, spec, ctx)` in `webapp/<domain>/demo.py` for each domain in
DEMO_HOOK_DOMAINS, in that order, so each domain plants its own demo data (grades, events,
reviews, survey answers...). The hooks read `ctx` through the Protocols below them
(webapp.core.demo_context.DemoContext, webapp.runs.demo_context.RunDemoContext), which this
dataclass is; nothing below the top imports this module. Hooks must be deterministic: draw
randomness only from ctx.rng.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field

from webapp.auth.models import User
from webapp.datasets.models import Dataset, EvalCase
from webapp.runs.models import Draft, Run

DEMO_HOOK_DOMAINS = ("checks", "regression", "grading", "metrics", "reviews", "gates", "survey", "alerts", "ppi")


@dataclass
class DemoContext:
    rng: random.Random
    today: dt.date
    users: dict[str, User]  # by role: "labeler" (first senior agent), "labeler2", "lead", "pm", "support_lead", "ml_lead", "admin"
    dataset: Dataset
    cases: dict[str, EvalCase]  # by case_id
    run: Run
    drafts: dict[str, Draft]  # by case_id (sample 0)
    extra: dict[str, object] = field(default_factory=dict)
