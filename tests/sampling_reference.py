"""The sampling rule in NumPy, written from its specification (src/core/sampling_rule.h's comment),
not from the C++: repetition penalty -> top-k -> softmax at temperature over the top-k set ->
min-p -> top-p -> Gumbel-max with PCG-hash noise keyed on (seed, position, token).

`draw` returns the token the engine must draw; `kept_probabilities` the distribution it samples
from (for the chi-square tests).
"""
from __future__ import annotations

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


def penalized(logits, window, penalty: float) -> np.ndarray:
    x = np.array(logits, dtype=np.float32)
    if penalty != 1.0:
        for t in sorted({int(t) for t in window if 0 <= int(t) < len(x)}):
            x[t] = x[t] / np.float32(penalty) if x[t] > 0 else x[t] * np.float32(penalty)
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


def kept_probabilities(logits, cfg: dict, window=()) -> np.ndarray:
    """The distribution a draw samples from: softmax(x / T) over the kept tokens, 0 elsewhere."""
    x = penalized(logits, window, float(cfg.get("repeat_penalty", 1.0)))
    inv_t = _rule(cfg)[0]
    keep = kept_mask(x, cfg)
    z = (x.astype(np.float64) - float(x.max())) * float(inv_t)
    p = np.where(keep, np.exp(z), 0.0)
    return p / p.sum()


def scores(logits, cfg: dict, position: int, window=()) -> np.ndarray:
    """Every token's Gumbel-max score before the filters cut any (greedy: the penalized logits)."""
    x = penalized(logits, window, float(cfg.get("repeat_penalty", 1.0)))
    inv_t = _rule(cfg)[0]
    if inv_t == 0:
        return x
    g = gumbel_noise(noise_stream(int(cfg.get("seed", 0)), position), len(x))
    # fmaf((x - max), 1/T, g): the float32 product is exact in float64, one rounding at the end
    # (double rounding through float64 differs from fmaf in about 1 case in 2^29).
    return ((x - x.max()).astype(np.float64) * float(inv_t) + g.astype(np.float64)).astype(np.float32)


def draw(logits, cfg: dict, position: int, window=()) -> int:
    """The token the engine draws at `position` from `logits`; `window`: the tokens the
    repetition penalty looks at (already cut to repeat_last_n)."""
    s = scores(logits, cfg, position, window)
    if _rule(cfg)[0] == 0:
        return int(np.argmax(s))
    keep = kept_mask(penalized(logits, window, float(cfg.get("repeat_penalty", 1.0))), cfg)
    return int(np.argmax(np.where(keep, s, -np.inf)))


# --- shared by the tests: the engine's sampling command, and a chi-square check of its draws ---

def device_draws(backend: str, logits, positions, cfg: dict, recent=(), chain=()) -> np.ndarray:
    """One draw of the engine's sampling command per position (akunu._testing.device_sample)."""
    from akunu import _testing

    return _testing.device_sample(backend, logits, np.asarray(positions, dtype=np.uint32),
                                  cfg.get("temperature", 0.0), cfg.get("top_k", 0), cfg.get("top_p", 1.0),
                                  cfg.get("min_p", 0.0), cfg.get("repeat_penalty", 1.0),
                                  cfg.get("repeat_last_n", 64), cfg.get("seed", 0), list(recent), list(chain))


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
