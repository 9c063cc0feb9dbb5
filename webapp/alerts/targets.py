"""Where webhook, Slack and email messages may go: public addresses only, unless the operator allows private ones.

An admin types the URL (or the SMTP host), and the server connects to it: without a check that
makes the server a probe of its own network (loopback services, the cloud metadata address
169.254.169.254, the office LAN). So a target must resolve to global addresses only; the operator
lifts this for an in-house receiver with DRAFTDESK_ALERTS_ALLOW_PRIVATE_TARGETS=1.

The check runs twice: when a channel is saved (an address literal or `localhost`: no DNS lookup,
which a test or an offline install could not make), and at every send on the addresses the name
resolves to then (DNS can change after the save). The request then goes to the address that was
checked (the URL's host replaced by it; the Host header and TLS server name keep the name, so the
certificate is still verified against it), never to a second lookup an attacker's DNS could answer
differently.

Issue 41: an address literal is read once, by `literal`, at save and at send, so both see the same
address: the standard forms, and the numeric forms the C resolver also takes (`2130706433`,
`0x7f.1`, `0177.0.0.1`: decimal, hex and octal parts), which would otherwise pass the save as
"names" and reach 127.0.0.1 at send. An IPv6 address that carries an IPv4 address (IPv4-mapped
`::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64
`64:ff9b::/96`, 6to4 `2002::/16`) is public only when that IPv4 address is: each of them routes to
it. Local-use NAT64 (`64:ff9b:1::/48`) is never public.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

ALLOW_SETTING = "DRAFTDESK_ALERTS_ALLOW_PRIVATE_TARGETS=1"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# The prefixes whose low 32 bits are an IPv4 address the packet goes to (RFC 6052, 6145, 4291).
_EMBEDDING_V4 = tuple(
    ipaddress.IPv6Network(n) for n in ("::ffff:0:0/96", "::ffff:0:0:0/96", "::/96", "64:ff9b::/96")
)
# Local-use NAT64 (RFC 8215): a site's own translator, never a public target whatever it carries.
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
# A number (decimal, 0x hex or 0-prefixed octal), up to four of them joined by dots: the IPv4 forms
# inet_aton takes, which the system resolver answers for without asking DNS.
_NUMERIC_V4 = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+))*", re.IGNORECASE)


class TargetRefused(ValueError):
    """A target whose address is not public while private targets are not allowed; the message names the field."""


def embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """Return the IPv4 address an IPv6 address carries (mapped, translated, compatible, NAT64, 6to4), if any."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in _EMBEDDING_V4):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(ip: IPAddress) -> bool:
    """Tell whether an address is globally routable unicast (an IPv6 address carrying an IPv4 one counts as that IPv4)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64:
            return False
        inner = embedded_v4(ip)
        if inner is not None:
            return is_public(inner)
    return ip.is_global and not ip.is_multicast


def literal(host: str) -> IPAddress | None:
    """Return the address a host written as an address stands for (any form the resolver takes), or None for a name."""
    text = host.strip().strip("[]").split("%", 1)[0].rstrip(".")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _NUMERIC_V4.fullmatch(text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            # a number too large for its place: no resolver reads it as an address, and it is no name either
            raise TargetRefused(f"{text} is neither an IPv4 address nor a host name") from None
    return None


def _refused(host: str, field: str) -> TargetRefused:
    return TargetRefused(
        f"{field}: {host} is a loopback, private, link-local or otherwise non-public address; alert targets must be "
        f"public unless the operator sets {ALLOW_SETTING}"
    )


def check_saved_host(host: str, *, field: str = "url") -> None:
    """Refuse, at save time, a host that is a non-public address (in any form) or a name for this machine."""
    name = host.strip().rstrip(".").lower()
    try:
        ip = literal(name)
    except TargetRefused as exc:
        raise TargetRefused(f"{field}: {exc}") from None
    if (ip is not None and not is_public(ip)) or name == "localhost" or name.endswith(".localhost"):
        raise _refused(host, field)


@dataclass(frozen=True)
class Resolved:
    """The addresses a target's name has now, each checked."""

    host: str
    addresses: list[str]


def resolve(host: str, port: int, *, allow_private: bool, field: str = "url") -> Resolved:
    """Resolve a target's host now; refuse it if any address is not public (unless allowed).

    Raises TargetRefused, or OSError when the name does not resolve.
    """
    try:
        address = literal(host)
    except TargetRefused as exc:
        raise TargetRefused(f"{field}: {exc}") from None
    if address is not None:
        found = [str(address)]
    else:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not allow_private and any(not is_public(ipaddress.ip_address(a.split("%", 1)[0])) for a in found):
        # one private answer is enough to refuse: which of them a client would use is not ours to guess
        raise _refused(host, field)
    return Resolved(host, found)
