"""benchmarks/attention_check.py on CPU, torch's kernel swapped for the exact per-sequence stand-in: a correct
kernel agrees with padded sdpa on a real BFCL batch, a wrong one is caught."""

from __future__ import annotations

import re

import pytest

import seal.trainer.attention as attention
from tests.support.script_module import load_script
from tests.support.varlen_reference import per_sequence_attention, varlen_attn_2_13

attention_check = load_script("attention_check")
make_smoke_model = load_script("make_smoke_model")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return make_smoke_model.build_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def played():
    return attention_check.conversations("val", 2, "qwen_fc")


@pytest.fixture(autouse=True)
def episodes_played_once(played, monkeypatch):
    monkeypatch.setattr(attention_check, "conversations", lambda split, count, protocol: played)


def run(model, capsys) -> tuple[int, str, str]:
    options = "--device cpu --dtype float32 --tasks 2 --max-length 48 --repeats 1 --max-mean-diff 1e-5"
    status = attention_check.main([str(model), *options.split()])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_correct_kernel_agrees_with_padded_sdpa(tiny_model, monkeypatch, capsys):
    monkeypatch.setattr(attention, "varlen_attn", varlen_attn_2_13)
    status, out, err = run(tiny_model, capsys)
    assert status == 0, err
    largest = float(re.search(r"log-prob \|varlen - sdpa\|: max ([0-9.e-]+)", out).group(1))
    grads = float(re.search(r"grad \|varlen - sdpa\|: max ([0-9.e+-]+)", out).group(1))
    assert largest < 1e-4 and grads < 1e-4
    assert "torch_varlen (packed)" in out and "sdpa (padded)" in out


def test_a_kernel_that_looks_ahead_fails_the_check_in_one_line(tiny_model, monkeypatch, capsys):
    def bidirectional(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, **options):
        return per_sequence_attention(query, key, value, cu_seq_q, max_q, options.get("scale"), (-1, -1))

    monkeypatch.setattr(attention, "varlen_attn", bidirectional)
    status, _, err = run(tiny_model, capsys)
    (line,) = [line for line in err.splitlines() if line.startswith("attention_check:")]
    assert status == 1 and line.startswith("attention_check: mean log-prob difference")


def test_without_a_gpu_the_default_device_is_refused_in_one_line(tiny_model, capsys):
    status = attention_check.main([str(tiny_model)])
    assert status == 1 and capsys.readouterr().err.startswith("attention_check: no CUDA GPU here")
