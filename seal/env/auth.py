"""The shared token of a service bound beyond loopback: where both ends read it and how it travels.

A service on loopback answers only its own node and needs no token. One bound beyond it (`--host
0.0.0.0` for an HTTP multi-node set-up) answers the network, so it requires every request to carry
the token the operator put in `SEAL_ENV_TOKEN`; `HttpEnvClient` sends the same variable's value.
The token is read from the environment, never from a flag (flags show in `ps`), and never logged.
"""

from __future__ import annotations

import ipaddress
import os
import socket

TOKEN_ENV = "SEAL_ENV_TOKEN"
TOKEN_HEADER = "x-seal-env-token"


def is_loopback(host: str) -> bool:
    """Whether `host` names only this node: `localhost` (any case, a trailing dot too) or a loopback
    address in any spelling (127.0.0.0/8 as `127.0.0.1`, `127.1` or `0x7f.1`; `::1` however written;
    `::ffff:127.0.0.1`, IPv4-mapped). Any other name or address is not."""
    if host.lower().rstrip(".") == "localhost":
        return True
    address = ip_literal(host)
    if address is None:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `host` writes literally, in any form the resolver reads as one (`127.1`, `0x7f.1` are
    127.0.0.1), or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def token_from_environment() -> str | None:
    """`$SEAL_ENV_TOKEN`, or None when it is unset or blank."""
    return os.environ.get(TOKEN_ENV, "").strip() or None
