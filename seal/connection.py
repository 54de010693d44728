"""A connection the other side refused, told apart from one that timed out.

httpx reports a refused connect as `ConnectError: All connection attempts failed`, and the aiohttp transport
the environment client uses as `ConnectTimeout`: neither says that nothing listens at the address. The OS's
`ConnectionRefusedError` is among the causes of both; a refused connection is named as such, with what to
check.
"""

from __future__ import annotations


def is_refused(exc: BaseException) -> bool:
    """True when `exc`, or an exception it was raised from, is the OS refusing the connection."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ConnectionRefusedError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def refused_at(url: str, what: str) -> str:
    """The one-line reason for a refused connection to `url` (shown masked), `what` naming the server."""
    return f"connection refused at {url}: is {what} running?"
