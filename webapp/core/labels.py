"""Names of fields as people know them, for messages shown on pages (the API keeps the field keys)."""

from __future__ import annotations

import re

FIELD_LABELS: dict[str, str] = {
    "unsupported_claim": "Unsupported claim",
    "factual_accuracy": "Factual accuracy",
    "return_comment": "Comment for the grader",
    "expected_behavior": "Expected behaviour",
    "kb_articles": "KB articles",
    "case_id": "Case id",
    "draft_text": "Draft text",
    "sent_text": "Sent text",
    "customer_message": "Customer message",
    "article_id": "Article id",
    "effective_date": "Effective date",
    "agent_id": "Agent id",
    "no_go": "no-go",
    "accept_rate": "Accept rate",
    "reject_rate": "Reject rate",
    "edit_distance": "Edit distance",
    "escalation_rate": "Escalation rate",
    "handle_time_s": "Handle time",
    "latency_p95_s": "Latency p95",
    "hallucination_reports": "Confirmed hallucinations",
    "cost_per_draft": "Cost per draft",
    "latency_ms": "Latency",
    "cost_usd": "Cost",
}

_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def humanize(text: object) -> str:
    """Replace field keys such as `unsupported_claim` in a message with the names people use."""
    return _SNAKE.sub(lambda m: FIELD_LABELS.get(m.group(0), m.group(0)), str(text))
