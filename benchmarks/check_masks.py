"""Check traced trajectories (`seal.rollout.trace_dir`): the trained tokens are the sampled ones.

Each maximal run of `response_mask` 1 must decode to one sampled text (what the model produced,
its end-of-turn token included), in order; each run of mask 0 after the prompt must decode to exactly
what the model's chat template renders for one environment observation after a finished assistant turn:
the template's separator after the end-of-turn token (ChatML's newline after `<|im_end|>`, nothing
after Llama-3's `<|eot_id|>`), the observation's turns, then the assistant header. Prints a table and
one trajectory bracketed as `[[S: sampled]]` / `[[E: environment]]`; exits 1 with one line per failing
trajectory.

    python benchmarks/check_masks.py TRACE_DIR MODEL_DIR [--show N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

PROMPT_TAIL = 200
PROBE = [
    {"role": "system", "content": "probe system"},
    {"role": "user", "content": "probe user"},
    {"role": "assistant", "content": "probe reply"},
]


def read_traces(trace_dir: Path) -> list[dict[str, Any]]:
    files = sorted(trace_dir.glob("trajectories.*.jsonl"))
    if not files:
        raise ValueError(f"no trajectories.*.jsonl under {trace_dir}")
    return [json.loads(line) for path in files for line in path.read_text().splitlines() if line.strip()]


def mask_runs(ids: list[int], mask: list[int]) -> list[tuple[int, list[int]]]:
    """Maximal runs of equal mask bits: (bit, token ids)."""
    if len(ids) != len(mask):
        raise ValueError(f"{len(ids)} response ids but {len(mask)} mask bits")
    runs: list[tuple[int, list[int]]] = []
    for token, bit in zip(ids, mask, strict=True):
        if runs and runs[-1][0] == bit:
            runs[-1][1].append(token)
        else:
            runs.append((bit, [token]))
    return runs


class TemplateGlue:
    """What the model's chat template writes around an observation that follows a finished assistant turn."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.prefix = self.render(PROBE, add_generation_prompt=False)
        end = tokenizer.eos_token
        if not end or end not in self.prefix:
            raise ValueError(f"the chat template does not end an assistant turn with {end!r}")
        self.separator = self.prefix[self.prefix.rindex(end) + len(end) :]

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def expected(self, observation: list[dict[str, Any]]) -> str:
        """The separator, the observation's turns and the next assistant header, as rendered."""
        full = self.render([*PROBE, *observation], add_generation_prompt=True)
        if not full.startswith(self.prefix):
            raise ValueError("the chat template re-renders earlier turns when a message is appended")
        return self.separator + full[len(self.prefix) :]


def check(trace: dict[str, Any], tokenizer: Any, glue: TemplateGlue) -> str:
    """The reason the trajectory fails, or "" when it holds."""
    runs = mask_runs(trace["response_ids"], trace["response_mask"])
    sampled = [tokenizer.decode(ids) for bit, ids in runs if bit == 1]
    context = [tokenizer.decode(ids) for bit, ids in runs if bit == 0]
    expected, observations = trace["sampled_texts"], trace["observations"]
    truncated = trace["truncated"]
    if not expected:
        return "" if not sampled else f"{len(sampled)} mask-1 run(s) but nothing was sampled"
    if len(sampled) != len(expected):
        return f"{len(sampled)} mask-1 runs but {len(expected)} sampled texts"
    for i, (got, want) in enumerate(zip(sampled, expected, strict=True)):
        cut_here = truncated and i == len(expected) - 1
        if got != want and not (cut_here and want.startswith(got)):
            return f"mask-1 run {i} is {got[:60]!r}, sampled text was {want[:60]!r}"
    if len(context) > len(observations) or len(context) < len(observations) - int(truncated):
        return f"{len(context)} mask-0 runs after the prompt but {len(observations)} observations"
    for i, (got, observation) in enumerate(zip(context, observations, strict=False)):
        cut_here = truncated and i == len(context) - 1 and runs[-1][0] == 0
        if cut_here:
            continue
        want = glue.expected(observation)
        if got != want:
            at = next((k for k, pair in enumerate(zip(got, want, strict=False)) if pair[0] != pair[1]), None)
            at = min(len(got), len(want)) if at is None else at
            return (
                f"mask-0 run {i} leaves the template at char {at}: {got[at:][:30]!r}, not {want[at:][:30]!r}"
            )
    return ""


def bracketed(trace: dict[str, Any], tokenizer: Any) -> str:
    prompt = tokenizer.decode(trace["prompt_ids"])
    parts = [f"[[PROMPT: ...{prompt[-PROMPT_TAIL:]}]]"]
    for bit, ids in mask_runs(trace["response_ids"], trace["response_mask"]):
        parts.append(f"[[{'S' if bit else 'E'}: {tokenizer.decode(ids)}]]")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace_dir", type=Path)
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--show", type=int, default=1, help="trajectories to print bracketed (default 1)")
    args = parser.parse_args(argv)
    try:
        traces = read_traces(args.trace_dir)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer  # here: seconds to import, and --help needs none of it

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    try:
        glue = TemplateGlue(tokenizer)
    except ValueError as exc:
        print(f"error: {args.model_dir}: {exc}", file=sys.stderr)
        return 2
    failures: list[str] = []
    print(f"{'trajectory':<40} {'calls':>5} {'mask-1':>7} {'mask-0':>7}  ok")
    for i, trace in enumerate(traces):
        name = f"{i}:{trace['task_id']}/{trace['mode']}"
        reason = check(trace, tokenizer, glue)
        ones = sum(trace["response_mask"])
        zeros = len(trace["response_mask"]) - ones
        print(
            f"{name:<40} {len(trace['sampled_texts']):>5} {ones:>7} {zeros:>7}  {'no' if reason else 'yes'}"
        )
        if reason:
            failures.append(f"{name}: {reason}")
    for trace in traces[: args.show]:
        print(f"\n{trace['task_id']}/{trace['mode']}:\n{bracketed(trace, tokenizer)}")
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    print(f"\n{len(traces) - len(failures)}/{len(traces)} trajectories ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
