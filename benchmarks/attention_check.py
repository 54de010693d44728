"""Check `torch_varlen` against padded `sdpa` on one real batch: log-probabilities, gradients and timings.

    python benchmarks/attention_check.py MODEL_DIR [--tasks 8] [--max-length 8192] [--repeats 3]

The batch is a few BFCL tasks (evenly spread over the split, so every category is in it): each task's
opening prompt and its ground-truth replies, played through an episode so the tool results are the real
ones, rendered with the model's chat template. The model computes every token's log-probability twice:
packed into one (1, T) row with positions restarting at 0 per sequence, on `torch_varlen`
(`seal.trainer.attention`, torch's own FlashAttention-2 kernels, what training uses without flash-attn),
and padded to the longest sequence with a 2-D mask, on `sdpa` (what training fell back to before). It prints
the tokens each way computes, forward and forward+backward times (median of `--repeats` after a warm-up),
the largest and mean absolute difference of the log-probabilities, and of the gradients of their mean (with
gradient checkpointing, as verl trains). Exit 1 when a value is not finite or the mean log-prob difference
exceeds `--max-mean-diff`.

Needs a CUDA GPU of sm80 or newer, torch 2.10+, transformers 5 and the project on PYTHONPATH (bfcl-eval for
the tasks); not verl.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from seal.bfcl.tasks import split_ids
from seal.env.episode import Episode
from seal.protocol.ground_truth import ground_truth_actions
from seal.trainer.launch.kernel import TORCH_VARLEN

if TYPE_CHECKING:  # torch and transformers are imported where used: --help answers without them
    import torch
    from transformers import PreTrainedModel

PADDED = "sdpa"


@dataclass
class Pass:
    """One way of computing the batch's log-probabilities, and what it cost."""

    name: str
    computed_tokens: int
    log_probs: torch.Tensor
    grads: list[torch.Tensor]
    forward_ms: float
    backward_ms: float


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="attention_check.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", type=Path, help="a model folder (weights, tokenizer with a chat template)")
    parser.add_argument("--tasks", type=int, default=8, help="BFCL tasks in the batch (default 8)")
    parser.add_argument("--split", default="val", choices=["train", "val", "test"], help="default val")
    parser.add_argument("--protocol", default="qwen_fc", help="tool-call protocol of the prompts (qwen_fc)")
    parser.add_argument(
        "--max-length", type=int, default=8192, help="tokens kept of each conversation (default 8192)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs after a warm-up (default 3)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--device", default="cuda", help="default cuda (torch's varlen kernels need it)")
    parser.add_argument("--no-backward", action="store_true", help="log-probs and forward times only")
    parser.add_argument(
        "--max-mean-diff", type=float, default=0.05, help="largest mean |log-prob difference| that passes"
    )
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.repeats < 1 or args.max_length < 2:
        parser.error("--tasks and --repeats must be at least 1, --max-length at least 2")
    return args


def conversations(split: str, count: int, protocol: str) -> list[tuple[str, list[dict[str, str]]]]:
    """`count` tasks evenly spaced over the split, each with its ground truth played through an episode."""
    ids = split_ids(split)
    chosen = [ids[i * len(ids) // count] for i in range(min(count, len(ids)))]
    played = []
    for task_id in chosen:
        episode = Episode(task_id, mode="eval", protocol=protocol)
        messages = episode.reset()
        for action in ground_truth_actions(task_id, protocol):
            step = episode.step(action)
            messages += [{"role": "assistant", "content": action}, *step.observation]
            if step.done:
                break
        played.append((task_id, messages))
    return played


def token_ids(tokenizer, messages: list[dict[str, str]], max_length: int) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"][:max_length]


def packed_inputs(sequences: list[list[int]], device: str) -> dict[str, torch.Tensor]:
    """One (1, T) row, positions restarting at 0 for each sequence: what verl feeds with remove padding."""
    import torch

    ids = torch.tensor([token for sequence in sequences for token in sequence], device=device)
    positions = torch.cat([torch.arange(len(sequence), device=device) for sequence in sequences])
    return {"input_ids": ids[None], "position_ids": positions[None]}


def padded_inputs(sequences: list[list[int]], pad_id: int, device: str) -> dict[str, torch.Tensor]:
    """(B, L) right-padded to the longest sequence, with its 2-D mask."""
    import torch

    width = max(len(sequence) for sequence in sequences)
    ids = torch.full((len(sequences), width), pad_id, device=device)
    mask = torch.zeros(len(sequences), width, dtype=torch.long, device=device)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.tensor(sequence, device=device)
        mask[row, : len(sequence)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def sequence_hidden(model: PreTrainedModel, inputs: dict[str, torch.Tensor], lengths: list[int]):
    """Each sequence's last hidden states (its own tokens only), from a packed or a padded batch."""
    hidden = model.base_model(**inputs).last_hidden_state
    if "attention_mask" in inputs:
        return [hidden[row, :length] for row, length in enumerate(lengths)]
    return list(hidden[0].split(lengths))


def next_token_log_probs(model: PreTrainedModel, hidden: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """log p(ids[t+1] | ids[..t]) in float32, checkpointed: the (length, vocab) logits are not kept."""
    from torch.utils.checkpoint import checkpoint

    def compute(states: torch.Tensor) -> torch.Tensor:
        logits = model.get_output_embeddings()(states[:-1]).float()
        return logits.log_softmax(-1).gather(-1, ids[1:, None]).squeeze(-1)

    return checkpoint(compute, hidden, use_reentrant=False)


def log_probs(model: PreTrainedModel, inputs: dict[str, torch.Tensor], sequences: list[torch.Tensor]):
    import torch

    lengths = [len(sequence) for sequence in sequences]
    hidden = sequence_hidden(model, inputs, lengths)
    return torch.cat(
        [next_token_log_probs(model, states, ids) for states, ids in zip(hidden, sequences, strict=True)]
    )


def timed(run: Callable[[], object], repeats: int, device: str) -> float:
    """Median milliseconds of `repeats` runs after one warm-up."""
    run()
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        run()
        _synchronize(device)
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def _synchronize(device: str) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def run_pass(
    model: PreTrainedModel,
    name: str,
    inputs: dict[str, torch.Tensor],
    sequences: list[torch.Tensor],
    args: argparse.Namespace,
) -> Pass:
    import torch

    model.set_attn_implementation(name)
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        forward_ms = timed(lambda: log_probs(model, inputs, sequences), args.repeats, args.device)
        values = log_probs(model, inputs, sequences)
    grads: list[torch.Tensor] = []
    backward_ms = float("nan")
    if not args.no_backward:

        def step() -> None:
            model.zero_grad(set_to_none=True)
            (-log_probs(model, inputs, sequences).mean()).backward()

        backward_ms = timed(step, args.repeats, args.device)
        grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
    return Pass(name, inputs["input_ids"].numel(), values, grads, forward_ms, backward_ms)


def grad_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> tuple[float, float]:
    """Largest absolute difference over all parameters, and the relative L2 norm of the difference."""
    if not a:
        return float("nan"), float("nan")
    largest = max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b, strict=True))
    squared = sum(float((x.float() - y.float()).square().sum()) for x, y in zip(a, b, strict=True))
    norm = sum(float(y.float().square().sum()) for y in b)
    return largest, (squared / norm) ** 0.5 if norm else float("nan")


def report(varlen: Pass, padded: Pass, real_tokens: int, sequences: int) -> tuple[str, float, bool]:
    """The table, the mean log-prob difference and whether every value is finite."""
    diff = (varlen.log_probs - padded.log_probs).abs()
    grad_max, grad_relative = grad_difference(varlen.grads, padded.grads)
    finite = bool(varlen.log_probs.isfinite().all() and padded.log_probs.isfinite().all())
    finite &= all(bool(g.isfinite().all()) for g in [*varlen.grads, *padded.grads])
    lines = [
        f"{sequences} sequences, {real_tokens} tokens, {len(diff)} predicted",
        f"{'pass':<28}{'computed tokens':>16}{'forward ms':>12}{'fwd+bwd ms':>12}",
    ]
    for one in (varlen, padded):
        label = f"{one.name} ({'packed' if one.name == TORCH_VARLEN else 'padded'})"
        lines.append(f"{label:<28}{one.computed_tokens:>16}{one.forward_ms:>12.1f}{one.backward_ms:>12.1f}")
    lines += [
        f"log-prob |varlen - sdpa|: max {float(diff.max()):.5f}, mean {float(diff.mean()):.6f}",
        f"grad |varlen - sdpa|: max {grad_max:.3e}, relative L2 {grad_relative:.3e}",
    ]
    return "\n".join(lines), float(diff.mean()), finite


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import seal.trainer.attention  # noqa: F401  (registers torch_varlen with transformers)

    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        print("attention_check: no CUDA GPU here (torch's varlen kernels need one, sm80+)", file=sys.stderr)
        return 1
    if not (args.model / "config.json").is_file():
        print(f"attention_check: {args.model} is not a model folder (no config.json)", file=sys.stderr)
        return 1
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    played = conversations(args.split, args.tasks, args.protocol)
    ids = [token_ids(tokenizer, messages, args.max_length) for _, messages in played]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, args.dtype)).to(args.device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    sequences = [torch.tensor(sequence, device=args.device) for sequence in ids]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    varlen = run_pass(model, TORCH_VARLEN, packed_inputs(ids, args.device), sequences, args)
    padded = run_pass(model, PADDED, padded_inputs(ids, pad_id, args.device), sequences, args)
    print(f"model {args.model}, {args.dtype} on {args.device}, tasks {', '.join(t for t, _ in played)}")
    table, mean_diff, finite = report(varlen, padded, sum(map(len, ids)), len(ids))
    print(table)
    if not finite:
        print("attention_check: a log-probability or gradient is not finite", file=sys.stderr)
        return 1
    if mean_diff > args.max_mean_diff:
        print(
            f"attention_check: mean log-prob difference {mean_diff:.4f} > {args.max_mean_diff}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
