"""The shared token of a service bound beyond loopback: where both ends read it and how it travels.

A service on loopback answers only its own node and needs no token. One bound beyond it (`--host
0.0.0.0` for an HTTP multi-node set-up) answers the network, so it requires every request to carry
the token the operator put in `SEAL_ENV_TOKEN`; `HttpEnvClient` sends the same variable's value.
The token is read from the environment, never from a flag (flags show in `ps`), and never logged.
"""

from __future__ import annotations

import ipaddress
import os

TOKEN_ENV = "SEAL_ENV_TOKEN"
TOKEN_HEADER = "x-seal-env-token"


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1); a name or any other address is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_from_environment() -> str | None:
    """`$SEAL_ENV_TOKEN`, or None when it is unset or blank."""
    return os.environ.get(TOKEN_ENV, "").strip() or None
