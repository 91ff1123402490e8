"""Metal backend vs the CPU backend (itself validated against transformers) on the same GGUFs.

Runs on a Mac with Apple silicon and a build that has the Metal backend (README, "macOS");
skipped elsewhere, with the reason. On Linux the Metal kernels are still checked, through the MSL
shim: tests/test_metal_shim.py. The checks are tests/test_cuda.py's for CUDA: teacher-forced
logits (argmax agreement >= 99%, mean KL <= 1e-3), greedy tokens, chain_decode == repeated
decode_step, one table replayed at many positions, long contexts, the Q8_0 KV cache, every weight
dtype's GEMM / GEMV / embedding against float64, the argmax, the sampler drawing the CPU's exact
tokens, sampled generation, grammar-constrained decoding, profiling.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import akunu
import akunu._testing

if "metal" not in akunu.built_backends():
    pytest.skip("Metal vs CPU tests need macOS on Apple silicon: this build of akunu has no Metal backend "
                "(the Metal kernels are checked on Linux by tests/test_metal_shim.py)", allow_module_level=True)
if not akunu._testing.metal_available():
    pytest.skip("Metal vs CPU tests need an Apple GPU: MTLCreateSystemDefaultDevice found none",
                allow_module_level=True)

import gguf_kquants as kq  # noqa: E402
import gguf_writer as gw  # noqa: E402
from grammar_checks import all_tokens_mask, constrained_run, mask_of  # noqa: E402
import references as rf  # noqa: E402
import sampling_reference as ref  # noqa: E402
from test_quant_kernels import DTYPES, gguf_dequantize, random_block_weights, random_weights  # noqa: E402
import tiny_models as tm  # noqa: E402

SPECS = dict(tm.LLAMA_SPECS)
SPECS["q4_1_untied"] = replace(tm.LLAMA_SPECS["q8_0_untied"], name="q4_1_untied", dtype="Q4_1", seed=11)
SPECS["bf16_tied"] = replace(tm.LLAMA_SPECS["q4_0_tied"], name="bf16_tied", dtype="BF16", seed=12)
SPECS["f16_hd64"] = tm.family_spec("llama", "f16_hd64", dtype="F16", hidden=256, n_heads=4, n_kv_heads=2, head_dim=64,
                                   seed=13)
SPECS["q8_0_hd128"] = tm.family_spec("llama", "q8_0_hd128", dtype="Q8_0", hidden=256, n_heads=2, n_kv_heads=1,
                                     head_dim=128, seed=14)
SPECS["f16_heads32"] = tm.family_spec("llama", "f16_heads32", dtype="F16", hidden=2048, n_layers=1, n_heads=32,
                                      n_kv_heads=8, head_dim=64, seed=16)

PROMPTS = [
    "Once upon a time, in a small village by the sea, there lived",
    "def quicksort(arr):\n    if len(arr) <= 1:\n        return arr\n",
    "The capital of France is",
]
FLOAT_DTYPES = {"F32", "F16", "BF16"}


def cpu_metal_pairs(build, **kwargs):
    """name -> (cpu Model, metal Model) of the model file build(name) writes; each built once."""
    cache = {}

    def get(name):
        if name not in cache:
            path = str(build(name))
            cache[name] = (akunu.Model(path, backend="cpu", **kwargs), akunu.Model(path, backend="metal", **kwargs))
        return cache[name]

    return get


@pytest.fixture(scope="module")
def pair(gguf_dir):
    return cpu_metal_pairs(lambda name: gw.build_gguf(SPECS[name], gguf_dir)[0])


@pytest.fixture(scope="module")
def arch_pair(gguf_dir):
    return cpu_metal_pairs(lambda name: gw.build_gguf(tm.ARCH_SPECS[name], gguf_dir)[0])


@pytest.fixture(scope="module")
def kq_pair(gguf_dir):
    return cpu_metal_pairs(lambda name: kq.build_case_gguf(kq.CASES[name], gguf_dir)[0])


def _tokens(model, n=300):
    ids = model.tokenizer.encode(rf.VARIED_TEXT)
    while len(ids) < 256:
        ids = ids + model.tokenizer.encode(" " + rf.VARIED_TEXT)
    return ids[:n]


def _greedy(model, ids, n):
    model._engine.reset()
    first = model._engine.prefill(ids)
    return [first] + list(model._engine.chain_decode(first, n - 1))


def _steps(model, ids, n):
    model._engine.reset()
    cur = model._engine.prefill(ids)
    out = [cur]
    for _ in range(n - 1):
        cur = model._engine.decode_step(cur)
        out.append(cur)
    return out


def assert_logits_match(cpu, metal):
    ids = _tokens(cpu)
    got = np.asarray(metal.logits(ids))
    assert np.isfinite(got).all()
    c = rf.compare_logits(np.asarray(cpu.logits(ids)), got)
    assert rf.meets_bar(c), rf.describe(c)


def assert_greedy_match(cpu, metal, n=32):
    for prompt in PROMPTS:
        ids = cpu.tokenizer.encode(prompt)
        a, b = _greedy(cpu, ids, n), _greedy(metal, ids, n)
        assert a == b, (prompt, a, b)


def assert_long_decode_matches(cpu, metal, n_ctx, steps):
    """Both fed the CPU's tokens far into the context; a differing argmax must be a near tie in the
    CPU's own logits (as tests/test_cuda.py allows)."""
    ids = _tokens(cpu, 300)
    ids = (ids * (n_ctx // len(ids) + 1))[:n_ctx]
    cpu._engine.reset()
    metal._engine.reset()
    a, b = cpu._engine.prefill(ids), metal._engine.prefill(ids)
    seq, disagreements = list(ids), []
    for _ in range(steps):
        if a != b:
            disagreements.append((len(seq), a, b))
        seq.append(a)
        a, b = cpu._engine.decode_step(a), metal._engine.decode_step(a)
    assert len(disagreements) <= 2, disagreements
    for n, a, b in disagreements:
        logits = cpu.logits(seq[:n])[-1]
        assert logits[a] - logits[b] < 0.05, (n, a, b, logits[a], logits[b])


# ------------------------------------------------------------------ whole models

def test_auto_picks_metal(pair, gguf_dir):
    path, _ = gw.build_gguf(SPECS["f32_untied"], gguf_dir)
    assert akunu.Model(str(path)).backend == "metal"


@pytest.mark.parametrize("name", list(SPECS))
def test_logits_match_cpu(name, pair):
    assert_logits_match(*pair(name))


@pytest.mark.parametrize("name", ["f32_untied", "q4_0_tied", "q8_0_untied", "q4_1_untied", "bf16_tied"])
def test_greedy_matches_cpu(name, pair):
    assert_greedy_match(*pair(name))


@pytest.mark.parametrize("name", ["f32_untied", "q4_0_untied_llama3"])
def test_chain_equals_steps(name, pair):
    _, metal = pair(name)
    ids = metal.tokenizer.encode(PROMPTS[0])
    n = 300  # crosses the chain chunk (64 or 128 on Apple GPUs) with a ragged last chunk
    assert _greedy(metal, ids, n) == _steps(metal, ids, n)


def test_one_table_replayed_at_many_positions(pair):
    cpu, metal = pair("q4_0_untied_llama3")
    builds = metal._engine.table_builds
    for k, prompt in enumerate(PROMPTS + [rf.VARIED_TEXT[:400]]):
        ids = cpu.tokenizer.encode(prompt)
        outs = []
        for m in (cpu, metal):
            m._engine.reset()
            first = m._engine.prefill(ids)
            seq = [first]
            for chunk in (5, 17, 5):
                seq += list(m._engine.chain_decode(seq[-1], chunk))
            outs.append(seq)
        assert outs[0] == outs[1], (k, outs)
    assert metal._engine.table_builds == builds == 1


@pytest.mark.parametrize("name", ["f16_tied", "f16_hd64", "q8_0_hd128", "f16_heads32"])
def test_long_context_attention_matches_cpu(name, pair):
    assert_long_decode_matches(*pair(name), n_ctx=1000, steps=24)


@pytest.mark.parametrize("name", ["f16_hd64", "q8_0_hd128", "q4_0_tied"])
def test_q8_kv_cache_models_match_cpu(name, gguf_dir):
    path = str(gw.build_gguf(SPECS[name], gguf_dir)[0])
    cpu, metal = (akunu.Model(path, backend=b, kv_cache_dtype="q8_0") for b in ("cpu", "metal"))
    assert_logits_match(cpu, metal)
    assert_long_decode_matches(cpu, metal, n_ctx=600, steps=16)


@pytest.mark.parametrize("name", list(kq.CASES))
def test_group_scaled_logits_match_cpu(name, kq_pair):
    assert_logits_match(*kq_pair(name))


@pytest.mark.parametrize("name", ["mixed_q4_k_m", "q6_k_tied"])
def test_group_scaled_greedy_matches_cpu(name, kq_pair):
    assert_greedy_match(*kq_pair(name))


@pytest.mark.parametrize("name", list(tm.ARCH_SPECS))
def test_arch_logits_match_cpu(name, arch_pair):
    assert_logits_match(*arch_pair(name))


@pytest.mark.parametrize("name", ["mistral_q8_0", "gemma2_f16", "gemma3_q8_0", "qwen3_f16", "phi3_q4_0"])
def test_arch_decode_past_window_matches_cpu(name, arch_pair):
    cpu, metal = arch_pair(name)
    ids = _tokens(cpu, 100)
    assert _greedy(cpu, ids, 40) == _greedy(metal, ids, 40)


def test_profile_times_every_command(pair):
    _, metal = pair("q4_0_tied")
    ids = metal.tokenizer.encode(PROMPTS[0])
    metal._engine.reset()
    token = metal._engine.prefill(ids)
    profile = metal._engine.profile_decode_step(token)  # (label, kernel, ms) per command, GPU timestamps
    assert [(label, kernel) for label, kernel, _ in profile] == [
        (c["label"], c["kernel"]) for c in metal._engine.dispatch_table]
    assert all(ms >= 0 for _, _, ms in profile) and sum(ms for _, _, ms in profile) > 0


# ------------------------------------------------------------------ single commands

def _gemm_case(name, m, n_rows, k, seed):
    rng = np.random.default_rng(seed)
    w_raw = (random_weights if name in FLOAT_DTYPES else random_block_weights)(rng, name, n_rows, k)
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 3.0, (m, 1))).astype(np.float32)
    y = np.asarray(akunu._testing.device_gemm("metal", name, w_raw.tobytes(), n_rows, k, x))
    w = gguf_dequantize(name, w_raw).astype(np.float64).reshape(n_rows, k)
    ref_y = x.astype(np.float64) @ w.T
    err = np.abs(y - ref_y) / (np.abs(x.astype(np.float64)) @ np.abs(w).T + 1e-30)
    # M = 1: the f32 GEMV. M > 1: simdgroup-matrix tiles of half copies.
    tol = 1e-4 if m == 1 else 3e-3
    assert err.max() < tol, f"{name} m={m} n={n_rows} k={k}: max relative error {err.max():.3g}"


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("m", [1, 3, 70])
def test_gemm_matches_float64(name, m):
    _gemm_case(name, m, 37, 1024, seed=m * 7 + len(name))


def _silu(g):
    return g / (1.0 + np.exp(-g))


def _gelu_tanh(g):
    return 0.5 * g * (1.0 + np.tanh(0.7978845608028654 * (g + 0.044715 * g ** 3)))


@pytest.mark.parametrize("name", ["Q4_0", "Q8_0", "F16", "Q4_K", "Q6_K"])
@pytest.mark.parametrize("norm, activation", [(True, ""), (True, "silu"), (False, "silu"), (True, "gelu_tanh")])
def test_fused_gemv_matches_float64(name, norm, activation):
    rng = np.random.default_rng(len(name) + norm + len(activation))
    n_rows, k = 300, 1024
    parts = 2 if activation else 1
    make = random_weights if name in FLOAT_DTYPES else random_block_weights
    w_raw = np.concatenate([make(rng, name, n_rows, k) for _ in range(parts)])
    x = (rng.standard_normal(k) * 3.0).astype(np.float32)
    norm_w = rng.uniform(0.5, 1.5, k).astype(np.float32) if norm else None
    eps = 1e-5
    y = np.asarray(akunu._testing.device_gemv_fused("metal", name, w_raw.tobytes(), n_rows, k, x, norm_w, eps,
                                                    activation))
    w = gguf_dequantize(name, w_raw).astype(np.float64).reshape(parts * n_rows, k)
    xn = x.astype(np.float64)
    if norm:
        xn = xn / np.sqrt(np.mean(xn * xn) + eps) * norm_w
    dots = w @ xn
    bound = np.abs(w) @ np.abs(xn) + 1e-30
    if not activation:
        err = np.abs(y - dots) / bound
    else:
        act = _silu if activation == "silu" else _gelu_tanh
        gate, up = dots[:n_rows], dots[n_rows:]
        err = np.abs(y - act(gate) * up) / (1.1 * np.abs(up) * bound[:n_rows] + np.abs(act(gate)) * bound[n_rows:])
    assert err.max() < 1e-4, f"{name} norm={norm} act={activation!r}: max error {err.max():.3g}"


@pytest.mark.parametrize("name", [d for d in DTYPES if d != "F32"])
def test_embedding_matches_gguf(name):
    rng = np.random.default_rng(3)
    k, n_rows = 512, 20
    raw = (random_weights if name in FLOAT_DTYPES else random_block_weights)(rng, name, n_rows, k)
    ids = np.array([0, 19, 7, 7, 3, 16], dtype=np.uint32)
    got = np.asarray(akunu._testing.device_embedding("metal", name, raw.tobytes(), n_rows, k, ids))
    want = gguf_dequantize(name, raw).reshape(n_rows, k)[ids]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("n", [1, 7, 4096, 32003, 151936])
def test_argmax_matches_numpy(n):
    rng = np.random.default_rng(n)
    for where in {0, n - 1, n // 2}:
        x = rng.standard_normal(n).astype(np.float32)
        x[where] = 10.0
        assert akunu._testing.device_argmax("metal", x) == where
        if n > 1:
            other = (where + n // 3 + 1) % n
            x[other] = 10.0
            assert akunu._testing.device_argmax("metal", x) == min(where, other)


SAMPLE_CONFIGS = [
    dict(temperature=1.0, seed=1),
    dict(temperature=0.7, top_k=40, seed=2),
    dict(temperature=1.2, top_p=0.9, seed=3),
    dict(temperature=0.8, top_k=200, top_p=0.95, min_p=0.02, seed=2**40 + 4),
    dict(temperature=1.0, min_p=0.1, repeat_penalty=1.3, repeat_last_n=32, seed=5),
    dict(temperature=0.0, repeat_penalty=1.4, repeat_last_n=64, seed=0),
    dict(temperature=0.8, top_k=40, frequency_penalty=0.7, presence_penalty=0.4, repeat_last_n=300, seed=7),
]


@pytest.mark.parametrize("n", [7, 3000, 32003, 151936])
@pytest.mark.parametrize("cfg", SAMPLE_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_sample_matches_cpu(n, cfg):
    rng = np.random.default_rng(n + len(str(cfg)))
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    x[rng.integers(0, n, 30)] += 12
    x[rng.integers(0, n, 50)] = x[rng.integers(0, n, 50)]  # exact ties
    recent = rng.integers(0, n, 400).tolist()
    chain = rng.integers(0, n, 9).tolist()
    positions = np.arange(1000, 1024)
    want = ref.device_draws("cpu", x, positions, cfg, recent, chain, recent_generated=150)
    got = ref.device_draws("metal", x, positions, cfg, recent, chain, recent_generated=150)
    assert got.tolist() == want.tolist()


def test_sample_distribution_on_metal():
    x = (np.random.default_rng(7).standard_normal(60) * 1.5).astype(np.float32)
    cfg = dict(temperature=1.0, top_k=30, top_p=0.9, min_p=0.03)
    draws = ref.device_draws("metal", x, np.arange(20000), dict(cfg, seed=99))
    ref.assert_draws_follow(draws, ref.kept_probabilities(x, cfg))


@pytest.mark.parametrize("cfg", [dict(temperature=0.7, top_k=40, top_p=0.95, seed=11),
                                 dict(temperature=0.8, min_p=0.05, repeat_penalty=1.3, seed=12)],
                         ids=["top-k-p", "min-p-penalty"])
def test_sampled_generation_matches_cpu(cfg, pair):
    """Same seed, same tokens, but where two Gumbel scores nearly tie in the CPU's own logits."""
    cpu, metal = pair("q4_0_untied_llama3")
    for prompt in PROMPTS:
        ids = cpu.tokenizer.encode(prompt)
        a = cpu.generate_tokens(ids, max_tokens=80, **cfg)
        b = metal.generate_tokens(ids, max_tokens=80, **cfg)
        j = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        if j is None:
            assert len(a) == len(b), (prompt, a, b)
            continue
        pos = len(ids) + j
        seen = (ids + a)[:pos]
        window, generated = ref.window_of(cfg, seen, recent_generated=j)
        scores = ref.scores(cpu.logits(seen)[-1], cfg, pos, window, generated)
        assert abs(float(scores[a[j]] - scores[b[j]])) < 0.1, (prompt, j, a[j], b[j])


# ------------------------------------------------------------------ grammar-constrained decoding

def test_constrained_all_allowed_equals_plain_generation_on_metal(pair):
    _, metal = pair("q4_0_untied_llama3")
    for prompt in PROMPTS:
        ids = metal.tokenizer.encode(prompt)
        params = akunu.SamplingParams(max_tokens=60)
        plain = metal.generate_tokens(ids, params)
        assert constrained_run(metal._engine, ids, len(plain), params.to_core()) == plain


def test_masked_choice_on_metal(pair):
    _, metal = pair("q4_0_untied_llama3")
    engine = metal._engine
    ids = metal.tokenizer.encode(PROMPTS[0])
    logits = metal.logits(ids)[-1]
    vocab = metal.config["vocab_size"]
    rng = np.random.default_rng(5)
    for allowed in [[int(np.argmin(logits))], [vocab - 1], rng.choice(vocab, 7, replace=False).tolist()]:
        engine._begin_constrained(ids, akunu.SamplingParams().to_core())
        token = engine._choose_token(mask_of(allowed, engine))
        engine._end_constrained(0, "stop")
        assert token in allowed and logits[token] >= max(logits[t] for t in allowed) - 1e-3
    engine._begin_constrained(ids, akunu.SamplingParams().to_core())
    assert engine._choose_token(all_tokens_mask(engine)) == int(np.argmax(logits))
    engine._end_constrained(0, "stop")
