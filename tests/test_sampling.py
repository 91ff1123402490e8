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
    dict(temperature=0.9, top_k=40, frequency_penalty=0.7, presence_penalty=0.4, repeat_last_n=32),
    dict(temperature=1.0, min_p=0.05, repeat_penalty=1.2, frequency_penalty=-0.5, presence_penalty=1.1),
    dict(temperature=0.0, frequency_penalty=1.3, repeat_last_n=24),
]


def _logits(n, seed, scale=3.0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * scale).astype(np.float32)
    x[rng.integers(0, n, 20)] = x[rng.integers(0, n, 20)]  # some exact ties
    return x


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
        got = ref.device_draws("cpu", logits, positions, c, recent, chain, recent_generated=25)
        window, generated = ref.window_of(c, recent, chain, recent_generated=25)
        want = [ref.draw(logits, c, int(p), window, generated) for p in positions]
        assert got.tolist() == want
        if c["temperature"] > 0:
            assert len(set(want)) > 1, "the draws should vary with the position"


# Frequency and presence penalties (OpenAI's), alone and with the others.
PENALTY_CONFIGS = [
    dict(temperature=0.0, frequency_penalty=0.6),
    dict(temperature=0.0, presence_penalty=1.2),
    dict(temperature=0.0, frequency_penalty=0.45, presence_penalty=0.8, repeat_penalty=1.3),
    dict(temperature=0.8, frequency_penalty=0.9, presence_penalty=0.3),
    dict(temperature=1.0, top_k=20, top_p=0.9, frequency_penalty=2.0, presence_penalty=2.0),
    dict(temperature=0.7, min_p=0.1, frequency_penalty=-0.8, presence_penalty=-1.5),
    dict(temperature=1.2, top_p=0.8, repeat_penalty=0.9, frequency_penalty=0.3, presence_penalty=-0.4),
]


def _penalty_case(rng, n):
    """Random logits and a window whose tokens are mostly among the likeliest, repeated (so the
    counts matter), with a few unlikely and out-of-vocabulary ids, a random part of them generated."""
    logits = _logits(n, seed=int(rng.integers(1 << 30)))
    hot = np.argsort(-logits)[:12]
    size = int(rng.integers(1, 90))
    tokens = np.where(rng.random(size) < 0.8, rng.choice(hot, size), rng.integers(0, n + 40, size)).tolist()
    split = int(rng.integers(0, size + 1))
    recent, chain = tokens[:split], tokens[split:][:8]
    return logits, recent, chain, int(rng.integers(0, len(recent) + 1))


@pytest.mark.parametrize("cfg", PENALTY_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_frequency_presence_penalties_draw_the_reference_token(cfg):
    """Over many random logits, windows (repeats, invalid ids, prompt and generated parts, chain
    draws), window lengths and seeds, the CPU command draws exactly the reference's token; and the
    penalties change the draws."""
    rng = np.random.default_rng(len(str(cfg)))
    changed = 0
    for case in range(40):
        n = int(rng.choice([50, 3000]))
        logits, recent, chain, recent_generated = _penalty_case(rng, n)
        c = dict(cfg, seed=int(rng.integers(1 << 62)), repeat_last_n=int(rng.choice([0, 1, 7, 32, 64, 100])))
        positions = np.arange(case * 7, case * 7 + 12)
        got = ref.device_draws("cpu", logits, positions, c, recent, chain, recent_generated)
        window, generated = ref.window_of(c, recent, chain, recent_generated)
        assert got.tolist() == [ref.draw(logits, c, int(p), window, generated) for p in positions], case
        plain = dict(c, frequency_penalty=0.0, presence_penalty=0.0)
        plain_window = ref.window_of(plain, recent, chain, recent_generated)
        changed += got.tolist() != [ref.draw(logits, plain, int(p), *plain_window) for p in positions]
    assert changed >= 5, "the frequency / presence penalties should change some draws"


def test_greedy_with_frequency_and_presence_penalties():
    """OpenAI's rule, logit -= frequency * count + presence, by hand: counts only generated tokens
    (the last recent_generated of the recent ones, and the chain's draws), presence once per token,
    frequency once per occurrence, after the repetition penalty, within the last repeat_last_n."""
    logits = np.zeros(100, dtype=np.float32)
    logits[[10, 20]] = [5.0, 3.2]

    def greedy(recent=(), chain=(), recent_generated=0, **cfg):
        return int(ref.device_draws("cpu", logits, [7], dict(temperature=0.0, **cfg), recent, chain,
                                    recent_generated)[0])

    # presence once: 10 at 5 - 1.5 = 3.5 beats 20 (three times: 0.5).
    assert greedy([10, 10, 10], recent_generated=3, presence_penalty=1.5) == 10
    # frequency per occurrence: 10 at 5 - 3 * 1.0 = 2.0 (once: 4.0).
    assert greedy([10, 10, 10], recent_generated=3, frequency_penalty=1.0) == 20
    assert greedy([10, 10, 10], recent_generated=1, frequency_penalty=1.0) == 10  # the prompt's 10s: not counted
    assert greedy([10], chain=[10, 10], frequency_penalty=1.0) == 20  # the chain's draws are generated
    # Only the window's 10 counts: 5 - 1.0 = 4.0.
    assert greedy([10, 10, 10, 1, 2], recent_generated=5, frequency_penalty=1.0, repeat_last_n=3) == 10
    # A negative penalty favours repeats: 20 at 3.2 + 2 = 5.2.
    assert greedy([20], recent_generated=1, presence_penalty=-2.0) == 20
    # After the repetition penalty: 10 at 5 / 2 - (1 + 0.5) = 1.0 loses to 1.5 (penalties first: 1.75 wins).
    logits[20] = 1.5
    assert greedy([10], recent_generated=1, repeat_penalty=2.0, frequency_penalty=1.0, presence_penalty=0.5) == 20
    # A negative logit: -1 * 2 - 1.5 = -3.5 loses to -3.4.
    logits[:] = -5.0
    logits[[10, 20]] = [-1.0, -3.4]
    assert greedy([10], recent_generated=1, repeat_penalty=2.0, presence_penalty=1.5) == 20


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


@pytest.mark.parametrize("n", [1, 7, 31, 32, 33, 4096, 49152, 128256])
def test_argmax_command_is_numpys_first_maximum(n):
    """The greedy command (argmax_f32, vectorized) returns numpy's first maximum wherever it lies:
    the ends, a vector's lanes and tail, ties (the lower index wins); NaNs never win unless they
    are logit 0 (the scalar rule it replaced: x[i] > best, from best = x[0])."""
    from akunu import _testing

    rng = np.random.default_rng(n)
    for where in sorted({0, n - 1, n // 2, min(n - 1, 8), min(n - 1, 31), min(n - 1, 32)}):
        x = rng.standard_normal(n).astype(np.float32)
        x[where] = 10.0
        assert _testing.device_argmax("cpu", x) == where
        other = (where + n // 3 + 1) % n
        x[other] = 10.0  # a tie
        assert _testing.device_argmax("cpu", x) == min(where, other)
        if n > 2:
            x[(where + 1) % n] = np.nan  # ignored
            expect = 0 if (where + 1) % n == 0 else min(where, other)
            assert _testing.device_argmax("cpu", x) == expect
    assert _testing.device_argmax("cpu", np.full(n, -np.inf, np.float32)) == 0
    zeros = np.zeros(n, np.float32)
    zeros[::2] = -0.0
    assert _testing.device_argmax("cpu", zeros) == 0  # +0 == -0: the first
    if n > 1:
        x = rng.standard_normal(n).astype(np.float32)
        x[0] = np.nan
        assert _testing.device_argmax("cpu", x) == 0


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
    dict(temperature=0.9, top_k=40, frequency_penalty=0.8, presence_penalty=0.5, seed=13),
    dict(temperature=0.0, frequency_penalty=1.5, presence_penalty=0.5, repeat_last_n=16, seed=0),
])
def test_generation_follows_the_rule_token_by_token(smollm2, cfg):
    """Every sampled token (prefill's and the chained ones, across chunk boundaries) is the rule's
    draw from the teacher-forced logits of the sequence so far, at its own position (the penalties'
    window: the last repeat_last_n tokens, the prompt's not generated)."""
    prompt = smollm2.tokenizer.encode(PROMPT)
    out = smollm2.generate_tokens(prompt, max_tokens=24, **cfg)
    assert len(out) >= 12, out
    seq = prompt + out
    logits = smollm2.logits(seq)
    for j, tok in enumerate(out):
        pos = len(prompt) + j
        window, generated = ref.window_of(cfg, seq[:pos], recent_generated=j)
        assert ref.draw(logits[pos - 1], cfg, pos, window, generated) == tok, f"token {j}"


def test_frequency_penalty_stops_greedy_repeats(smollm2):
    """End to end on SmolLM2: its greedy continuation of a list repeats tokens over and over; with
    a high frequency penalty (over every generated token: repeat_last_n >= max_tokens) greedy
    decoding avoids repeating them, and the prompt's tokens are not penalized (the first token is
    the unpenalized one)."""
    prompt = smollm2.tokenizer.encode("Colors: red, blue, green, red, blue, green, red, blue,")
    plain = smollm2.generate_tokens(prompt, max_tokens=40)
    assert len(plain) == 40 and max(plain.count(t) for t in set(plain)) >= 6, plain
    penalized = smollm2.generate_tokens(prompt, max_tokens=40, frequency_penalty=2.0, presence_penalty=2.0,
                                        repeat_last_n=40)
    assert plain[0] in prompt and penalized[0] == plain[0]
    repeats = lambda ids: len(ids) - len(set(ids))  # noqa: E731
    assert repeats(penalized) < repeats(plain) // 2, (smollm2.tokenizer.decode(plain), smollm2.tokenizer.decode(penalized))
    # Greedy with the penalties is still deterministic, and a penalty of 0 is plain greedy.
    assert smollm2.generate_tokens(prompt, max_tokens=40, frequency_penalty=2.0, presence_penalty=2.0,
                                   repeat_last_n=40) == penalized
    assert smollm2.generate_tokens(prompt, max_tokens=40, frequency_penalty=0.0, presence_penalty=0.0) == plain
