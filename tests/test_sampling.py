"""The sampling command (sample_f32) on the CPU against the NumPy rule (sampling_reference.py), its
distribution against softmax by chi-square, and sampled generation on SmolLM2 token by token
against the rule applied to teacher-forced logits."""
from __future__ import annotations

import numpy as np
import pytest

import sampling_reference as ref

PROMPT = "Here is a short story about a robot who learns to paint:"

CONFIGS = [
    dict(temperature=1.0),
    dict(temperature=0.7, top_k=40),
    dict(temperature=1.3, top_p=0.9),
    dict(temperature=0.8, top_k=50, top_p=0.95, min_p=0.05),
    dict(temperature=1.0, min_p=0.2),
    dict(temperature=0.9, top_k=5, repeat_penalty=1.3, repeat_last_n=16),
    dict(temperature=1.1, top_p=0.5, repeat_penalty=0.8, repeat_last_n=64),
    dict(temperature=0.0, repeat_penalty=1.5, repeat_last_n=8),
]


def _logits(n, seed, scale=3.0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * scale).astype(np.float32)
    x[rng.integers(0, n, 20)] = x[rng.integers(0, n, 20)]  # some exact ties
    return x


def _window(cfg, recent, chain):
    if cfg.get("repeat_penalty", 1.0) == 1.0:
        return []
    n = cfg.get("repeat_last_n", 64)
    return (list(recent) + list(chain))[-n:] if n else []


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_cpu_command_draws_the_reference_token(cfg):
    rng = np.random.default_rng(len(str(cfg)))
    n = 3000
    logits = _logits(n, seed=len(str(cfg)))
    recent = rng.integers(0, n, 40).tolist()
    chain = rng.integers(0, n, 6).tolist()
    positions = np.arange(100, 300)
    for seed in (0, 2**40 + 17):
        c = dict(cfg, seed=seed)
        got = ref.device_draws("cpu", logits, positions, c, recent, chain)
        want = [ref.draw(logits, c, int(p), _window(c, recent, chain)) for p in positions]
        assert got.tolist() == want
        if c["temperature"] > 0:
            assert len(set(want)) > 1, "the draws should vary with the position"


def test_different_seeds_draw_differently():
    logits = _logits(500, seed=3, scale=1.0)
    positions = np.arange(64)
    a = ref.device_draws("cpu", logits, positions, dict(temperature=1.0, seed=1))
    b = ref.device_draws("cpu", logits, positions, dict(temperature=1.0, seed=2))
    assert (a != b).mean() > 0.5


CHI_SQUARE_CONFIGS = [
    dict(temperature=1.0),
    dict(temperature=0.6, top_k=12),
    dict(temperature=1.5, top_p=0.8),
    dict(temperature=1.0, top_k=30, top_p=0.9, min_p=0.03),
]


@pytest.mark.parametrize("cfg", CHI_SQUARE_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_draws_follow_the_kept_softmax(cfg):
    """Chi-square of 20000 draws (one per position) against softmax(x / T) over the kept tokens."""
    logits = _logits(60, seed=7, scale=1.5)
    probs = ref.kept_probabilities(logits, cfg)
    draws = ref.device_draws("cpu", logits, np.arange(20000), dict(cfg, seed=99))
    ref.assert_draws_follow(draws, probs)


def test_greedy_with_penalty_is_the_penalized_argmax():
    logits = np.zeros(100, dtype=np.float32)
    logits[[10, 20, 30]] = [5.0, 4.0, 3.0]
    cfg = dict(temperature=0.0, repeat_penalty=2.0, repeat_last_n=4)
    # 10 and 20 were seen (10 twice, penalized once): 2.5, 2.0 -> 30 wins at 3.0.
    assert ref.device_draws("cpu", logits, [5], cfg, recent=[10, 10, 20])[0] == 30
    # Only the last 4 tokens count: 10 falls out of the window.
    assert ref.device_draws("cpu", logits, [5], cfg, recent=[10, 1, 2], chain=[20, 3])[0] == 10


def test_top_k_1_is_argmax():
    logits = _logits(1000, seed=5)
    draws = ref.device_draws("cpu", logits, np.arange(50), dict(temperature=2.0, top_k=1))
    assert set(draws.tolist()) == {int(np.argmax(logits))}


def test_bad_sampling_arguments():
    logits = _logits(10, seed=1)
    for bad in (dict(temperature=-1.0), dict(temperature=1.0, top_p=0.0), dict(temperature=1.0, min_p=1.5)):
        with pytest.raises(ValueError):
            ref.device_draws("cpu", logits, [1], bad)


@pytest.mark.parametrize("cfg", [
    dict(temperature=0.8, top_k=40, top_p=0.95, seed=11),
    dict(temperature=1.0, min_p=0.05, repeat_penalty=1.3, seed=12),
    dict(temperature=0.0, repeat_penalty=1.5, seed=0),
])
def test_generation_follows_the_rule_token_by_token(smollm2, cfg):
    """Every sampled token (prefill's and the chained ones, across chunk boundaries) is the rule's
    draw from the teacher-forced logits of the sequence so far, at its own position."""
    prompt = smollm2.tokenizer.encode(PROMPT)
    out = smollm2.generate_tokens(prompt, max_tokens=24, **cfg)
    assert len(out) >= 12, out
    seq = prompt + out
    logits = smollm2.logits(seq)
    rule = dict(cfg)
    last_n = 64
    for j, tok in enumerate(out):
        pos = len(prompt) + j
        window = seq[:pos][-last_n:] if cfg.get("repeat_penalty", 1.0) != 1.0 else []
        assert ref.draw(logits[pos - 1], rule, pos, window) == tok, f"token {j}"
