"""URLs as SEAL shows them: credentials a URL carries never reach a message, a log, a file or a summary.

`http://user:pw@host/v1` is shown as `http://***@host/v1`, and the value of a query parameter whose
name says it is a secret (`?api_key=...`, `token`, `password`, `sig`...) as `***`. The URL itself, with
its credentials, is still what the client uses.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

MASK = "***"
SECRET_PARAMETER = re.compile(r"key|token|secret|pass|pwd|auth|sig|credential", re.IGNORECASE)
URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
"""A URL inside free text (a command line, an override, a YAML dump): up to a space or a quote."""


def masked_url(url: str) -> str:
    """`url` with its user:password and secret query values replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(_masked_parameter(item) for item in parts.query.split("&")) if parts.query else ""
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def masked_text(text: str) -> str:
    """`text` with every URL in it masked (`masked_url`): for command lines, overrides and config dumps."""
    return URL_IN_TEXT.sub(lambda match: masked_url(match.group()), text)


def masked_values(value: Any) -> Any:
    """A copy of a JSON-like value (mappings, lists, strings) with every URL in its strings masked."""
    if isinstance(value, str):
        return masked_text(value)
    if isinstance(value, Mapping):
        return {key: masked_values(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [masked_values(item) for item in value]
    return value


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without its user:password, and that pair (decoded) or None: for clients whose transport
    refuses credentials written into the URL beside an Authorization header (aiohttp)."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return bare, (unquote(parts.username), unquote(parts.password or ""))


def url_secrets(url: str) -> list[str]:
    """The credentials written into `url` (its user:password, the password, their HTTP Basic encoding and
    secret query values), longest first, for masking them in text a server or a library wrote (an echoed
    request header, an exception)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    found = [parts.netloc.rsplit("@", 1)[0]] if "@" in parts.netloc else []
    if parts.password:
        found.append(parts.password)
    if parts.username is not None:
        basic = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        found.append(base64.b64encode(basic.encode()).decode())
    for item in parts.query.split("&") if parts.query else ():
        name, _, value = item.partition("=")
        if value and SECRET_PARAMETER.search(name):
            found.append(value)
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


def _masked_parameter(item: str) -> str:
    name, equals, value = item.partition("=")
    return f"{name}={MASK}" if equals and value and SECRET_PARAMETER.search(name) else item
