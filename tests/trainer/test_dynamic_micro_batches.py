"""Why exp/SEAL.yaml packs micro-batches by tokens (`use_dynamic_bsz`) instead of Table 4's one sample each:
in verl 0.9.1's engine workers each micro-batch's loss is divided by the whole mini-batch's token count
(`forward_backward_batch` sets `batch_num_tokens` before splitting), so the mini-batch's gradient does not
depend on how it is split. The check runs verl's own splitter and loss aggregation on SEAL's loss mode; the
per-micro-batch mean that older verl actors used is the counter-example, which would not be the same."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from verl.trainer.ppo.core_algos import agg_loss
from verl.utils import tensordict_utils as tu
from verl.workers.engine.utils import prepare_micro_batches

from seal.trainer.experiment import PROJECT_ROOT, compose_experiment

SAMPLES, WIDTH, TOKEN_BUDGET = 16, 40, 120


def mini_batch() -> tuple[TensorDict, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(5, WIDTH + 1, (SAMPLES,), generator=generator)
    mask = (torch.arange(WIDTH)[None, :] < lengths[:, None]).long()
    batch = TensorDict(
        {
            "input_ids": torch.randint(0, 100, (SAMPLES, WIDTH), generator=generator),
            "attention_mask": mask,
            "loss_mask": mask.clone(),
            "row": torch.arange(SAMPLES),
        },
        batch_size=[SAMPLES],
    )
    return batch, torch.randn(SAMPLES, WIDTH, generator=generator)


def gradient(dynamic: bool, mode: str, whole_batch_norm: bool = True) -> tuple[int, torch.Tensor]:
    """Micro-batch count and d(loss)/d(log-prob) of a mini-batch split by verl's prepare_micro_batches."""
    batch, per_token = mini_batch()
    tu.assign_non_tensor(
        batch, use_dynamic_bsz=dynamic, max_token_len_per_gpu=TOKEN_BUDGET, micro_batch_size_per_gpu=1
    )
    micro_batches, _ = prepare_micro_batches(batch)
    log_prob = torch.zeros(SAMPLES, WIDTH, requires_grad=True)
    tokens = int(batch["loss_mask"].sum())
    for micro in micro_batches:
        rows = micro["row"]
        if whole_batch_norm:
            loss = agg_loss(
                log_prob[rows] * per_token[rows], micro["loss_mask"], mode, batch_num_tokens=tokens
            )
        else:
            share = len(rows) / SAMPLES
            loss = agg_loss(log_prob[rows] * per_token[rows], micro["loss_mask"], mode) * share
        loss.backward()
    return len(micro_batches), log_prob.grad


def test_packed_micro_batches_give_the_gradient_of_micro_batches_of_one():
    mode = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", []).actor_rollout_ref.actor.loss_agg_mode
    singles, by_sample = gradient(dynamic=False, mode=mode)
    packed, by_tokens = gradient(dynamic=True, mode=mode)
    assert (singles, 1 < packed < SAMPLES) == (SAMPLES, True)
    torch.testing.assert_close(by_tokens, by_sample, rtol=1e-6, atol=1e-9)


def test_a_per_micro_batch_mean_would_not_be_the_same_optimisation():
    _, by_sample = gradient(dynamic=False, mode="token-mean", whole_batch_norm=False)
    _, by_tokens = gradient(dynamic=True, mode="token-mean", whole_batch_norm=False)
    assert (by_tokens - by_sample).abs().max() > 1e-3
