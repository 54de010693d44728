"""Forward and backward of a backbone's decoder on one packed micro-batch, on `torch_varlen`: seconds a pass.

    python benchmarks/bench_packed_attention.py                          # Qwen2.5-7B's shape, 16,384 tokens
    python benchmarks/bench_packed_attention.py --layers 8 --tokens 32768 --no-checkpointing

What verl's actor update does per micro-batch, without FSDP: random bf16 weights of the backbone's exact
shape (seal.backbones; `--layers` fewer to fit a smaller GPU), sequences of 4,000-8,000 tokens packed into one
row with positions restarting at 0 (verl's `use_remove_padding`), gradient checkpointing as verl's default
has it, and a loss on the last hidden states (the LM head is not what the attention changes). It prints the
median of `--passes` after `--warmup`, and which `seal` it imported: to judge a change of
`seal/trainer/attention.py` side by side, run it alternately with PYTHONPATH at the old commit's worktree and
at this one. Exits 2 without a CUDA GPU (torch's varlen kernel is CUDA-only).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def packed_row(tokens: int, vocab: int, seed: int, device: str):
    """(1, T) ids and positions of sequences of 4,000-8,000 tokens (the last one shorter), T = tokens."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    lengths: list[int] = []
    while sum(lengths) < tokens:
        lengths.append(min(int(torch.randint(4000, 8001, (1,), generator=generator)), tokens - sum(lengths)))
    positions = torch.cat([torch.arange(length) for length in lengths])[None].to(device)
    ids = torch.randint(0, vocab, (1, tokens), generator=generator).to(device)
    return ids, positions, lengths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backbone", default="qwen2.5-7b", help="whose shape (seal.backbones)")
    parser.add_argument("--layers", type=int, help="decoder layers (default: the backbone's)")
    parser.add_argument("--tokens", type=int, default=16384, help="tokens in the packed micro-batch")
    parser.add_argument("--passes", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--no-checkpointing", action="store_true", help="keep every layer's activations")
    parser.add_argument(
        "--liger",
        action="store_true",
        help="Liger's RMSNorm, SwiGLU and RoPE kernels, patched in as verl's actor.model.use_liger does",
    )
    args = parser.parse_args(argv)
    if min(args.tokens, args.passes) < 1 or args.warmup < 0 or (args.layers is not None and args.layers < 1):
        parser.error("--tokens, --passes and --layers must be positive, --warmup not negative")

    import torch

    if not torch.cuda.is_available():
        print(
            "bench_packed_attention.py: needs a CUDA GPU (torch's varlen kernel is CUDA-only)",
            file=sys.stderr,
        )
        return 2
    from transformers import AutoConfig, AutoModelForCausalLM

    import seal
    from seal.backbones.catalog import BACKBONES
    from seal.trainer.attention import NAME

    if args.backbone not in BACKBONES:
        print(
            f"bench_packed_attention.py: no backbone {args.backbone!r} ({', '.join(BACKBONES)})",
            file=sys.stderr,
        )
        return 2
    shape = dict(BACKBONES[args.backbone].config)
    if args.layers:
        shape["num_hidden_layers"] = args.layers
    config = AutoConfig.for_model(**{**shape, "use_cache": False})
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):  # random weights made where they run: seconds, not minutes on the CPU
        model = AutoModelForCausalLM.from_config(config, attn_implementation=NAME)
    if args.liger:
        from liger_kernel.transformers.monkey_patch import _apply_liger_kernel_to_instance

        _apply_liger_kernel_to_instance(model=model, fused_linear_cross_entropy=False, swiglu=True)
    decoder = model.model.train()
    if not args.no_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids, positions, lengths = packed_row(args.tokens, config.vocab_size, 0, "cuda")
    seconds = []
    for done in range(args.warmup + args.passes):
        torch.cuda.synchronize()
        started = time.perf_counter()
        hidden = decoder(input_ids=ids, position_ids=positions).last_hidden_state
        hidden.float().pow(2).mean().backward()
        torch.cuda.synchronize()
        if done >= args.warmup:
            seconds.append(time.perf_counter() - started)
        decoder.zero_grad(set_to_none=True)
    median = statistics.median(seconds)
    print(f"seal from {seal.__path__[0]}")
    checkpointing = "off" if args.no_checkpointing else "on"
    print(
        f"{args.backbone}, {config.num_hidden_layers} layers, {args.tokens:,} tokens in {len(lengths)} "
        f"sequences, checkpointing {checkpointing}, Liger {'on' if args.liger else 'off'}, "
        f"{torch.cuda.get_device_name()}"
    )
    print(f"{'median s a pass':<18} {'min s':>8} {'tokens/s':>10}")
    print(f"{median:<18.4f} {min(seconds):>8.4f} {args.tokens / median:>10,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
