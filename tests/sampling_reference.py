"""The sampling rule in NumPy, written from its specification (src/core/sampling_rule.h's comment),
not from the C++: penalties (repetition, then frequency and presence) -> top-k -> softmax at
temperature over the top-k set -> min-p -> top-p -> Gumbel-max with PCG-hash noise keyed on (seed,
position, token).

The penalties look at a window of the latest tokens (cut to repeat_last_n by the caller), the last
`generated` of which were generated: the repetition penalty at each distinct token of the window,
the frequency and presence penalties at each distinct token among the generated ones.

`draw` returns the token the engine must draw; `kept_probabilities` the distribution it samples
from (for the chi-square tests).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

U32 = np.uint32


def pcg_hash(v):
    v = np.asarray(v, dtype=U32)
    with np.errstate(over="ignore"):
        state = v * U32(747796405) + U32(2891336453)
        word = ((state >> ((state >> U32(28)) + U32(4))) ^ state) * U32(277803737)
    return (word >> U32(22)) ^ word


def noise_stream(seed: int, position: int):
    lo, hi = U32(seed & 0xFFFFFFFF), U32(seed >> 32)
    with np.errstate(over="ignore"):
        return pcg_hash(pcg_hash(pcg_hash(lo) ^ hi) + U32(position))


def gumbel_noise(stream, n: int) -> np.ndarray:
    h = pcg_hash(U32(stream) ^ pcg_hash(np.arange(n, dtype=U32)))
    u = ((h >> U32(9)).astype(np.float32) + np.float32(0.5)) * np.float32(1.0 / 8388608.0)
    return -np.log(-np.log(u))


def order_key(x: np.ndarray) -> np.ndarray:
    u = np.asarray(x, dtype=np.float32).view(U32)
    return np.where(u & U32(0x80000000), ~u, u | U32(0x80000000))


def penalized(logits, window, cfg: dict, generated: int = 0) -> np.ndarray:
    """The logits after the penalties: `window` the tokens they look at, its last `generated` the
    generated ones (the only ones the frequency and presence penalties count)."""
    x = np.array(logits, dtype=np.float32)
    repeat = np.float32(cfg.get("repeat_penalty", 1.0))
    frequency = np.float32(cfg.get("frequency_penalty", 0.0))
    presence = np.float32(cfg.get("presence_penalty", 0.0))
    window = [int(t) for t in window]
    counts = Counter(window[len(window) - min(generated, len(window)):])
    for t in sorted({t for t in window if 0 <= t < len(x)}):
        logit, count = x[t], counts[t]
        if count == 0 or (frequency == 0 and presence == 0):
            if repeat != 1:
                x[t] = logit / repeat if logit > 0 else logit * repeat
            continue
        # frequency * count + presence, rounded once to float32; for a negative logit, logit *
        # repeat minus that, rounded once. The products of float32s (or of a float32 and a count
        # below 2**24) are exact in float64, and so are the sums for penalties of ordinary sizes,
        # whose rounding to float32 is then the single (fused) one.
        p = np.float32(float(frequency) * count + float(presence))
        if logit > 0:
            x[t] = (logit / repeat if repeat != 1 else logit) - p
        else:
            x[t] = np.float32(float(logit) * float(repeat) - float(p))
    return x


def _rule(cfg: dict):
    t = float(cfg.get("temperature", 0.0))
    inv_t = np.float32(0.0) if t <= 0 else np.float32(1.0) / np.float32(t)
    min_p = float(cfg.get("min_p", 0.0))
    log_min_p = np.float32(np.log(np.float32(min_p))) if min_p > 0 else np.float32(-np.inf)
    return inv_t, int(cfg.get("top_k", 0)), np.float32(cfg.get("top_p", 1.0)), log_min_p


def kept_mask(x: np.ndarray, cfg: dict) -> np.ndarray:
    """Which tokens of the (already penalized) logits survive top-k, min-p and top-p."""
    inv_t, top_k, top_p, log_min_p = _rule(cfg)
    n = len(x)
    keys = order_key(x).astype(np.int64)
    m = x.max()
    min_key = 0
    if 0 < top_k < n:
        min_key = int(np.sort(keys)[::-1][top_k - 1])
    if top_p < 1:
        weights = (np.exp((x - m) * inv_t).astype(np.float32) * np.float32(2.0 ** 40)).astype(np.uint64)
        cand = np.nonzero(keys >= min_key)[0]
        order = cand[np.argsort(-keys[cand], kind="stable")]
        total = int(weights[cand].sum(dtype=np.uint64))
        target = min(total, int(np.ceil(float(top_p) * float(total))))
        cum = np.cumsum(weights[order].astype(object))
        j = int(np.argmax(cum >= target))
        min_key = max(min_key, int(keys[order[j]]))
    return (keys >= min_key) & ((x - m) * inv_t >= log_min_p)


def kept_probabilities(logits, cfg: dict, window=(), generated: int = 0) -> np.ndarray:
    """The distribution a draw samples from: softmax(x / T) over the kept tokens, 0 elsewhere."""
    x = penalized(logits, window, cfg, generated)
    inv_t = _rule(cfg)[0]
    keep = kept_mask(x, cfg)
    z = (x.astype(np.float64) - float(x.max())) * float(inv_t)
    p = np.where(keep, np.exp(z), 0.0)
    return p / p.sum()


def scores(logits, cfg: dict, position: int, window=(), generated: int = 0) -> np.ndarray:
    """Every token's Gumbel-max score before the filters cut any (greedy: the penalized logits)."""
    x = penalized(logits, window, cfg, generated)
    inv_t = _rule(cfg)[0]
    if inv_t == 0:
        return x
    g = gumbel_noise(noise_stream(int(cfg.get("seed", 0)), position), len(x))
    # fmaf((x - max), 1/T, g): the float32 product is exact in float64, one rounding at the end
    # (double rounding through float64 differs from fmaf in about 1 case in 2^29).
    return ((x - x.max()).astype(np.float64) * float(inv_t) + g.astype(np.float64)).astype(np.float32)


def draw(logits, cfg: dict, position: int, window=(), generated: int = 0) -> int:
    """The token the engine draws at `position` from `logits`; `window`: the tokens the penalties
    look at (already cut to repeat_last_n), the last `generated` of them generated."""
    s = scores(logits, cfg, position, window, generated)
    if _rule(cfg)[0] == 0:
        return int(np.argmax(s))
    keep = kept_mask(penalized(logits, window, cfg, generated), cfg)
    return int(np.argmax(np.where(keep, s, -np.inf)))


# --- shared by the tests: the engine's sampling command, and a chi-square check of its draws ---

def device_draws(backend: str, logits, positions, cfg: dict, recent=(), chain=(), recent_generated: int = 0) -> np.ndarray:
    """One draw of the engine's sampling command per position (akunu._testing.device_sample);
    the last `recent_generated` of the `recent` tokens, and the `chain`, were generated."""
    from akunu import _testing

    return _testing.device_sample(
        backend, logits, np.asarray(positions, dtype=np.uint32), temperature=cfg.get("temperature", 0.0),
        top_k=cfg.get("top_k", 0), top_p=cfg.get("top_p", 1.0), min_p=cfg.get("min_p", 0.0),
        repeat_penalty=cfg.get("repeat_penalty", 1.0), repeat_last_n=cfg.get("repeat_last_n", 64),
        frequency_penalty=cfg.get("frequency_penalty", 0.0), presence_penalty=cfg.get("presence_penalty", 0.0),
        seed=cfg.get("seed", 0), recent=list(recent), recent_generated=recent_generated, chain=list(chain))


def penalties_on(cfg: dict) -> bool:
    return (cfg.get("repeat_penalty", 1.0) != 1.0 or cfg.get("frequency_penalty", 0.0) != 0.0
            or cfg.get("presence_penalty", 0.0) != 0.0)


def window_of(cfg: dict, recent=(), chain=(), recent_generated: int = 0) -> tuple[list, int]:
    """The penalties' window of a draw after `recent` then `chain` (the last repeat_last_n of them;
    none when no penalty is on) and how many of its last tokens were generated."""
    if not penalties_on(cfg):
        return [], 0
    n = cfg.get("repeat_last_n", 64)
    window = (list(recent) + list(chain))[-n:] if n else []
    return window, min(len(window), recent_generated + len(chain))


def assert_draws_follow(draws, probs) -> None:
    """No draw of a cut token, and a chi-square of the counts against `probs` (rare tokens pooled so
    every cell expects >= 5 draws) below dof + 7.5 sqrt(2 dof) + 10, far in the tail (p < 1e-6)."""
    counts = np.bincount(draws, minlength=len(probs))
    assert counts[probs == 0].sum() == 0, "drew a token the filters cut"
    expected = probs * len(draws)
    keep = expected >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    obs, exp = obs[exp > 0], exp[exp > 0]
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    dof = len(obs) - 1
    assert chi2 < dof + 7.5 * np.sqrt(2 * dof) + 10, (chi2, dof)
