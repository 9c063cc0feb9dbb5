"""Where webhook and Slack messages may go: public addresses only, unless the operator allows private ones.

An admin types the URL, and the server posts to it: without a check that makes the server a probe
of its own network (loopback services, the cloud metadata address 169.254.169.254, the office
LAN). So a target must resolve to global addresses only; the operator lifts this for an in-house
receiver with DRAFTDESK_ALERTS_ALLOW_PRIVATE_TARGETS=1.

The check runs twice: when a channel is saved (an address literal or `localhost`: no DNS lookup,
which a test or an offline install could not make), and at every send on the addresses the name
resolves to then (DNS can change after the save). The request then goes to the address that was
checked (the URL's host replaced by it; the Host header and TLS server name keep the name, so the
certificate is still verified against it), never to a second lookup an attacker's DNS could answer
differently.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

ALLOW_SETTING = "DRAFTDESK_ALERTS_ALLOW_PRIVATE_TARGETS=1"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(ValueError):
    """A target whose address is not public while private targets are not allowed; the message names the field."""


def is_public(ip: IPAddress) -> bool:
    """Tell whether an address is globally routable unicast (an IPv4-mapped IPv6 address counts as its IPv4)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _refused(host: str) -> TargetRefused:
    return TargetRefused(
        f"url: {host} is a loopback, private, link-local or otherwise non-public address; alert targets must be "
        f"public unless the operator sets {ALLOW_SETTING}"
    )


def check_saved_host(host: str) -> None:
    """Refuse, at save time, a host that is a non-public address literal or a name for this machine."""
    name = host.strip().rstrip(".").lower()
    ip = _literal(name)
    if (ip is not None and not is_public(ip)) or name == "localhost" or name.endswith(".localhost"):
        raise _refused(host)


@dataclass(frozen=True)
class Resolved:
    """The addresses a target's name has now, each checked."""

    host: str
    addresses: list[str]


def resolve(host: str, port: int, *, allow_private: bool) -> Resolved:
    """Resolve a target's host now; refuse it if any address is not public (unless allowed).

    Raises TargetRefused, or OSError when the name does not resolve.
    """
    literal = _literal(host)
    if literal is not None:
        found = [str(literal)]
    else:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not allow_private and any(not is_public(ipaddress.ip_address(a.split("%", 1)[0])) for a in found):
        # one private answer is enough to refuse: which of them a client would use is not ours to guess
        raise _refused(host)
    return Resolved(host, found)
