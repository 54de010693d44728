"""A-Patch (docs/design.md §4.3): static and dynamic weights, application to advantages, config and state."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from seal.tocf.apatch import APatchConfig, APatchState, apatch_factors, dynamic_update, static_weight
from seal.tocf.labels import DEFAULT_RHO, EXCLUDED
from seal.tocf.profile import FailureProfile

P = "seal/apatch"


# --- static weights -------------------------------------------------------------------------------------


def test_static_weight_worked_example() -> None:
    labels = ["pass", "pass", "state_mismatch", "empty_turn_model_response"]
    assert static_weight(labels, DEFAULT_RHO, 0.5, 2.0) == 1.125


@pytest.mark.parametrize(
    "labels, expected",
    [
        ([], 1.0),
        (["gt_error", "checker_error"], 1.0),
        (["gt_error", "spurious_tool_call"], 2.0),
        (["made_up_label", "spurious_tool_call"], 1.5),
        (["instance_mismatch"], 0.6),
        (["recovery_failure", "argument_mismatch"], 1.5),
    ],
)
def test_static_weight_cases(labels: list[str], expected: float) -> None:
    assert static_weight(labels, DEFAULT_RHO, 0.5, 2.0) == pytest.approx(expected)


def test_static_weight_is_clipped() -> None:
    assert static_weight(["instance_mismatch"], DEFAULT_RHO, 0.8, 2.0) == 0.8
    assert static_weight(["x"], {"x": 5.0}, 0.5, 2.0) == 2.0


# --- dynamic update -------------------------------------------------------------------------------------


def _window() -> FailureProfile:
    profile = FailureProfile()
    profile.observe(["state_mismatch"], 1.0, "multi_turn_base")
    profile.reset_window()  # the total must not matter
    profile.observe(["pass", "state_mismatch", "state_mismatch", "gt_error"], 0.0, "multi_turn_base")
    profile.observe(["pass", "spurious_tool_call"], 1.0, "multi_turn_miss_func")
    return profile


def test_dynamic_update_by_hand() -> None:
    # Window: pass 2, state_mismatch 2, spurious 1, gt_error 1 -> N = 5 (gt_error excluded).
    cfg = APatchConfig(confidence_samples=4)
    rho = {**DEFAULT_RHO, "state_mismatch": 1.4, "response_mismatch": 0.5, "gt_error": 1.6}
    new = dynamic_update(rho, cfg.rho, _window(), cfg)
    # state_mismatch: target = 1.0 * (1 + 1.0 * 2/5 * (1 - 0.0) * min(1, 2/4)) = 1.2;
    #                 rho = 0.75 * 1.4 + 0.25 * 1.2 = 1.35
    assert new["state_mismatch"] == pytest.approx(1.35)
    # spurious: mean reward 1 -> no stagnation -> target 2.0; rho stays 2.0
    assert new["spurious_tool_call"] == pytest.approx(2.0)
    # response_mismatch unseen -> target = rho0 0.9; rho = 0.75 * 0.5 + 0.25 * 0.9 = 0.6
    assert new["response_mismatch"] == pytest.approx(0.6)
    # excluded -> target 1: 0.75 * 1.6 + 0.25 = 1.45; pass -> target rho0 = 1.0
    assert new["gt_error"] == pytest.approx(1.45)
    assert new["pass"] == pytest.approx(1.0)
    assert new["instance_mismatch"] == pytest.approx(0.6)
    assert set(new) == set(DEFAULT_RHO) | {"gt_error"}


def test_dynamic_target_is_clipped_and_beta_one_jumps_to_it() -> None:
    profile = FailureProfile()
    profile.observe(["argument_mismatch"] * 3, 0.0, "multi_turn_base")
    cfg = APatchConfig(ema_beta=1.0, confidence_samples=0)
    # target = 1.8 * (1 + 1 * 1 * 1 * 1) = 3.6 -> clipped to 2.0
    assert dynamic_update(cfg.rho, cfg.rho, profile, cfg)["argument_mismatch"] == 2.0


def test_dynamic_update_without_signal_leaves_rho_unchanged() -> None:
    cfg = APatchConfig()
    rho = {**DEFAULT_RHO, "state_mismatch": 1.3}
    assert dynamic_update(rho, cfg.rho, FailureProfile(), cfg) == rho
    only_excluded = FailureProfile()
    only_excluded.observe(["gt_error", "checker_error"], 0.0, "a")
    assert dynamic_update(rho, cfg.rho, only_excluded, cfg) == rho


def test_zero_beta_and_zero_alpha_are_honoured() -> None:
    rho = {**DEFAULT_RHO, "state_mismatch": 1.3}
    frozen = APatchConfig(ema_beta=0.0)
    assert dynamic_update(rho, frozen.rho, _window(), frozen) == pytest.approx({**rho, "gt_error": 1.0})
    flat = APatchConfig(prevalence_alpha=0.0, ema_beta=1.0)
    assert dynamic_update(rho, flat.rho, _window(), flat)["state_mismatch"] == 1.0


def test_state_update_and_checkpoint_round_trip() -> None:
    cfg = APatchConfig(confidence_samples=4)
    state = APatchState.initial(cfg)
    assert state.rho == dict(DEFAULT_RHO)
    state.update(_window(), cfg)
    assert state.updates == 1 and state.rho["state_mismatch"] == pytest.approx(1.05)
    restored = APatchState.from_json(json.loads(json.dumps(state.to_json())))
    assert restored == state
    static = APatchConfig(mode="static")
    assert restored.update(_window(), static) == restored.rho and restored.updates == 1


@pytest.mark.parametrize(
    "data, message",
    [
        ([], "must be a JSON object"),
        ({"rho": {}}, "unsupported version None"),
        ({"version": 1}, "missing key 'rho'"),
        ({"version": 1, "rho": {"pass": "1"}}, "must be a finite number"),
        ({"version": 1, "rho": {"pass": 1.0}, "updates": -1}, "non-negative integer"),
    ],
)
def test_bad_state_is_rejected(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        APatchState.from_json(data)


# --- application ----------------------------------------------------------------------------------------

BATCH_LABELS = [
    ["pass", "pass", "state_mismatch", "empty_turn_model_response"],
    ["spurious_tool_call"],
    None,
    ["instance_mismatch"],
]
BATCH_ADV = [1.0, -1.0, 0.5, 0.0]


def apply_apatch(advantages, labels, rho, cfg, step):
    """The advantages as the trainer leaves them: each multiplied by its factor."""
    factors, metrics = apatch_factors(advantages, labels, rho, cfg, step)
    return [a * f for a, f in zip(advantages, factors, strict=True)], metrics


def test_apply_all_by_hand() -> None:
    out, metrics = apply_apatch(BATCH_ADV, BATCH_LABELS, DEFAULT_RHO, APatchConfig(), step=1)
    assert out == [1.125, -2.0, 0.5, 0.0]
    assert metrics[f"{P}/missing_label_count"] == 1.0
    assert metrics[f"{P}/scaled_count"] == 3.0
    assert metrics[f"{P}/mean_scale"] == pytest.approx((1.125 + 2.0 + 1.0 + 0.6) / 4)
    assert metrics[f"{P}/label_frac/pass"] == pytest.approx(2 / 6)
    assert metrics[f"{P}/label_frac/recovery_failure"] == 0.0
    assert metrics[f"{P}/label_weight/empty_turn_model_response"] == 1.5
    assert metrics[f"{P}/warmup_skipped"] == 0.0


@pytest.mark.parametrize(
    "apply_to, expected",
    [
        ("positive_advantage", [1.125, -1.0, 0.5, 0.0]),
        ("negative_advantage", [1.0, -2.0, 0.5, 0.0]),
    ],
)
def test_apply_to_one_sign(apply_to: str, expected: list[float]) -> None:
    out, metrics = apply_apatch(BATCH_ADV, BATCH_LABELS, DEFAULT_RHO, APatchConfig(apply_to=apply_to), step=1)
    assert out == expected
    assert metrics[f"{P}/scaled_count"] == 1.0


def test_warmup_leaves_advantages_unchanged() -> None:
    cfg = APatchConfig(warmup_steps=5)
    out, metrics = apply_apatch(BATCH_ADV, BATCH_LABELS, DEFAULT_RHO, cfg, step=4)
    assert out == BATCH_ADV
    assert metrics[f"{P}/warmup_skipped"] == 1.0 and metrics[f"{P}/scaled_count"] == 0.0
    assert metrics[f"{P}/mean_scale"] == 1.0 and metrics[f"{P}/missing_label_count"] == 1.0
    assert apply_apatch(BATCH_ADV, BATCH_LABELS, DEFAULT_RHO, cfg, step=5)[0] == [1.125, -2.0, 0.5, 0.0]


def test_normalize_mean_by_hand() -> None:
    cfg = APatchConfig(normalize_mean=True)
    labels = [["spurious_tool_call"], ["instance_mismatch"], None, ["gt_error"]]
    out, _ = apply_apatch([1.0, 1.0, 1.0, 1.0], labels, DEFAULT_RHO, cfg, step=0)
    # weights 2.0 and 0.6, mean 1.3 -> 1.538..., 0.4615... clipped to 0.5; unlabelled rows untouched
    assert out == pytest.approx([2.0 / 1.3, 0.5, 1.0, 1.0])


def test_length_mismatch_is_rejected() -> None:
    with pytest.raises(ValueError, match="2 advantages but 1 label lists"):
        apply_apatch([1.0, 2.0], [["pass"]], DEFAULT_RHO, APatchConfig(), step=0)


def test_empty_batch() -> None:
    out, metrics = apply_apatch([], [], DEFAULT_RHO, APatchConfig(), step=0)
    assert out == [] and metrics[f"{P}/mean_scale"] == 1.0 and metrics[f"{P}/scaled_count"] == 0.0


# --- config ---------------------------------------------------------------------------------------------


def test_config_defaults_and_rho_overrides() -> None:
    cfg = APatchConfig()
    assert (cfg.w_min, cfg.w_max, cfg.ema_beta, cfg.prevalence_alpha, cfg.confidence_samples) == (
        0.5,
        2.0,
        0.25,
        1.0,
        32,
    )
    assert dict(cfg.rho) == dict(DEFAULT_RHO)
    custom = APatchConfig(rho={"state_mismatch": 1.4, "new_label": 0.7})
    assert custom.rho["state_mismatch"] == 1.4 and custom.rho["new_label"] == 0.7
    assert custom.rho["spurious_tool_call"] == 2.0


def test_zero_values_are_settable() -> None:
    cfg = APatchConfig(ema_beta=0, prevalence_alpha=0, confidence_samples=0, warmup_steps=0)
    assert (cfg.ema_beta, cfg.prevalence_alpha, cfg.confidence_samples) == (0.0, 0.0, 0)


def test_the_mode_says_whether_a_patch_scales_and_whether_rho_moves() -> None:
    modes = {mode: APatchConfig(mode=mode) for mode in ("off", "static", "dynamic")}
    assert [(c.enabled, c.dynamic) for c in modes.values()] == [(False, False), (True, False), (True, True)]
    assert APatchConfig(**asdict(modes["static"])) == modes["static"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"w_min": 2.5}, "0 < w_min <= w_max"),
        ({"w_min": 0.0}, "0 < w_min <= w_max"),
        ({"w_max": float("nan")}, "w_max must be a finite number"),
        ({"ema_beta": 1.5}, r"ema_beta must be in \[0, 1\]"),
        ({"ema_beta": -0.1}, r"ema_beta must be in \[0, 1\]"),
        ({"prevalence_alpha": -1.0}, "prevalence_alpha must be >= 0"),
        ({"confidence_samples": -1}, "confidence_samples must be a non-negative integer"),
        ({"confidence_samples": 2.5}, "confidence_samples must be a non-negative integer"),
        ({"warmup_steps": -3}, "warmup_steps must be a non-negative integer"),
        ({"apply_to": "both"}, "apply_to must be one of"),
        ({"mode": "sometimes"}, r"seal\.apatch\.mode must be one of \['off', 'static', 'dynamic'\]"),
        ({"normalize_mean": 1}, "normalize_mean must be a bool"),
        ({"w_min": True}, "w_min must be a finite number"),
        ({"rho": {"pass": -1.0}}, r"rho\['pass'\] must be >= 0"),
        ({"rho": {"pass": float("inf")}}, r"rho\['pass'\] must be a finite number"),
        ({"rho": [1.0]}, "rho must be a mapping"),
    ],
)
def test_bad_config_is_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        APatchConfig(**kwargs)


# --- properties -----------------------------------------------------------------------------------------

LABELS = [*DEFAULT_RHO, *EXCLUDED, "unknown_label"]
label_lists = st.lists(st.sampled_from(LABELS), max_size=6)
maybe_labels = st.one_of(st.none(), label_lists)
weights_st = st.floats(0.0, 5.0, allow_nan=False)
bounds_st = st.tuples(st.floats(0.01, 2.0), st.floats(0.0, 3.0)).map(lambda t: (t[0], t[0] + t[1]))
rho_st = st.dictionaries(st.sampled_from(LABELS), weights_st)
adv_st = st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


@given(label_lists, rho_st, bounds_st)
def test_weights_stay_in_bounds(labels: list[str], rho: dict, bounds: tuple[float, float]) -> None:
    w = static_weight(labels, rho, *bounds)
    if any(x not in EXCLUDED for x in labels):
        assert bounds[0] <= w <= bounds[1]
    else:
        assert w == 1.0


@given(
    st.data(),
    rho_st,
    bounds_st,
    st.sampled_from(["all", "positive_advantage", "negative_advantage"]),
    st.booleans(),
)
def test_advantage_signs_never_change(
    data: st.DataObject, rho: dict, bounds: tuple[float, float], apply_to: str, normalize: bool
) -> None:
    advantages = data.draw(st.lists(adv_st, max_size=16))
    labels = data.draw(st.lists(maybe_labels, min_size=len(advantages), max_size=len(advantages)))
    cfg = APatchConfig(w_min=bounds[0], w_max=bounds[1], apply_to=apply_to, normalize_mean=normalize)
    out, metrics = apply_apatch(advantages, labels, {**cfg.rho, **rho}, cfg, step=0)
    assert [_sign(a) for a in out] == [_sign(a) for a in advantages]
    assert metrics[f"{P}/scaled_count"] <= len(advantages)


@given(st.lists(adv_st, max_size=16), st.data(), st.booleans())
def test_unlabelled_batch_is_unchanged(advantages: list[float], data: st.DataObject, normalize: bool) -> None:
    labels = data.draw(
        st.lists(st.sampled_from([None, []]), min_size=len(advantages), max_size=len(advantages))
    )
    out, metrics = apply_apatch(
        advantages, labels, DEFAULT_RHO, APatchConfig(normalize_mean=normalize), step=3
    )
    assert out == advantages
    assert metrics[f"{P}/scaled_count"] == 0.0
    assert metrics[f"{P}/missing_label_count"] == float(len(advantages))


@given(st.lists(label_lists, min_size=1, max_size=16), rho_st, bounds_st)
def test_normalize_mean_gives_mean_weight_one_within_clipping(
    labels: list[list[str]], rho: dict, bounds: tuple[float, float]
) -> None:
    weighed = [i for i, x in enumerate(labels) if any(z not in EXCLUDED for z in x)]
    assume(weighed)
    cfg = APatchConfig(w_min=bounds[0], w_max=bounds[1], normalize_mean=True)
    table = {**cfg.rho, **rho}
    out, _ = apply_apatch([1.0] * len(labels), labels, table, cfg, step=0)
    raw = [static_weight(labels[i], table, *bounds) for i in weighed]
    mean = sum(raw) / len(raw)
    rescaled = [w / mean for w in raw]
    assert [out[i] for i in weighed] == pytest.approx([min(bounds[1], max(bounds[0], w)) for w in rescaled])
    if all(bounds[0] <= w <= bounds[1] for w in rescaled):
        assert sum(out[i] for i in weighed) / len(weighed) == pytest.approx(1.0)
    assert all(out[i] == 1.0 for i in range(len(labels)) if i not in weighed)


@given(
    st.lists(st.tuples(label_lists, st.sampled_from([0.0, 1.0])), max_size=10),
    st.floats(0.0, 1.0),
    st.floats(0.0, 3.0),
    st.integers(0, 64),
)
def test_dynamic_rho_stays_in_bounds(trajs: list, beta: float, alpha: float, samples: int) -> None:
    profile = FailureProfile()
    for labels, reward in trajs:
        profile.observe(labels, reward, "c")
    cfg = APatchConfig(ema_beta=beta, prevalence_alpha=alpha, confidence_samples=samples)
    rho = dict(cfg.rho)
    for _ in range(3):
        rho = dynamic_update(rho, cfg.rho, profile, cfg)
    for label, value in rho.items():
        assert min(cfg.w_min, cfg.rho.get(label, 1.0)) - 1e-9 <= value <= cfg.w_max + 1e-9
