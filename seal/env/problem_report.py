"""What a rejected message is told, bounded, whatever the message holds.

One message of `MAX_ACTION_CHARS` characters can hold thousands of malformed calls (a nameless `{}` takes
two characters), and the released code's wording lists every problem: 30,000 of them made a 2 MB
observation and, copied into each call's evidence, an episode result of 490 MB of JSON. A rejection
reports the first `MAX_REPORTED_PROBLEMS` problems, each cut at `MAX_PROBLEM_CHARS` characters, then how
many more there were; a message with fewer, shorter problems reads exactly as the released code words it.
"""

from __future__ import annotations

from collections.abc import Sequence

MAX_REPORTED_PROBLEMS = 16
MAX_PROBLEM_CHARS = 240


def problem_text(problem: str) -> str:
    """`problem` cut at `MAX_PROBLEM_CHARS` characters: a name or key the model wrote may be 100,000 long."""
    return problem if len(problem) <= MAX_PROBLEM_CHARS else f"{problem[:MAX_PROBLEM_CHARS]}..."


def reported_problems(problems: Sequence[str]) -> list[str]:
    """The problems a rejection names: the first `MAX_REPORTED_PROBLEMS`, then `... (+N more)`."""
    shown = [problem_text(problem) for problem in problems[:MAX_REPORTED_PROBLEMS]]
    if len(problems) > MAX_REPORTED_PROBLEMS:
        shown.append(f"... (+{len(problems) - MAX_REPORTED_PROBLEMS} more)")
    return shown
