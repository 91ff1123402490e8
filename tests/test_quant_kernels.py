"""CPU row kernels (src/backend/cpu/dequantize.cpp, gemm_tiles.cpp, act_quant.cpp) against gguf-py and a
float64 numpy reference.

Goes through the test seams in akunu._testing (src/python/bind_testing_kernels.cpp, bind_testing_device.cpp):
  _testing.dequantize(dtype_name, raw: bytes, n) -> float32[n]
  _testing.gemm(dtype_name, w_raw: bytes, n_rows, k, x: float32[M, K], repacked=False, row_chunk=0)
      -> float32[M, N]
  _testing.dequantize_repacked(dtype_name, raw: bytes, n_rows, k) -> float32[n_rows * k]
(repacked: the load-time layout the CPU device uses for Q4_0 / Q4_1 / Q8_0, see repack_weights: "r8", or
"r16" on builds for AVX-512 VNNI, whose activations are quantized differently: quantize_act_q8x2_reference;
r16 builds also repack Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS: _testing.repacked_dtypes().)

The group-scaled dtypes (Q5_0, Q5_1, IQ4_NL and the 256-element superblocks Q2_K .. Q6_K, IQ4_XS;
src/backend/cpu/kquant_kernels.cpp) run the same tests: random blocks, whose every byte (every
sub-scale bit, every quant) is random except the fp16 factors, drawn with the special values.
"""

import numpy as np
import pytest

import gguf

from akunu import _testing

QT = gguf.GGMLQuantizationType
GROUP_SCALED = ["Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"]
DTYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1"] + GROUP_SCALED
QUANTIZED = {"Q8_0", "Q4_0", "Q4_1"} | set(GROUP_SCALED)  # these take int16 (Q16Act) activations
BLOCK = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20),
         "Q5_0": (32, 22), "Q5_1": (32, 24), "IQ4_NL": (32, 18), "Q2_K": (256, 84), "Q3_K": (256, 110),
         "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210), "IQ4_XS": (256, 136)}
# Byte offsets of the fp16 factors in a block (d, and dmin / m where the format has one).
FP16_FIELDS = {"Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "IQ4_NL": [0],
               "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "IQ4_XS": [0]}
GGUF_QUANTIZES = {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"}  # gguf.quants.quantize supports these

# fp16 scale values worth hitting: zeros of both signs, inf, quiet/signalling NaN, subnormals, extremes.
SPECIAL_FP16 = np.array(
    [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFD55, 0x0001, 0x8001, 0x03FF, 0x7BFF, 0xFBFF, 0x3C00, 0x0400],
    dtype=np.uint16,
)


def fp16_scales(rng, n):
    bits = rng.integers(0, 65536, n, dtype=np.uint16)
    special = rng.random(n) < 0.3
    bits[special] = rng.choice(SPECIAL_FP16, special.sum())
    return bits


def random_raw(rng, name, n_blocks):
    """Random bytes in the dtype's layout, with scales drawn to include the special values."""
    block_size, type_size = BLOCK[name]
    raw = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    if name in FP16_FIELDS:
        for at in FP16_FIELDS[name]:
            raw[:, at:at + 2] = fp16_scales(rng, n_blocks).view(np.uint8).reshape(-1, 2)
    elif name == "F16":
        raw = fp16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(-1)


def gguf_dequantize(name, raw):
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf scales are part of the tests
        return np.asarray(gguf.quants.dequantize(raw, QT[name]), dtype=np.float32).reshape(-1)


def assert_bits_equal(got, ref, exact_nan):
    got_bits, ref_bits = got.view(np.uint32), ref.view(np.uint32)
    if exact_nan:  # a pure bit conversion: NaN payloads are determined
        mismatch = np.nonzero(got_bits != ref_bits)[0]
    else:  # NaN payloads of arithmetic results follow the CPU's NaN rules: only NaN-ness must agree
        ref_nan = np.isnan(ref)
        mismatch = np.nonzero((got_bits != ref_bits) & ~(ref_nan & np.isnan(got)))[0]
    assert mismatch.size == 0, (
        f"{mismatch.size} of {got.size} values differ, e.g. "
        + ", ".join(f"[{i}] {got_bits[i]:#010x} != {ref_bits[i]:#010x}" for i in mismatch[:5])
    )


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("n_blocks", [1, 7, 64, 1000])
def test_dequantize_random_blocks_bit_exact(name, n_blocks):
    rng = np.random.default_rng(1234 + n_blocks)
    raw = random_raw(rng, name, n_blocks)
    n = n_blocks * BLOCK[name][0]
    got = np.asarray(_testing.dequantize(name, raw.tobytes(), n))
    assert got.dtype == np.float32 and got.shape == (n,)
    assert_bits_equal(got, gguf_dequantize(name, raw), exact_nan=name in ("F32", "F16", "BF16"))


def test_dequantize_every_half_and_bf16():
    every = np.arange(65536, dtype=np.uint16)
    got = np.asarray(_testing.dequantize("F16", every.tobytes(), 65536))
    assert_bits_equal(got, every.view(np.float16).astype(np.float32), exact_nan=True)
    got = np.asarray(_testing.dequantize("BF16", every.tobytes(), 65536))
    assert np.array_equal(got.view(np.uint32), every.astype(np.uint32) << 16)


@pytest.mark.parametrize("name", [d for d in DTYPES if d != "F32"])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 300.0])
def test_dequantize_gguf_quantized_data(name, scale):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 1024)) * scale).astype(np.float32)
    raw = np.asarray(quantize(x, name)).reshape(-1)
    got = np.asarray(_testing.dequantize(name, raw.tobytes(), x.size))
    assert_bits_equal(got, gguf_dequantize(name, raw), exact_nan=True)


def quantize_act_reference(x):
    """The engine's activation rule per 32-block: d = amax/32767, q = roundf(x * (1/d)) (ties away
    from zero), int16, evaluated in float32 exactly as the C++ does. Returns the dequantized values q*d."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / np.float32(32767)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv_d = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    t = (blocks * inv_d).astype(np.float32)
    trunc = np.trunc(t)
    q = np.clip(trunc + np.where(np.abs(t - trunc) >= 0.5, np.sign(t), 0), -32767, 32767)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def quantize_blocks_nearest_even(x, block, q_max):
    """Per block of `block` elements: d = amax/q_max, q = x * (1/d) rounded to nearest even, clamped
    to +-q_max, in float32 as the C++ does. Returns the dequantized values q*d."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, block)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / np.float32(q_max)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv_d = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    q = np.clip(np.rint((blocks * inv_d).astype(np.float32)), -q_max, q_max)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def quantize_act_q8x2_reference(x):
    """The r16 layout's activation rule: per 32-block, d = amax/16383."""
    return quantize_blocks_nearest_even(x, 32, 16383)


def quantize_act_q8x2_superblock_reference(x):
    """The r16 layout's activation rule for Q6_K: per 256-block, d = amax/2047."""
    return quantize_blocks_nearest_even(x, 256, 2047)


def quantize(x, name):
    """gguf-py's quantizer where it has one, else tests/gguf_kquants.py's (checked below)."""
    if name in GGUF_QUANTIZES:
        return gguf.quants.quantize(x, QT[name])
    import gguf_kquants

    return gguf_kquants.quantize(x, QT[name])


def random_weights(rng, name, n_rows, k):
    w = (rng.standard_normal((n_rows, k)) * rng.uniform(0.5, 2.0, (n_rows, 1))).astype(np.float32)
    if name == "F32":
        return w.reshape(-1).view(np.uint8)
    if name == "F16":
        return w.astype(np.float16).reshape(-1).view(np.uint8)
    return np.asarray(quantize(w, name)).reshape(-1)


def random_block_weights(rng, name, n_rows, k):
    """Random blocks with finite fp16 factors of a sane size (every quant / sub-scale bit random)."""
    block_size, type_size = BLOCK[name]
    n_blocks = n_rows * k // block_size
    raw = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for i, at in enumerate(FP16_FIELDS[name]):
        # K-quant factors multiply 6-bit sub-scales; Q5_1's m is an offset of either sign.
        v = rng.uniform(0.5, 2.0, n_blocks) * (1e-3 if block_size == 256 else 3e-2)
        if i == 1:
            v = v * rng.choice([-1.0, 1.0], n_blocks) if name == "Q5_1" else v
        raw[:, at:at + 2] = v.astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw.reshape(-1)


def _gemm_k_values(name):
    return [256, 512, 1536] if BLOCK[name][0] == 256 else [32, 64, 576, 1536]


# Weights: quantized random normals for every dtype; for the group-scaled dtypes also random blocks.
@pytest.mark.parametrize("name,k,weights", [(d, k, "quantized") for d in DTYPES for k in _gemm_k_values(d)]
                         + [(d, k, "random_blocks") for d in GROUP_SCALED for k in _gemm_k_values(d)])
@pytest.mark.parametrize("m", [1, 2, 3, 5, 17, 64])
def test_gemm_matches_float64_reference(name, k, m, weights):
    rng = np.random.default_rng(k * 100 + m)
    n_rows = int(rng.choice([1, 3, 5, 7, 13, 31]))
    w_raw = (random_weights if weights == "quantized" else random_block_weights)(rng, name, n_rows, k)
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 3.0, (m, 1))).astype(np.float32)

    y = np.asarray(_testing.gemm(name, w_raw.tobytes(), n_rows, k, x))
    assert y.dtype == np.float32 and y.shape == (m, n_rows)

    w = gguf_dequantize(name, w_raw).astype(np.float64).reshape(n_rows, k)
    xd = quantize_act_reference(x) if name in QUANTIZED else x.astype(np.float64)
    ref = xd @ w.T
    # Only float32 accumulation error is allowed: relative to the sum of |products|.
    scale = np.abs(xd) @ np.abs(w).T
    err = np.abs(y - ref) / (scale + 1e-30)
    assert err.max() < 1e-5, f"max relative error {err.max():.3g}"


# Dtypes the CPU device repacks at load: Q4_0 / Q4_1 / Q8_0 everywhere (r8 or r16 layout), on r16
# builds also Q5_0, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS (src/backend/cpu/r16_kquant_layout.cpp), on
# AVX2 r8 builds the same (src/backend/cpu/r8_kquant_layout.cpp).
REPACKED = list(_testing.repacked_dtypes())
REPACKED_ACT_REFERENCE = {"r8": quantize_act_reference, "r16": quantize_act_q8x2_reference}
# Dtypes whose r16 activation rows have one scale per 256 elements (src/backend/cpu/act_quant.h,
# docs/adr/0027): their GEMMs sum a superblock in int32, the tiles and the int16 panels alike.
SUPERBLOCK_ACT = {"Q6_K"} if _testing.repacked_layout() == "r16" else set()


def repacked_act_reference(name):
    """The activation rule of the repacked GEMM of dtype name."""
    if name in SUPERBLOCK_ACT:
        return quantize_act_q8x2_superblock_reference
    return REPACKED_ACT_REFERENCE[_testing.repacked_layout()]


def test_repacked_dtypes_of_this_build():
    expected = {"Q4_0", "Q4_1", "Q8_0"}
    if _testing.repacked_layout() == "r16":
        assert _testing.cpu_simd() == "avx512vnni"
        expected |= {"Q5_0", "Q5_1", "IQ4_NL", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"}
    elif _testing.cpu_simd() == "avx2":
        expected |= {"Q5_0", "Q5_1", "IQ4_NL", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"}
    assert set(REPACKED) == expected


def _repacked_k_values(name):
    return [256, 768, 1536] if BLOCK[name][0] == 256 else [32, 96, 1536]


@pytest.mark.parametrize("name,k,weights", [(d, k, "quantized") for d in REPACKED for k in _repacked_k_values(d)]
                         + [(d, 512, "random_blocks") for d in REPACKED if d in GROUP_SCALED])
@pytest.mark.parametrize("n_rows", [1, 7, 8, 13, 16, 40])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 17])
def test_repacked_gemm_matches_reference(name, k, weights, n_rows, m):
    # Same reference and tolerance as test_gemm_matches_float64_reference; n_rows covers groups of
    # 8 or 16 with and without a padded tail, m the decode tiles and the prefill tile edges; random
    # blocks set every quant and sub-scale bit (Q6_K's negative scales, Q4_K's packed 6-bit ones).
    rng = np.random.default_rng(n_rows * 10000 + k * 10 + m)
    w_raw = (random_weights if weights == "quantized" else random_block_weights)(rng, name, n_rows, k)
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 3.0, (m, 1))).astype(np.float32)
    w = gguf_dequantize(name, w_raw).astype(np.float64).reshape(n_rows, k)
    xd = repacked_act_reference(name)(x)
    ref = xd @ w.T
    scale = np.abs(xd) @ np.abs(w).T
    # Row ranges split as threads split them, including ranges that start/end inside a group.
    for row_chunk in (0, 3, 16):
        y = np.asarray(_testing.gemm(name, w_raw.tobytes(), n_rows, k, x, repacked=True, row_chunk=row_chunk))
        assert y.dtype == np.float32 and y.shape == (m, n_rows)
        err = np.abs(y - ref) / (scale + 1e-30)
        assert err.max() < 1e-5, f"row_chunk {row_chunk}: max relative error {err.max():.3g}"


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("m", [3, 32])
def test_q6k_gemm_at_its_integer_bound(sign, m):
    # Every quant 0 (value -32), every scale -128, activations all +-1 (q = +-2047, one scale per
    # superblock): a superblock's integer sum, which the r16 kernels add in int32 (the vpdpbusd tiles
    # below 32 rows, the int16 panels from 32), is +-256 x 4096 x 2047 = +-2,146,435,072, 1,048,575
    # short of int32's limit.
    n_rows, k = 16, 512
    block = np.zeros(BLOCK["Q6_K"][1], np.uint8)  # ql[128] qh[64] scales[16] d
    block[192:208] = 0x80
    block[208:210] = np.array([1e-3], np.float16).view(np.uint8)
    w_raw = np.tile(block, n_rows * k // 256)
    x = np.full((m, k), sign, np.float32)
    w = gguf_dequantize("Q6_K", w_raw).astype(np.float64).reshape(n_rows, k)
    ref = x.astype(np.float64) @ w.T
    y = np.asarray(_testing.gemm("Q6_K", w_raw.tobytes(), n_rows, k, x, repacked="Q6_K" in REPACKED))
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max(), (y[0, :4], ref[0, :4])


@pytest.mark.parametrize("name,weights", [(d, "quantized") for d in REPACKED]
                         + [(d, "random_blocks") for d in REPACKED if d in GROUP_SCALED])
@pytest.mark.parametrize("m", [32, 45])
def test_repacked_prefill_gemm_same_bits_as_one_row(name, weights, m):
    # A prefill-sized GEMM gives every activation row the bits a one-row GEMM (decode) gives it, with
    # rows split among threads mid-group, and stays within the reference tolerance. From 32 rows Q6_K
    # takes another kernel (int16 weight panels, src/backend/cpu/r16_panel_gemm.cpp) whose integer
    # sums and float steps are the vpdpbusd tiles' own.
    rng = np.random.default_rng(m)
    n_rows, k = 40, 768
    w_raw = (random_weights if weights == "quantized" else random_block_weights)(rng, name, n_rows, k)
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 3.0, (m, 1))).astype(np.float32)
    rows = np.stack([np.asarray(_testing.gemm(name, w_raw.tobytes(), n_rows, k, x[i:i + 1], repacked=True))[0]
                     for i in range(m)])
    w = gguf_dequantize(name, w_raw).astype(np.float64).reshape(n_rows, k)
    xd = repacked_act_reference(name)(x)
    err = np.abs(rows - xd @ w.T) / (np.abs(xd) @ np.abs(w).T + 1e-30)
    assert err.max() < 1e-5, f"max relative error {err.max():.3g}"
    for row_chunk in (0, 3, 16):
        y = np.asarray(_testing.gemm(name, w_raw.tobytes(), n_rows, k, x, repacked=True, row_chunk=row_chunk))
        assert_bits_equal(y.reshape(-1), rows.reshape(-1), exact_nan=True)


@pytest.mark.parametrize("name", REPACKED)
@pytest.mark.parametrize("n_rows", [1, 9, 16, 35])
def test_repacked_dequantize_bit_exact(name, n_rows):
    # The embedding kernel reads the repacked table: every row must come back bit for bit (random
    # bytes, fp16 factors including inf / NaN / subnormals).
    rng = np.random.default_rng(n_rows)
    block_size = BLOCK[name][0]
    k = 3 * block_size
    raw = random_raw(rng, name, n_rows * k // block_size)
    got = np.asarray(_testing.dequantize_repacked(name, raw.tobytes(), n_rows, k))
    assert_bits_equal(got, gguf_dequantize(name, raw), exact_nan=False)


def test_gemm_odd_k_float_tail():
    # Float weights take any K; 67 exercises the non-multiple-of-8 tail.
    rng = np.random.default_rng(3)
    w = rng.standard_normal((5, 67)).astype(np.float32)
    x = rng.standard_normal((3, 67)).astype(np.float32)
    for name, raw in [("F32", w.tobytes()), ("F16", w.astype(np.float16).tobytes())]:
        y = np.asarray(_testing.gemm(name, raw, 5, 67, x))
        ref = x.astype(np.float64) @ gguf_dequantize(name, np.frombuffer(raw, np.uint8)).astype(np.float64).reshape(5, 67).T
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_gemm_activation_rounding_ties_away_from_zero():
    # amax = 32767 makes d = 1 exactly, so x = 0.5, 2.5, ... are exact ties for the activation
    # quantizer: roundf gives 1 + 3 + 5 - 7 = 2, round-half-to-even would give 0 + 2 + 4 - 6 = 0.
    k = 32
    x = np.zeros((1, k), np.float32)
    x[0, 0] = 32767.0
    x[0, 1:5] = [0.5, 2.5, 4.5, -6.5]
    w = np.zeros((1, k), np.float32)
    w[0, 1:5] = 1.0
    w_raw = np.asarray(gguf.quants.quantize(w, QT.Q8_0)).reshape(-1)
    y = np.asarray(_testing.gemm("Q8_0", w_raw.tobytes(), 1, k, x))
    w_one = float(gguf_dequantize("Q8_0", w_raw)[1])  # 127 * fp16(1/127), not exactly 1
    assert y[0, 0] == pytest.approx(2 * w_one, rel=1e-6)


def test_bad_arguments_raise_value_error():
    x = np.zeros((1, 32), np.float32)
    with pytest.raises(ValueError):
        _testing.dequantize("IQ2_XXS", bytes(66), 256)  # a dtype the CPU kernels do not run
    with pytest.raises(ValueError):
        _testing.dequantize("nope", bytes(4), 1)
    with pytest.raises(ValueError):
        _testing.dequantize("Q4_0", bytes(17), 32)  # one byte short
    with pytest.raises(ValueError):
        _testing.dequantize("Q4_0", bytes(18), 31)  # not a whole block
    with pytest.raises(ValueError):
        _testing.gemm("Q8_0", bytes(34), 2, 32, x)  # two rows need 68 bytes
    with pytest.raises(ValueError):
        _testing.gemm("Q8_0", bytes(68), 2, 64, x)  # x has 32 columns, k says 64
    with pytest.raises(ValueError):
        _testing.gemm("Q4_1", bytes(40), 1, 48, np.zeros((1, 48), np.float32))  # k not a block multiple


@pytest.mark.parametrize("name", [d for d in GROUP_SCALED if d not in GGUF_QUANTIZES])
def test_test_quantizers_round_trip(name):
    # tests/gguf_kquants.py's quantizers (used for the GEMM and model tests) write valid blocks:
    # gguf-py's dequantize of their output is close to the input (within each type's resolution).
    import gguf_kquants

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((16, 512)) * rng.uniform(0.1, 3.0, (16, 1))).astype(np.float32)
    y = gguf_dequantize(name, np.asarray(gguf_kquants.quantize(x, QT[name])).reshape(-1)).reshape(x.shape)
    rel_rms = np.sqrt(((y - x) ** 2).mean()) / np.sqrt((x ** 2).mean())
    bound = {"Q2_K": 0.4, "Q3_K": 0.25}.get(name, 0.1)
    assert rel_rms < bound, f"{name}: relative RMS error {rel_rms:.3f}"


@pytest.mark.parametrize("name", GROUP_SCALED)
def test_gemm_row_ranges(name):
    # Threads split the rows: computing them in ranges gives the same result as all at once.
    rng = np.random.default_rng(11)
    k = 512
    w_raw = random_block_weights(rng, name, 11, k)
    x = rng.standard_normal((5, k)).astype(np.float32)
    whole = np.asarray(_testing.gemm(name, w_raw.tobytes(), 11, k, x))
    for chunk in (1, 3, 4):
        chunked = np.asarray(_testing.gemm(name, w_raw.tobytes(), 11, k, x, row_chunk=chunk))
        np.testing.assert_array_equal(chunked, whole)


@pytest.mark.parametrize("name", GROUP_SCALED + ["Q4_0", "Q8_0", "F16"])
def test_device_hooks_on_cpu(name):
    # _device_gemm / _device_embedding (the hooks tests/test_cuda.py runs the CUDA kernels through)
    # build one command as the table builder does; on the CPU device they must reproduce _gemm and
    # gguf-py (Q4_0 / Q8_0: through the load-time repacked layout).
    rng = np.random.default_rng(8)
    k, n_rows = 512, 19
    w_raw = random_weights(rng, name, n_rows, k)
    for m in (1, 5):
        x = rng.standard_normal((m, k)).astype(np.float32)
        got = np.asarray(_testing.device_gemm("cpu", name, w_raw.tobytes(), n_rows, k, x))
        want = np.asarray(_testing.gemm(name, w_raw.tobytes(), n_rows, k, x, repacked=name in REPACKED))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    ids = np.array([18, 0, 7, 7], dtype=np.uint32)
    got = np.asarray(_testing.device_embedding("cpu", name, w_raw.tobytes(), n_rows, k, ids))
    assert_bits_equal(got, gguf_dequantize(name, w_raw).reshape(n_rows, k)[ids], exact_nan=False)
    with pytest.raises(ValueError):
        _testing.device_embedding("cpu", name, w_raw.tobytes(), n_rows, k, np.array([n_rows], dtype=np.uint32))
    with pytest.raises(ValueError, match="raw size"):  # a clear error, not a crash
        _testing.device_gemm("cpu", name, w_raw.tobytes()[:-1], n_rows, k, x)
    with pytest.raises(ValueError, match="unknown backend"):
        _testing.device_argmax("no-such-backend", np.zeros(4, dtype=np.float32))
