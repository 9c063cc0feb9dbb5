"""Demo data: about six weeks of production events around the pilot, with a model change, an alert
that fires and resolves, and hallucination reports (one confirmed during the pilot, one pending)."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from sqlmodel import Session

from webapp.core.demo_context import DemoContext
from webapp.core.spec import EvalSpec
from webapp.metrics import ingest, stale
from webapp.metrics import reports as metrics_reports

DRAFTS: dict[str, str] = {
    "billing_charge": "Thanks for reaching out. The charge you saw on {d} is the monthly renewal of your plan. You can see every invoice under Settings > Billing, and you can change the billing date there too.",
    "plan_change": "Happy to help you switch plans. Go to Settings > Plan, choose the new plan and confirm; the price difference is prorated on your next invoice.",
    "data_export": "You can export all your data from Settings > Data > Export. The export is prepared in the background and we email you a download link when it is ready.",
    "account_security": "For your security we have signed out all sessions. Please reset your password with the link on the sign-in page and turn on two-factor authentication.",
    "refund_request": "We have looked at your request. Refunds are available within 30 days of a charge; I have started the refund and it will reach your card in 5 to 10 business days.",
    "login_access": "Sorry you are having trouble signing in. Please use the Forgot password link; if the email does not arrive within ten minutes, check your spam folder.",
    "invoice_request": "Your invoices are under Settings > Billing > Invoices, where you can download each one as a PDF. You can also add your VAT number there.",
    "cancellation": "We are sorry to see you go. You can cancel any time under Settings > Plan > Cancel; your account stays active until the end of the billing period.",
}
CUSTOMER: dict[str, str] = {
    "billing_charge": "I was charged on {d} and I don't know what it is for.",
    "plan_change": "How do I move from the Pro plan to the Team plan?",
    "data_export": "I need a copy of all my data, how can I get it?",
    "account_security": "I think someone logged into my account.",
    "refund_request": "I'd like a refund for last month, I didn't use the product.",
    "login_access": "I can't log in, the password reset never arrives.",
    "invoice_request": "Where can I find my invoices?",
    "cancellation": "Please cancel my subscription.",
}
SWAPS = [("Thanks for reaching out.", "Hi there, thanks for writing in."), ("Happy to help", "Glad to help"),
         ("Please", "Could you please"), ("We are sorry", "I'm sorry"), ("Sorry", "So sorry")]
AGENTS = [f"agent-{i:02d}" for i in range(1, 13)]
PLANS = ["free", "pro", "team"]
INTENTS = list(DRAFTS)


def _edit(text: str, rng: Any, heavy: bool) -> str:
    """Return what the agent sent after editing the draft: always different from the draft (an "edit" is a change;
    drafts without a phrase in SWAPS get a greeting), more so when `heavy`."""
    for old, new in SWAPS:
        if old in text:
            text = text.replace(old, new, 1)
            break
    else:
        text = f"Hi there, {text[:1].lower()}{text[1:]}"
    if heavy:
        text += " Let me know if there is anything else I can do; I have also added a note to your account so the team knows the background."
    return text


def _action(rng: random.Random, escalated: bool, suppressed: bool, bad: bool) -> str | None:
    """Return what the agent did with a draft (None: no draft was shown)."""
    r = rng.random()
    reject_p = 0.22 if bad else 0.02
    if suppressed:
        return None
    if escalated:
        return "escalate"
    if r < reject_p:
        return "reject"
    if r < reject_p + (0.30 if not bad else 0.40):
        return "edit"
    return "accept"


def _sent(rng: random.Random, action: str | None, draft: str, bad: bool) -> str | None:
    """Return the reply the agent sent (None when the draft was not used)."""
    if action == "accept":
        return draft
    if action == "edit":
        return _edit(draft, rng, heavy=rng.random() < (0.5 if bad else 0.12))
    if action == "reject":
        return "Thanks for your message. I've checked your account and will follow up shortly with the details."
    return None


def _day_events(rng: random.Random, spec: EvalSpec, day: dt.date, n: int, *, bad: bool, change_day: dt.date) -> list[dict[str, Any]]:
    """Return one day's events (numbered after the first n): many on a business day, few at weekends."""
    pilot = spec.online_metrics.pilot
    business = day.weekday() < 5 and day not in spec.online_metrics.holidays
    count = rng.randint(180, 240) if business else rng.randint(25, 45)
    model = "draft-model-2026-10" if day < change_day else "draft-model-2026-11"
    prompt = "prompt-v3" if day < pilot.start else "prompt-v4"
    # a fixed share of escalations per day keeps the escalation rate inside its target band
    escalations = set(rng.sample(range(count), round(count * spec.online_metrics.escalation_baseline)))
    events: list[dict[str, Any]] = []
    for k in range(count):
        n += 1
        intent = rng.choice(INTENTS) if rng.random() > 0.06 else "other"
        local = dt.datetime.combine(day, dt.time(rng.randint(7, 19), rng.randint(0, 59)), tzinfo=spec.tz)
        draft = DRAFTS.get(intent, DRAFTS["billing_charge"]).format(d=day.strftime("%d %B"))
        customer = CUSTOMER.get(intent, "I have a question about my account.").format(d=day.strftime("%d %B"))
        escalated = k in escalations
        suppressed = escalated and rng.random() < 0.6  # safety escalation: no draft shown
        action = _action(rng, escalated, suppressed, bad)
        sent = _sent(rng, action, draft, bad)
        confidence = min(1.0, max(0.0, rng.gauss(0.86 if action in ("accept", "edit") else 0.6, 0.1)))
        events.append(
            {
                "event_id": f"demo-{n:06d}",
                "ticket_id": f"T-{40000 + n}",
                "occurred_at": local.isoformat(),
                "intent": intent,
                "plan": rng.choice(PLANS),
                "agent_id": rng.choice(AGENTS),
                "model_version": model,
                "prompt_version": prompt,
                "draft_shown": not suppressed,
                "action": action,
                "draft_text": None if suppressed else draft,
                "sent_text": sent,
                "customer_message": customer,
                "confidence": None if suppressed else round(confidence, 3),
                "latency_ms": None if suppressed else round(rng.lognormvariate(7.4, 0.35) * (1.9 if bad else 1.0)),
                "handle_time_s": round(rng.gauss(200 if not bad else 320, 45), 1),
                "cost_usd": round(rng.uniform(0.012, 0.026), 4),
                "escalated": escalated,
            }
        )
    return events


def seed(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> None:
    """Plant production events, a model change, an alert that fires and resolves, and hallucination reports."""
    rng = ctx.rng
    pilot = spec.online_metrics.pilot
    end = ctx.today - dt.timedelta(days=1)
    start = min(pilot.start - dt.timedelta(days=7), end - dt.timedelta(days=41))
    change_day = pilot.start + dt.timedelta(days=7)
    # two bad business days after the model change: reject rate above the alert threshold, then it recovers
    bad_days = [d for d in (change_day + dt.timedelta(days=i) for i in range(1, 8)) if d.weekday() < 5][:2]
    events: list[dict[str, Any]] = []
    day = start
    while day <= end:
        events += _day_events(rng, spec, day, len(events), bad=day in bad_days, change_day=change_day)
        day += dt.timedelta(days=1)
    for i in range(0, len(events), ingest.MAX_BATCH):
        results = ingest.ingest_events(session=session, spec=spec, items=events[i : i + ingest.MAX_BATCH])
        bad_items = [r for r in results if r.status == "invalid"]
        assert not bad_items, bad_items[0].as_dict()
    while stale.rebuild_stale(session=session, spec=spec):  # the demo starts with every aggregate stored
        pass
    # One factual error during the pilot, confirmed by the lead (the production gate shows it),
    # and a fresh one still waiting for the lead.
    pilot_day = pilot.start + dt.timedelta(days=3)
    confirmed = next(e for e in events if e["occurred_at"].startswith(pilot_day.isoformat()) and e["intent"] == "refund_request" and e["draft_shown"])
    lead = ctx.users.get("lead")
    agent = ctx.users.get("labeler")
    # Each report quotes the draft's own words (a test holds the demo to it) and names the article that contradicts them.
    report = metrics_reports.report_hallucination(
        session=session, event_id=confirmed["event_id"], reported_by=agent.id if agent else None,
        note="The draft says \"I have started the refund and it will reach your card in 5 to 10 business days\"; "
        "KB-5001 says agents cannot issue or promise refunds (the billing team decides).",
        citations=[{"article_id": "KB-5001", "revision": 1}],
    )
    metrics_reports.apply_decision(session=session, report=report, decision="confirmed", decided_by=lead.id if lead else None,
                           note="Checked against KB-5001: the draft promises a refund an agent cannot give.")
    recent = next(e for e in reversed(events) if e["intent"] == "plan_change" and e["draft_shown"])
    metrics_reports.report_hallucination(
        session=session, event_id=recent["event_id"], reported_by=agent.id if agent else None,
        note="The draft says \"the price difference is prorated on your next invoice\"; KB-2011 says a downgrade "
        "takes effect at the end of the billing period, and I can't find proration of plan changes in the KB.",
    )
    session.flush()
    ctx.extra["metrics_range"] = (start, end)
