"""Hostile tool-call values on every environment backend: each must come back as a scored action.

A probe is one model reply carrying a value that is hard to represent or to parse: integers beyond 64 bits
or past Python's 4,300-digit limit, lone UTF-16 surrogates in a tool name, an argument or a key, JSON
nested 60,000 deep, the same as the Python literals llama3_json reads where JSON fails, a set argument,
thousands of malformed calls beside 120 well-formed ones in one message (the rejection names 16 of its
problems, and each call's evidence holds that text), python_list expressions thousands of links long,
messages longer than the 131,072 characters an action may have (seal/env/action_limit.py); and, in an
episode with MathAPI, single calls that would compute for minutes (stopped at `ToolBudget.max_call_s`, 1 s
by default: seal/bfcl/call_deadline.py) and a result past Python's 4,300 digits (the tool's error). Each
is the first step of an episode (in both modes), which is then finished, on the in-process store, the HTTP
service and Ray environment actors. A probe passes when the step answers as expected (an error observation
the model reads, the call stopped, or, for a value that is legitimately executable, the call executed),
the episode scores 0 with a result of at most `RESULT_BOUND_CHARS` characters of JSON, step and finish
each answer within `BOUND_S`, and the answers equal the in-process store's. The first table counts, per
backend, what the agent loop would have turned into a failure: 5xx answers, other refusals (each an
`env_error` trajectory) and exceptions; the second gives the MathAPI probes' slowest step and finish
seconds (of the two modes) per backend.

A run takes about a minute: each stopped call waits out its deadline (4 calls, 2 modes, 3 backends and
the kept-alive connection: ~30 s), the HTTP service and the Ray start, ~10 s each.

    python benchmarks/hostile_probes.py                       # all three backends (a Ray of its own starts)
    python benchmarks/hostile_probes.py --backends inprocess,http --json probes.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from tqdm import tqdm

from seal.env.action_limit import MAX_ACTION_CHARS
from seal.env.client import EnvClient, EnvServiceError, InProcessEnvClient, open_episode
from seal.protocol.base import ERROR_PREFIX

TASK = "multi_turn_base_0"
"""A task whose tools include `ls(a: bool)`, `cd(folder: str)` and `echo(content: str)`."""
MATH_TASK = "multi_turn_base_15"
"""A training task whose tools include MathAPI (with GorillaFileSystem)."""
MODES = ("train", "eval")
BACKENDS = ("inprocess", "http", "ray")
RAY_TIMEOUT_S = 60.0
"""How long a Ray actor's answer may take (the HTTP client's timeout, as training's Ray client has)."""
BIG = "99999999999999999999"
"""20 digits: beyond both the signed and the unsigned 64-bit range."""
INT64_MAX = str(2**63 - 1)
TOO_MANY_DIGITS = "9" * 4301
DEEP = 60_000
"""Nesting depth of the deep-JSON probes: past any recursion limit, within the 131,072-character action."""
LINKS = 2_000
OVER_LONG = "x" * (MAX_ACTION_CHARS + 1)
ESCAPED_OVER_LONG = "\x01" * (MAX_ACTION_CHARS + 1)
"""A control character is 6 bytes JSON-escaped: the longest body a SEAL client sends, under 1 MiB."""
BOUND_S = 3.0
RESULT_BOUND_CHARS = 4 * MAX_ACTION_CHARS
"""The most JSON an episode of one hostile message may finish with: the message kept, what it was told and
its calls' evidence, never copies of the message's text per call (before the bound on a rejection's text,
one message finished as 490 MB)."""
"""Seconds a probe's step, and its finish, may take: a stopped call answers in about its 1 s deadline."""
STOPPED = "was stopped"
TOO_MANY_DIGITS_SHOWN = "digits a number may show"
Expect = Literal["rejected", "stopped", "executed", "answer"]


@dataclass(frozen=True)
class Probe:
    name: str
    protocol: str
    text: str
    expect: Expect
    """`rejected`: one error observation, nothing executed; `stopped`: the call was refused by the tool
    (stopped at its deadline), nothing changed; `executed`: the call ran; `answer`: plain text."""
    task: str = TASK
    says: str = ""
    """Text the observation must hold."""

    @property
    def raw_surrogate(self) -> bool:
        """The text itself holds a lone surrogate: SEAL's clients send it as U+FFFD; sent as it is (a JSON
        `\\ud800` escape), only a broken client's body, which the service refuses with 422."""
        return any(0xD800 <= ord(char) <= 0xDFFF for char in self.text)


def _qwen(payload: str) -> str:
    return f"<tool_call>\n{payload}\n</tool_call>"


def _math(name: str, call: str, expect: Expect, says: str) -> Probe:
    """A python_list probe of one MathAPI call, in an episode whose task has MathAPI."""
    return Probe(name, "python_list", f"[{call}]", expect, task=MATH_TASK, says=says)


PROBES: tuple[Probe, ...] = (
    Probe("big int", "qwen_fc", _qwen(f'{{"name": "ls", "arguments": {{"a": {BIG}}}}}'), "rejected"),
    Probe(
        "negative big int", "qwen_fc", _qwen(f'{{"name": "ls", "arguments": {{"a": -{BIG}}}}}'), "rejected"
    ),
    Probe(
        "big int, nested",
        "qwen_fc",
        _qwen(f'{{"name": "echo", "arguments": {{"content": [[{BIG}]]}}}}'),
        "rejected",
    ),
    Probe(
        "big int in string arguments",
        "qwen_fc",
        _qwen(json.dumps({"name": "ls", "arguments": f'{{"a": {BIG}}}'})),
        "rejected",
    ),
    Probe(
        "4301-digit int",
        "qwen_fc",
        _qwen(f'{{"name": "ls", "arguments": {{"a": {TOO_MANY_DIGITS}}}}}'),
        "rejected",
    ),
    Probe("64-bit int", "qwen_fc", _qwen(f'{{"name": "ls", "arguments": {{"a": {INT64_MAX}}}}}'), "executed"),
    Probe("surrogate in name", "qwen_fc", _qwen('{"name": "ls\\ud800", "arguments": {}}'), "rejected"),
    Probe(
        "surrogate in argument",
        "qwen_fc",
        _qwen('{"name": "cd", "arguments": {"folder": "\\udfff"}}'),
        "rejected",
    ),
    Probe("surrogate in key", "qwen_fc", _qwen('{"name": "ls", "arguments": {"\\ud800": true}}'), "rejected"),
    Probe(
        "surrogate, nested",
        "qwen_fc",
        _qwen('{"name": "echo", "arguments": {"content": {"x": ["\\ud83d"]}}}'),
        "rejected",
    ),
    Probe(
        "surrogate pair",
        "qwen_fc",
        _qwen('{"name": "echo", "arguments": {"content": "\\ud83d\\ude00"}}'),
        "executed",
    ),
    Probe(
        "deep JSON",
        "qwen_fc",
        _qwen('{"name": "ls", "arguments": {"a": ' + "[" * DEEP + "]" * DEEP + "}}"),
        "rejected",
    ),
    Probe(
        "raw surrogate in a call",
        "qwen_fc",
        _qwen('{"name": "cd", "arguments": {"folder": "\ud800"}}'),
        "executed",
    ),
    Probe("raw surrogate in plain text", "qwen_fc", "All done \udc80.", "answer"),
    Probe("big int", "llama3_json", f'{{"name": "ls", "parameters": {{"a": {BIG}}}}}', "rejected"),
    Probe(
        "4301-digit int",
        "llama3_json",
        f'{{"name": "ls", "parameters": {{"a": {TOO_MANY_DIGITS}}}}}',
        "rejected",
    ),
    Probe("64-bit int", "llama3_json", f'{{"name": "ls", "parameters": {{"a": {INT64_MAX}}}}}', "executed"),
    Probe("surrogate in name", "llama3_json", '{"name": "\\udc00ls", "parameters": {}}', "rejected"),
    Probe(
        "surrogate in argument",
        "llama3_json",
        '[{"name": "cd", "parameters": {"folder": "a\\ud800"}}]',
        "rejected",
    ),
    Probe("deep JSON", "llama3_json", "[" * DEEP + "]" * DEEP, "rejected"),
    Probe(
        "big int, Python literal",
        "llama3_json",
        f"{{'name': 'ls', 'parameters': {{'a': {BIG}}}}}",
        "rejected",
    ),
    Probe(
        "4301-digit int, Python literal",
        "llama3_json",
        f"{{'name': 'ls', 'parameters': {{'a': {TOO_MANY_DIGITS}}}}}",
        "rejected",
    ),
    Probe(
        "surrogate, Python literal",
        "llama3_json",
        "{'name': 'cd', 'parameters': {'folder': '\\ud800'}}",
        "rejected",
    ),
    Probe(
        "unary chain, Python literal",
        "llama3_json",
        "{'name': 'ls', 'parameters': {'a': " + "-" * 800 + "1}}",
        "rejected",
    ),
    Probe("deep Python literal", "llama3_json", "{'a': " + "[" * DEEP + "]" * DEEP + "}", "rejected"),
    Probe(
        "set argument, Python literal",
        "llama3_json",
        "{'name': 'cd', 'parameters': {'folder': {'a', 'b'}}}",
        "rejected",
    ),
    Probe("big int", "python_list", f"[ls(a={BIG})]", "rejected"),
    Probe("negative big int", "python_list", f"[ls(a=-{BIG})]", "rejected"),
    Probe("big int, nested", "python_list", f"[echo(content={{'x': [{BIG}]}})]", "rejected"),
    Probe("4301-digit int", "python_list", f"[ls(a={TOO_MANY_DIGITS})]", "rejected"),
    Probe("64-bit int", "python_list", f"[ls(a={INT64_MAX})]", "executed"),
    Probe("surrogate in argument", "python_list", "[cd(folder='\\ud800')]", "rejected"),
    Probe("surrogate in key", "python_list", "[echo(content={'\\udfff': 1})]", "rejected"),
    Probe("attribute chain", "python_list", "[" + "x." * LINKS + "f()]", "rejected"),
    Probe("unary chain", "python_list", "[" + "-" * 800 + "1]", "rejected"),
    Probe("call chain", "python_list", "[f" + "()" * LINKS + "]", "rejected"),
    Probe("subscript chain", "python_list", "[f" + "[0]" * LINKS + "]", "rejected"),
    Probe("deep list argument", "python_list", "[ls(a=" + "[" * DEEP + "]" * DEEP + ")]", "rejected"),
    Probe(
        "over-long call",
        "qwen_fc",
        _qwen(json.dumps({"name": "echo", "arguments": {"content": OVER_LONG}})),
        "rejected",
    ),
    Probe("over-long answer", "python_list", OVER_LONG, "rejected"),
    Probe(
        "thousands of malformed calls",
        "qwen_fc",
        _qwen('{"name": "ls", "arguments": {}}') * 120 + _qwen('{"x": 1}') * 3_000,
        "rejected",
    ),
    Probe(
        "thousands of malformed calls",
        "llama3_json",
        '{"name": "ls", "parameters": {}}\n' * 120 + "{}\n" * 30_000,
        "rejected",
    ),
    Probe("over-long, escaped", "llama3_json", ESCAPED_OVER_LONG, "rejected"),
    _math("logarithm to 250,000 digits", "logarithm(value=2, base=10, precision=250000)", "stopped", STOPPED),
    _math("square root to 10^6 digits", "square_root(number=2, precision=1000000)", "stopped", STOPPED),
    _math("square root to 10^7 digits", "square_root(number=2, precision=10000000)", "stopped", STOPPED),
    _math("3^(10^8)", "power(base=3, exponent=100000000)", "stopped", STOPPED),
    _math("10^5000", "power(base=10, exponent=5000)", "executed", TOO_MANY_DIGITS_SHOWN),
)


@dataclass
class Outcome:
    """What one backend answered to one probe in one mode; `failure` is empty when it answered at all."""

    probe: Probe
    mode: str
    step: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    failure: Literal["", "5xx", "env_error", "exception"] = ""
    detail: str = ""
    step_s: float = 0.0
    finish_s: float = 0.0

    def problem(self) -> str:
        """Why the probe did not come back as the scored action it must be; "" when it did."""
        if self.failure:
            return f"{self.failure}: {self.detail}"
        step, result = self.step or {}, self.result or {}
        info = step.get("info", {})
        observation = step.get("observation", [])
        result_chars = len(json.dumps(result))
        if result_chars > RESULT_BOUND_CHARS:
            return f"the episode result holds {result_chars:,} characters of JSON"
        if self.probe.says not in "".join(message["content"] for message in observation):
            return f"the observation does not say {self.probe.says!r}: {observation!r:.200}"
        if self.probe.expect == "rejected":
            rejected = len(observation) == 1 and observation[0]["content"].startswith(ERROR_PREFIX)
            if not rejected or info.get("accepted") or not info.get("rejected"):
                return f"not rejected with an error observation: {observation!r:.200}"
        elif self.probe.expect == "stopped" and (info.get("accepted") or not info.get("rejected")):
            return f"not refused by the tool: {info!r:.200}"
        elif self.probe.expect == "executed" and not info.get("accepted"):
            return f"not executed: {info!r:.200}"
        elif self.probe.expect == "answer" and not info.get("turn_ended"):
            return f"not read as a plain-text answer: {info!r:.200}"
        if result.get("reward") != 0.0:
            return f"scored {result.get('reward')!r}, not 0"
        return ""

    def late(self, bound: float = BOUND_S) -> str:
        """How the step or the finish took longer than `bound` seconds; "" when neither did."""
        took = {"step": self.step_s, "finish": self.finish_s}
        return ", ".join(f"{part} took {seconds:.1f} s" for part, seconds in took.items() if seconds > bound)


async def play(client: EnvClient, probe: Probe, mode: str) -> Outcome:
    """The probe as an episode's first step, then the episode finished (and closed)."""
    outcome = Outcome(probe, mode)
    try:
        async with open_episode(client, probe.task, mode, probe.protocol) as episode:
            started = time.perf_counter()
            outcome.step = await episode.step(probe.text)
            outcome.step_s = time.perf_counter() - started
            started = time.perf_counter()
        outcome.finish_s = time.perf_counter() - started
        outcome.result = episode.result.to_json() if episode.result else None
    except EnvServiceError as exc:
        outcome.failure = "5xx" if exc.status >= 500 else "env_error"
        outcome.detail = str(exc)
    except Exception as exc:
        outcome.failure, outcome.detail = "exception", f"{type(exc).__name__}: {exc}"
    return outcome


async def play_all(client: EnvClient, backend: str, progress: bool = True) -> list[Outcome]:
    cases = [(probe, mode) for probe in PROBES for mode in MODES]
    bar = tqdm(cases, desc=backend, unit="probe", disable=not progress or None, file=sys.stderr)
    return [await play(client, probe, mode) for probe, mode in bar]


def differs(outcome: Outcome, reference: Outcome) -> bool:
    return (outcome.step, outcome.result) != (reference.step, reference.result)


@dataclass
class Tally:
    probes: int = 0
    scored: int = 0
    failures: dict[str, int] = field(default_factory=lambda: {"5xx": 0, "env_error": 0, "exception": 0})
    differing: int = 0

    def row(self, backend: str) -> str:
        counts = " | ".join(str(self.failures[kind]) for kind in ("5xx", "env_error", "exception"))
        return f"| {backend} | {self.probes} | {self.scored} | {counts} | {self.differing} |"


def tally(outcomes: Sequence[Outcome], reference: Sequence[Outcome]) -> Tally:
    counted = Tally(probes=len(outcomes))
    for outcome, expected in zip(outcomes, reference, strict=True):
        counted.scored += not outcome.problem()
        if outcome.failure:
            counted.failures[outcome.failure] += 1
        counted.differing += differs(outcome, expected)
    return counted


def table(results: dict[str, list[Outcome]]) -> str:
    """Markdown: per backend, probes, scored as expected, failures by kind, answers unlike in-process."""
    reference = results["inprocess"]
    lines = [
        "| backend | probes | scored as expected | 5xx | env_error | exceptions | unlike in-process |",
        "|---|---|---|---|---|---|---|",
        *(tally(outcomes, reference).row(backend) for backend, outcomes in results.items()),
    ]
    return "\n".join(lines) + "\n"


def seconds_table(results: dict[str, list[Outcome]]) -> str:
    """Markdown: per MathAPI probe and backend, its slowest step and finish seconds over the modes."""
    slowest: dict[tuple[str, str], tuple[float, float]] = {}
    for backend, outcomes in results.items():
        for o in outcomes:
            if o.probe.task == MATH_TASK:
                step_s, finish_s = slowest.get((o.probe.name, backend), (0.0, 0.0))
                slowest[o.probe.name, backend] = (max(step_s, o.step_s), max(finish_s, o.finish_s))
    names = dict.fromkeys(name for name, _ in slowest)
    lines = [
        "| MathAPI probe | " + " | ".join(f"{backend} step / finish s" for backend in results) + " |",
        "|---" * (len(results) + 1) + "|",
        *(
            f"| {name} | "
            + " | ".join("{:.2f} / {:.2f}".format(*slowest[name, backend]) for backend in results)
            + " |"
            for name in names
        ),
    ]
    return "\n".join(lines) + "\n"


class ConnectionDropped(RuntimeError):
    """The service closed the keep-alive connection a client was using."""


class OneConnection:
    """JSON requests on one keep-alive HTTP/1.1 connection (`http.client`, which reconnects silently):
    `ConnectionDropped` as soon as an answer closes it or the server drops it."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.connection.connect()
        self.socket = self.connection.sock
        self.served = 0

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        try:
            self.connection.request(method, path, body=data, headers={"content-type": "application/json"})
            response = self.connection.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ConnectionDropped(f"{method} {path}: {type(exc).__name__}") from exc
        if response.getheader("connection") == "close" or self.connection.sock is not self.socket:
            raise ConnectionDropped(f"{method} {path} answered {response.status} and closed the connection")
        self.served += 1
        return response.status, json.loads(answer) if answer else None


def keep_alive_probes(url: str) -> tuple[int, list[int]]:
    """Every probe created, stepped and finished (train mode) on one connection, its text sent as it is:
    (requests that connection served, each probe's step status in `PROBES` order)."""
    line = OneConnection(url)
    statuses = []
    for probe in PROBES:
        body = {"task_id": probe.task, "mode": "train", "protocol": probe.protocol}
        path = f"/episodes/{line.request('POST', '/episodes', body)[1]['episode_id']}"
        statuses.append(line.request("POST", f"{path}/step", {"action": probe.text})[0])
        line.request("POST", f"{path}/finish?close=true")
    return line.served, statuses


def expected_status(probe: Probe) -> int:
    return 422 if probe.raw_surrogate else 200


@contextlib.asynccontextmanager
async def backend_client(backend: str) -> AsyncIterator[tuple[EnvClient, str | None]]:
    """The backend's client and, for HTTP, the service's URL: a fresh store, a service child process, or a
    local Ray with one environment actor."""
    if backend == "inprocess":
        yield InProcessEnvClient(), None
    elif backend == "http":
        from seal.env.client import HttpEnvClient
        from seal.env.process import running_service

        with running_service(["--log-level", "warning"]) as service:
            async with HttpEnvClient(service.url) as client:
                yield client, service.url
    else:
        from seal.env.ray_actors import local_fleet
        from seal.env.store import StoreSettings

        # A Ray of its own (`address="local"`), never one already running on the machine or named by
        # RAY_ADDRESS; its fleet and the Ray end with the block.
        with local_fleet(StoreSettings(), per_node=1, timeout=RAY_TIMEOUT_S) as client:
            yield client, None


@dataclass
class Report:
    results: dict[str, list[Outcome]] = field(default_factory=dict)
    keep_alive: tuple[int, list[int]] | None = None
    """HTTP only: requests one connection served, and each probe's step status on it."""
    dropped: str = ""
    """HTTP only: how the service dropped that connection, when it did."""


async def run(backends: Sequence[str]) -> Report:
    report = Report()
    for backend in ("inprocess", *(b for b in backends if b != "inprocess")):
        async with backend_client(backend) as (client, url):
            report.results[backend] = await play_all(client, backend)
            if url is not None:
                try:
                    report.keep_alive = await asyncio.to_thread(keep_alive_probes, url)
                except ConnectionDropped as exc:
                    report.dropped = str(exc)
    return report


def problems(report: Report, bound: float = BOUND_S) -> list[str]:
    """One line per probe that did not come back as it must (or within `bound` seconds), on a backend or on
    the kept-alive connection."""
    reference = report.results["inprocess"]
    found = [
        f"{backend}: {o.probe.protocol} {o.probe.name} ({o.mode}): {o.problem() or 'unlike in-process'}"
        for backend, outcomes in report.results.items()
        for o, ref in zip(outcomes, reference, strict=True)
        if o.problem() or differs(o, ref)
    ]
    found += [
        f"{backend}: {o.probe.protocol} {o.probe.name} ({o.mode}): {o.late(bound)}"
        for backend, outcomes in report.results.items()
        for o in outcomes
        if o.late(bound)
    ]
    if report.dropped:
        found.append(f"http, one connection: dropped at {report.dropped}")
    if report.keep_alive is not None:
        found += [
            f"http, one connection: {probe.protocol} {probe.name}: {status}, not {expected_status(probe)}"
            for probe, status in zip(PROBES, report.keep_alive[1], strict=True)
            if status != expected_status(probe)
        ]
    return found


def _backends(text: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in BACKENDS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"backends are a comma-separated subset of {','.join(BACKENDS)}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backends",
        type=_backends,
        default=list(BACKENDS),
        help="default: inprocess,http,ray (in-process always runs: it is the reference)",
    )
    parser.add_argument("--json", type=Path, help="also write every outcome to this JSON file")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=BOUND_S,
        help="a step or finish slower than this is a problem (the bound on an idle machine; "
        "default: %(default)s)",
    )
    args = parser.parse_args(argv)
    report = asyncio.run(run(args.backends))
    print(table(report.results), end="")
    print(f"\n{seconds_table(report.results)}", end="")
    if report.keep_alive is not None:
        served, statuses = report.keep_alive
        counts = ", ".join(f"{n} x {status}" for status, n in sorted(Counter(statuses).items()))
        print(f"http: one keep-alive connection served all {served} requests (steps: {counts})")
    found = problems(report, args.max_seconds)
    for line in found:
        print(line)
    if args.json is not None:
        rows = {
            backend: [
                {
                    "protocol": o.probe.protocol,
                    "probe": o.probe.name,
                    "mode": o.mode,
                    "problem": o.problem(),
                    "step_s": round(o.step_s, 3),
                    "finish_s": round(o.finish_s, 3),
                }
                for o in outcomes
            ]
            for backend, outcomes in report.results.items()
        }
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
