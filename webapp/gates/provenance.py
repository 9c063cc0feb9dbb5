"""Who stands behind each gate sign-off: who created the signer's account and who granted the role they signed in.

Two-person sign-off means little if one person holds both ends: an admin who creates a shadow
`ml_lead` account and signs as PM has signed twice. From the audit log (webapp.auth.audit) each
sign-off names the account's creator and the granter of its role, and is flagged when
- its account was created, or its role granted, by another signer of the same gate
  ("fail": one person holds both ends), or
- the same person (not the command line) created or granted the accounts of two of its signers
  ("warn": one person set up both ends; they chose both first passwords).
Decision: an account made at the command line (`draftdesk users create`) names "the command line"
and is never flagged on that ground, since whoever runs it holds the database already; an account
made before the audit log existed reads "not recorded".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlmodel import Session, col, select

from webapp.auth import audit
from webapp.auth.models import User
from webapp.gates.models import GateSignoff

FlagLevel = Literal["fail", "warn"]


@dataclass(frozen=True)
class SignoffProvenance:
    """Beside one sign-off: who created the account, who granted the role, and a flag when one person holds both ends."""

    created_by: str
    role_granted_by: str
    flag: str | None = None
    flag_level: FlagLevel | None = None


def _who(user_id: int | None, recorded: bool, emails: dict[int, str]) -> str:
    if not recorded:
        return "not recorded"
    return audit.COMMAND_LINE if user_id is None else emails.get(user_id, f"user {user_id}")


def signoff_provenance(*, session: Session, signed: list[GateSignoff]) -> dict[int, SignoffProvenance]:
    """Return each sign-off's provenance, by sign-off id."""
    origin = {s.user_id: audit.provenance(session=session, user_id=s.user_id, role=s.role) for s in signed}
    people = {p for o in origin.values() for p in (o.created_by, o.role_granted_by) if p is not None} | set(origin)
    emails = {u.id: u.email for u in session.exec(select(User).where(col(User.id).in_(people))).all() if u.id}
    out: dict[int, SignoffProvenance] = {}
    for s in signed:
        o = origin[s.user_id]
        behind = {p for p in (o.created_by, o.role_granted_by) if p is not None and p != s.user_id}
        others = {x.user_id for x in signed if x.user_id != s.user_id}
        flag: str | None = None
        level: FlagLevel | None = None
        if inside := behind & others:
            who = ", ".join(sorted(emails.get(p, f"user {p}") for p in inside))
            flag, level = f"this account or its role comes from {who}, who also signed this gate: one person holds both ends", "fail"
        else:
            shared = {p for x in others for p in (origin[x].created_by, origin[x].role_granted_by) if p is not None} & behind
            if shared:
                who = ", ".join(sorted(emails.get(p, f"user {p}") for p in shared))
                flag, level = f"{who} set up this account and another signer's: one person set up both ends", "warn"
        out[s.id or 0] = SignoffProvenance(
            created_by=_who(o.created_by, o.recorded, emails),
            role_granted_by=_who(o.role_granted_by, o.recorded, emails),
            flag=flag,
            flag_level=level,
        )
    return out
