"""The viewer page: one self-contained HTML file (no server, no network, no CDN), so it opens offline from a
cluster's shared disk.

The data is embedded as gzip + base64 in two inert blocks (the table's rows, then the conversations) that
the page decompresses with the browser's `DecompressionStream`; base64 cannot hold `<`, so no text of the
data can close its block. The page renders every text with `textContent`, never as HTML, and its Content
Security Policy lets only its own script run (by hash) and forbids every connection: model text is
untrusted and never executes.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any

from seal.results.tables import LABEL_COLOURS, OTHER_COLOUR, label_order
from seal.tocf.diagnosis import RULE_WORDS
from seal.tocf.labels import LABEL_MEANINGS
from seal.view.episodes import PageData

ASSETS = files("seal.view") / "assets"


def packed(value: Any) -> str:
    """JSON, gzip-compressed, base64: what the page's `unpack` reads back. A lone surrogate (not Unicode, so
    without UTF-8 form) is written as its JSON escape, which parses back to the same string."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    raw = gzip.compress(text.encode("utf-8", errors="backslashreplace"), compresslevel=9, mtime=0)
    return base64.b64encode(raw).decode("ascii")


def page_html(data: PageData, title: str) -> str:
    """The whole page for `data`."""
    labels = label_order(label for row in data.rows for label in row["labels"])
    index = {
        "title": title,
        "sources": data.sources,
        "rows": data.rows,
        "labels": labels,
        "colours": {label: LABEL_COLOURS.get(label, OTHER_COLOUR) for label in labels},
        "meanings": {label: LABEL_MEANINGS.get(label, "a label this SEAL does not know") for label in labels},
        "rules": RULE_WORDS,
    }
    details = {"texts": data.texts.items, "details": data.details}
    script = (ASSETS / "viewer.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:"
    template = (ASSETS / "viewer.html").read_text(encoding="utf-8")
    parts = {
        "POLICY": policy,
        "TITLE": html.escape(title),
        "STYLE": (ASSETS / "viewer.css").read_text(encoding="utf-8"),
        "INDEX": packed(index),
        "DETAILS": packed(details),
        "SCRIPT": script,
    }
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda marker: parts[marker.group(1)], template)


def write_page(data: PageData, title: str, out: Path) -> int:
    """Write the page to `out` (through a temporary file, so a reader never sees half of it, removed when
    the write fails: a full disk leaves nothing behind); its size."""
    text = page_html(data, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return out.stat().st_size
