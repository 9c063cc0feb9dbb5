"""Messages for people name fields as people know them."""

from __future__ import annotations

from webapp.labels import humanize


def test_field_keys_become_labels_and_other_words_stay() -> None:
    assert humanize("unsupported_claim: quote the claim exactly") == "Unsupported claim: quote the claim exactly"
    assert humanize("handle_time_s 212.0 above target; reject_rate too") == "Handle time 212.0 above target; Reject rate too"
    # Unknown snake_case words and identifiers inside other tokens are left alone.
    assert humanize("see golden-regression-2fa and some_other_key") == "see golden-regression-2fa and some_other_key"
