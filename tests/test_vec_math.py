"""The CPU kernels' vectorized exp and SiLU (src/backend/cpu/vec_math.h) against numpy in float64."""

import numpy as np

from akunu import _testing


def _grid() -> np.ndarray:
    rng = np.random.default_rng(0)
    edges = [-200.0, -104.0, -88.0, -87.3, -87.0, -20.0, -1e-30, 0.0, 1e-30, 0.34657, 0.5, 20.0, 88.0, 88.7, 89.0, 200.0]
    return np.concatenate([np.linspace(-100, 100, 20011), rng.normal(0, 8, 4003), edges]).astype(np.float32)


def test_exp_matches_numpy_to_float_precision():
    x = _grid()
    got, total = _testing.exp_shifted(x, 0.0)
    ref = np.exp(x.astype(np.float64))
    normal = (ref > 1.2e-38) & (ref < 3.4e38)
    rel = np.abs(got[normal] - ref[normal]) / ref[normal]
    assert rel.max() < 1e-6, f"max relative error {rel.max():.2e}"
    # Out of float range: underflow to 0, overflow to +inf, never garbage.
    assert np.all(got[ref <= 1.2e-38] < 1.2e-38) and np.all(got[ref <= 1.2e-38] >= 0)
    assert np.all(np.isinf(got[ref >= 3.4e38]))
    finite = np.isfinite(got)
    assert np.isinf(total) or abs(total - got[finite].astype(np.float64).sum()) <= 1e-5 * abs(total)


def test_exp_shift_and_special_values():
    x = np.array([1.0, 2.0, 3.0, np.nan, -np.inf, np.inf, 0.5, 7.0, 9.0], dtype=np.float32)
    got, _ = _testing.exp_shifted(x, 3.0)
    with np.errstate(invalid="ignore"):
        ref = np.exp(x.astype(np.float64) - 3.0)
    assert np.isnan(got[3]) and got[4] == 0.0 and np.isinf(got[5])
    keep = np.isfinite(ref)
    np.testing.assert_allclose(got[keep], ref[keep], rtol=1e-6)
    # The softmax use: scores minus their max, summed.
    s = np.random.default_rng(1).normal(0, 5, 1001).astype(np.float32)
    e, total = _testing.exp_shifted(s, float(s.max()))
    ref = np.exp(s.astype(np.float64) - s.max())
    # s - max is rounded to float32 first (|s - max| <= 40: up to ~2e-6 absolute), hence the looser rtol.
    np.testing.assert_allclose(e, ref, rtol=5e-6, atol=1e-30)
    assert abs(total - ref.sum()) < 1e-5 * ref.sum()


def test_silu_mul_matches_numpy():
    rng = np.random.default_rng(2)
    gate = np.concatenate([rng.normal(0, 4, 8191), [-100.0, -90.0, 90.0, 0.0]]).astype(np.float32)
    up = rng.normal(0, 1, gate.size).astype(np.float32)
    got = _testing.silu_mul(gate, up)
    g = gate.astype(np.float64)
    ref = g / (1 + np.exp(-g)) * up
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-30)
