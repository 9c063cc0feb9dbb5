"""Finding PII in a draft's text (the no_pii check's work, webapp.checks.rules.check_no_pii): emails,
phone numbers, account numbers, US social security numbers and payment card numbers, masked."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from functools import lru_cache

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher
from stdnum import luhn
from stdnum.us import ssn as us_ssn

from webapp.core.spec import ChecksSpec

PII_LABELS: dict[str, str] = {
    "email": "an email address",
    "phone": "a phone number",
    "account_number": "an account number",
    "ssn": "a US social security number",
    "payment_card": "a payment card number",
}

# Words that, right before a bare run of digits, say it is an identifier of ours and not a
# phone number ("order 4155550134", "ticket #100234567"). Formatted numbers ("(415) 555-0134",
# "+44 20 7946 0958") always count: people do not write order numbers that way.
IDENTIFIER_CUES = frozenset(
    {"order", "invoice", "ticket", "case", "ref", "reference", "tracking", "confirmation", "transaction", "id", "no", "#"}
)
_IDENTIFIER_LOOKBACK_WORDS = 3

EMAIL_RE = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
# Formatted SSNs only (dashes or spaces): a bare 9-digit run is far more often an order number.
SSN_RE = re.compile(r"(?<![\d-])(\d{3})[- ](\d{2})[- ](\d{4})(?![\d-])")
# 13-19 digits, optionally grouped with single spaces or dashes.
CARD_RE = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
# A number right after a word that says what it is ("SSN 123456789", "social security number
# 123 45 6789", "account number 12345678", "acct 987654321", "card 4111..."), optionally with
# "number"/"no."/"#", ":" or "is" between. Bare runs of digits are otherwise too often order or
# ticket numbers to flag; the context word is what makes them PII.
CONTEXT_NUMBER_RE = re.compile(
    r"\b(?P<cue>ssn|social[ -]security|account|acct|card)\b\.?"
    r"(?:[ \t]+(?:number|num|no)\b\.?)?"
    r"(?:[ \t]*(?::|#|\bis\b|\bwas\b))?"
    r"[ \t]*(?P<num>(?<![\w-])\d(?:[ -]?\d){5,18})(?![\d-])",
    re.IGNORECASE,
)
CONTEXT_KINDS = {"ssn": "ssn", "social security": "ssn", "social-security": "ssn", "account": "account_number", "acct": "account_number", "card": "payment_card"}
ACCOUNT_DIGITS = (6, 17)  # bank account numbers: US accounts run up to 17 digits


@dataclass(frozen=True)
class PiiFinding:
    """One piece of PII found in a text: its kind, where it is, and a masked form."""

    kind: str
    start: int
    end: int
    word: int  # 1-based index of the word where it starts
    masked: str


def luhn_valid(digits: str) -> bool:
    """Tell whether a string of digits passes the Luhn checksum (python-stdnum)."""
    return bool(luhn.is_valid(digits))


def ssn_valid(area: str, group: str, serial: str) -> bool:
    """Tell whether an SSN can have been issued (python-stdnum: area, group, serial and known-invalid numbers)."""
    return bool(us_ssn.is_valid(area + group + serial))


def _context_kind(cue: str, digits: str, kinds: Collection[str]) -> tuple[str, str] | None:
    """Return (kind, masked) for a number after a context word, or None when it is not that kind."""
    kind = CONTEXT_KINDS[" ".join(cue.lower().split())]
    if kind not in kinds:
        return None
    if kind == "ssn":
        return ("ssn", "***-**-" + digits[-4:]) if len(digits) == 9 and ssn_valid(digits[:3], digits[3:5], digits[5:]) else None
    if kind == "payment_card":
        return ("payment_card", "**** " + digits[-4:]) if 13 <= len(digits) <= 19 and luhn_valid(digits) else None
    lo, hi = ACCOUNT_DIGITS
    return ("account_number", "****" + digits[-4:]) if lo <= len(digits) <= hi else None


def _mask_email(value: str) -> str:
    local, _, domain = value.partition("@")
    return f"{local[:1]}***@{domain}"


def _mask_tail(value: str, keep: int = 4) -> str:
    digits = re.sub(r"\D", "", value)
    return "***" + digits[-keep:] if len(digits) > keep else "***"


def _mask_account(value: str) -> str:
    m = re.match(r"([A-Za-z]+-?)", value)
    prefix = m.group(1) if m else ""
    return f"{prefix}****{value[-4:]}" if len(value) - len(prefix) > 4 else f"{prefix}****"


def _word_at(text: str, pos: int) -> int:
    return len(text[:pos].split()) + (0 if pos > 0 and not text[pos - 1].isspace() and text[:pos].split() else 1)


def _preceded_by_identifier(text: str, start: int) -> bool:
    before = text[:start]
    if before.rstrip().endswith("#"):
        return True
    words = re.findall(r"[A-Za-z]+|#", before)[-_IDENTIFIER_LOOKBACK_WORDS:]
    return any(w.lower() in IDENTIFIER_CUES for w in words)


def _is_bare_digits(raw: str) -> bool:
    return raw.isdigit()


@lru_cache(maxsize=8)
def _account_re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)



# One PII match before the overlap rule: (kind, start, end, masked form).
PiiMatch = tuple[str, int, int, str]


def _emails(text: str, checks: ChecksSpec, kinds: Collection[str]) -> Iterator[PiiMatch]:
    for m in EMAIL_RE.finditer(text):
        yield "email", m.start(), m.end(), _mask_email(m.group())


def _context_numbers(text: str, checks: ChecksSpec, kinds: Collection[str]) -> Iterator[PiiMatch]:
    for m in CONTEXT_NUMBER_RE.finditer(text):
        hit = _context_kind(m.group("cue"), re.sub(r"\D", "", m.group("num")), kinds)
        if hit is not None:
            yield hit[0], m.start("num"), m.end("num"), hit[1]


def _accounts(text: str, checks: ChecksSpec, kinds: Collection[str]) -> Iterator[PiiMatch]:
    for m in _account_re(checks.account_number_pattern).finditer(text):
        yield "account_number", m.start(), m.end(), _mask_account(m.group())


def _cards(text: str, checks: ChecksSpec, kinds: Collection[str]) -> Iterator[PiiMatch]:
    for m in CARD_RE.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            yield "payment_card", m.start(), m.end(), "**** " + digits[-4:]


def _ssns(text: str, checks: ChecksSpec, kinds: Collection[str]) -> Iterator[PiiMatch]:
    for m in SSN_RE.finditer(text):
        if ssn_valid(*m.groups()):
            yield "ssn", m.start(), m.end(), "***-**-" + m.group(3)


def _phones(text: str, checks: ChecksSpec, kinds: Collection[str]) -> Iterator[PiiMatch]:
    for region in checks.phone_regions:
        for pm in PhoneNumberMatcher(text, region, leniency=Leniency.VALID):
            if _is_bare_digits(pm.raw_string) and _preceded_by_identifier(text, pm.start):
                continue
            national = str(pm.number.national_number)
            masked = phonenumbers.format_number(pm.number, phonenumbers.PhoneNumberFormat.E164)
            yield "phone", pm.start, pm.end, masked[: -len(national)] + "***" + national[-4:]


# Order matters: the most specific patterns claim their span first, so a card number is not also
# reported as a phone number. The kind each finder needs in the spec's pii_kinds (None: the
# context-word finder, which checks the kind of each number itself).
_FINDERS: tuple[tuple[str | None, Callable[[str, ChecksSpec, Collection[str]], Iterator[PiiMatch]]], ...] = (
    ("email", _emails),
    (None, _context_numbers),
    ("account_number", _accounts),
    ("payment_card", _cards),
    ("ssn", _ssns),
    ("phone", _phones),
)


def find_pii(text: str, checks: ChecksSpec) -> list[PiiFinding]:
    """Find every kind of PII the spec names in a text, earliest first, without overlaps."""
    found: list[PiiFinding] = []
    kinds = set(checks.pii_kinds)
    for needed, finder in _FINDERS:
        if needed is not None and needed not in kinds:
            continue
        for kind, start, end, masked in finder(text, checks, kinds):
            if not any(start < f.end and f.start < end for f in found):
                found.append(PiiFinding(kind, start, end, _word_at(text, start), masked))
    return sorted(found, key=lambda f: f.start)
