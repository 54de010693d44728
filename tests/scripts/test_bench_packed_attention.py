"""benchmarks/bench_packed_attention.py: its packed row, and its one-line refusal without a CUDA GPU."""

from __future__ import annotations

import torch

from tests.support.script_module import load_script

bench = load_script("bench_packed_attention")


def test_the_packed_row_holds_the_tokens_asked_in_sequences_whose_positions_restart():
    ids, positions, lengths = bench.packed_row(20_000, 151_665, seed=3, device="cpu")
    assert ids.shape == positions.shape == (1, 20_000) and sum(lengths) == 20_000
    assert all(4000 <= length <= 8000 for length in lengths[:-1]) and 0 < lengths[-1] <= 8000
    starts = (positions[0] == 0).nonzero().squeeze(-1).tolist()
    assert starts == [sum(lengths[:index]) for index in range(len(lengths))]
    assert int(ids.max()) < 151_665


def test_without_a_cuda_gpu_it_says_so_in_one_line(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main(["--layers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a CUDA GPU" in err
