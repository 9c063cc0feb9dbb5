"""The text, Slack, webhook and email forms of one outbox message (links use the base URL setting)."""

from __future__ import annotations

import json
from typing import TypedDict

from webapp.alerts.items import AlertItem, AlertPayload

# the keys of an item the generic webhook sends (plus its absolute `url`)
WEBHOOK_ITEM_KEYS = ("key", "kind", "topic", "state", "alert", "rule", "window", "value", "threshold", "op", "days", "segment")
HEADLINE = {"firing": "FIRING", "resolved": "RESOLVED", "raised": "REGRESSION", "confirmed": "CONFIRMED", "test": "TEST"}


def item_url(item: AlertItem, base_url: str) -> str:
    """Return the absolute link of an item's page."""
    return base_url.rstrip("/") + item.get("path", "/")


def days_text(days: list[str]) -> str:
    """Return 'on 2026-11-05' or 'from 2026-11-03 to 2026-11-05'."""
    if not days:
        return ""
    return f"on {days[0]}" if len(days) == 1 else f"from {days[0]} to {days[-1]}"


def item_line(item: AlertItem, base_url: str) -> str:
    """Return one transition as a line of plain text."""
    head = HEADLINE.get(item["state"], item["state"].upper())
    parts = [f"[{head}] {item['alert']}: {item['rule']}"]
    if value_text := item.get("value_text"):
        parts.append(f"value {value_text} vs threshold {item.get('threshold_text', '')}".rstrip())
    parts.append(f"window {item['window']}")
    if item.get("days"):
        parts.append(days_text(item["days"]))
    parts.append(f"segment: {item['segment']}")
    parts.append(item_url(item, base_url))
    return " | ".join(parts)


def subject(payload: AlertPayload) -> str:
    """Return the one-line summary of a message (email subject, Slack fallback)."""
    items = payload["items"]
    first = items[0]
    head = HEADLINE.get(first["state"], first["state"].upper())
    more = f" (+{len(items) - 1} more)" if len(items) > 1 else ""
    return f"[Draft Desk] {head}: {first['alert']}{more}"


def text(payload: AlertPayload, base_url: str) -> str:
    """Return the whole message as plain text: a summary line, then one line per transition."""
    lines = [subject(payload)]
    lines += ["- " + item_line(it, base_url) for it in payload["items"]]
    return "\n".join(lines)


def _mrkdwn(value: str) -> str:
    # Slack's three control characters; everything else is literal.
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackText(TypedDict):
    type: str  # plain_text | mrkdwn
    text: str


class SlackBlock(TypedDict):
    type: str  # header | section
    text: SlackText


class SlackBody(TypedDict):
    """A Slack incoming-webhook body (Block Kit): the fallback text and the blocks."""

    text: str
    blocks: list[SlackBlock]


def slack_body(payload: AlertPayload, base_url: str) -> SlackBody:
    """Return a Slack incoming-webhook body: text (fallback) plus one section block per transition."""
    blocks: list[SlackBlock] = [
        {"type": "header", "text": {"type": "plain_text", "text": subject(payload)[:150]}},
    ]
    for it in payload["items"]:
        head = HEADLINE.get(it["state"], it["state"].upper())
        lines = [f"*{head}: {_mrkdwn(it['alert'])}*", _mrkdwn(it["rule"])]
        if value_text := it.get("value_text"):
            lines.append(f"Value {_mrkdwn(value_text)} vs threshold {_mrkdwn(it.get('threshold_text', ''))}")
        lines.append(f"Window {_mrkdwn(it['window'])}, {days_text(it.get('days', []))}, segment {_mrkdwn(it['segment'])}")
        lines.append(f"<{item_url(it, base_url)}|Open in Draft Desk>")
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}})
    return {"text": text(payload, base_url), "blocks": blocks}


def webhook_body(payload: AlertPayload, base_url: str, idempotency_key: str) -> bytes:
    """Return the generic webhook's JSON body (the bytes that are signed), the same on every attempt."""
    doc = {
        "version": 1,
        "idempotency_key": idempotency_key,
        "summary": subject(payload),
        "text": text(payload, base_url),
        "items": [
            {k: it.get(k) for k in WEBHOOK_ITEM_KEYS} | {"url": item_url(it, base_url)} for it in payload["items"]
        ],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
