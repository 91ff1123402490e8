"""Teacher-forced logits of akunu vs transformers float32 on the same (dequantized) weights.

Criterion (every case): argmax agreement >= 99% and mean KL(softmax_ref || softmax_akunu) <= 1e-3
over >= 256 tokens of varied text tokenized with the model's real tokenizer.

The ``test_reference_*`` tests check the reference side only (they need no engine): the GGUF
writer follows llama.cpp's conventions (transformers' own GGUF loader and our gguf-py based
loader both reproduce the original torch model), and deliberately broken references
(no Q/K un-permute, no RoPE, missing llama3 factors) fail the criterion, so the akunu tests
can fail.
"""
from __future__ import annotations

import numpy as np
import pytest

import gguf_writer as gw
import references as rf
import tiny_models as tm

CASES = list(tm.LLAMA_SPECS)



@pytest.fixture(scope="module")
def tiny_ref(tiny_gguf, varied_ids):
    """name -> (gguf path, reference logits from the dequantized GGUF weights)."""
    cache = {}

    def get(name):
        if name not in cache:
            path, _orig = tiny_gguf(name)
            ref_model = rf.reference_from_gguf(path, tm.LLAMA_SPECS[name])
            cache[name] = (path, rf.hf_logits(ref_model, varied_ids))
        return cache[name]

    return get


# ------------------------------------------------------------------ reference side


@pytest.mark.parametrize("name", CASES)
def test_reference_gguf_roundtrip(name, tiny_gguf, tiny_ref, varied_ids):
    """Our GGUF -> (gguf-py dequantize + un-permute) -> HF reproduces the original torch model
    (exactly for F32, within quantization for the rest), and the output is not degenerate."""
    spec = tm.LLAMA_SPECS[name]
    path, orig = tiny_gguf(name)
    _, ref = tiny_ref(name)
    c = rf.compare_logits(rf.hf_logits(orig, varied_ids), ref)
    if spec.dtype == "F32":
        assert c["max_abs"] < 1e-3, c
    else:  # quantized: close to the original but not identical (the reference is the dequantized weights)
        assert 0 < c["max_abs"], c
    assert len(set(ref.argmax(-1).tolist())) >= 30, "reference argmax is degenerate"


@pytest.mark.parametrize("name", [n for n in CASES if not tm.LLAMA_SPECS[n].llama3_rope])
def test_reference_matches_transformers_gguf_loader(name, tiny_gguf, tiny_ref, varied_ids, tmp_path):
    """transformers' own GGUF loader (independent un-permute + dequantize) agrees with ours."""
    import torch
    from transformers import AutoModelForCausalLM

    path, _ = tiny_gguf(name)
    _, ref = tiny_ref(name)
    theirs = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    got = rf.hf_logits(theirs, varied_ids)
    assert np.abs(got - ref).max() < 1e-3, np.abs(got - ref).max()


@pytest.mark.parametrize("name", [n for n in CASES if tm.LLAMA_SPECS[n].llama3_rope])
def test_reference_rope_freqs_match_hf_llama3(name, tiny_gguf):
    """rope_freqs.weight divides the base frequencies into exactly HF's llama3 inv_freq."""
    import torch

    path, orig = tiny_gguf(name)
    _, t = gw.read_dequantized(path)
    spec = tm.LLAMA_SPECS[name]
    factors = t["rope_freqs.weight"].reshape(-1)
    assert factors.shape == (spec.head_dim // 2,)
    assert factors.min() == 1.0 and factors.max() == 8.0 and ((factors > 1) & (factors < 8)).any(), factors
    base = 1.0 / (spec.rope_theta ** (np.arange(0, spec.head_dim, 2, dtype=np.float64) / spec.head_dim))
    hf_inv = orig.model.rotary_emb.inv_freq.detach().to(torch.float64).numpy()
    np.testing.assert_allclose(base / factors, hf_inv, rtol=1e-5)


@pytest.mark.parametrize("name", ["f32_untied", "f32_tied_llama3", "q4_0_untied_llama3"])
def test_reference_criterion_detects_rope_bugs(name, tiny_gguf, tiny_ref, varied_ids):
    """The criterion is strong enough: typical RoPE / layout bugs fail it."""
    import torch

    path, _ = tiny_gguf(name)
    _, ref = tiny_ref(name)
    spec = tm.LLAMA_SPECS[name]
    broken = {"qk_not_unpermuted": rf.hf_logits(rf.reference_from_gguf(path, spec, unpermute=False), varied_ids)}
    if spec.llama3_rope:
        broken["rope_freqs_ignored"] = rf.hf_logits(rf.reference_from_gguf(path, spec, use_rope_freqs=False),
                                                    varied_ids)
    model = rf.reference_from_gguf(path, spec)
    with torch.no_grad():
        x = torch.tensor([varied_ids])
        broken["no_rope"] = model(x, position_ids=torch.zeros_like(x)).logits[0].numpy()
    for what, logits in broken.items():
        ok, c = rf.criterion(ref, logits)
        assert not ok, f"{what} would pass: {rf.describe(c)}"


# ------------------------------------------------------------------ akunu vs reference


@pytest.fixture(scope="module")
def tiny_akunu(akunu_mod, tiny_gguf):
    cache = {}

    def get(name):
        if name not in cache:
            path, _ = tiny_gguf(name)
            cache[name] = akunu_mod.Model(str(path))
        return cache[name]

    return get


@pytest.mark.parametrize("name", CASES)
def test_akunu_config_matches_gguf(name, tiny_akunu):
    spec = tm.LLAMA_SPECS[name]
    cfg = tiny_akunu(name).config
    expect = dict(architecture="llama", dim=spec.hidden, n_layers=spec.n_layers, n_heads=spec.n_heads,
                  n_kv_heads=spec.n_kv_heads, head_dim=spec.head_dim, ffn_dim=spec.ffn, vocab_size=32000)
    got = {k: cfg[k] for k in expect}
    assert got == expect
    assert cfg["rope_theta"] == pytest.approx(spec.rope_theta)
    assert cfg["norm_eps"] == pytest.approx(spec.norm_eps, rel=1e-5)
    assert 256 <= cfg["context_length"] <= spec.context_length


@pytest.mark.parametrize("name", CASES)
def test_akunu_logits_match_transformers(name, tiny_akunu, tiny_ref, varied_ids):
    _, ref = tiny_ref(name)
    got = tiny_akunu(name).logits(varied_ids)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32, type(got)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.isfinite(got).all()
    ok, c = rf.criterion(ref, got)
    assert ok, f"{name} ({tm.LLAMA_SPECS[name].dtype}): {rf.describe(c)}"


def test_akunu_logits_repeatable_and_prefix_consistent(tiny_akunu, varied_ids):
    """logits() starts from a fresh cache: the same call twice is identical, and a prefix's
    logits equal the first rows of the full call (causality)."""
    m = tiny_akunu("f32_untied")
    a = m.logits(varied_ids)
    b = m.logits(varied_ids)
    np.testing.assert_array_equal(a, b)
    p = m.logits(varied_ids[:40])
    np.testing.assert_allclose(p, a[:40], atol=2e-3, rtol=0)


# ------------------------------------------------------------------ real model: SmolLM2 Q4_1

SMOL_TEXT = (
    "The old library at the end of Harbor Street had been closed for years, but every Thursday "
    "someone still left a lamp burning in the reading room. Nobody in town admitted to it.\n\n"
    "```python\ndef merge_sorted(a, b):\n    i = j = 0\n    out = []\n    while i < len(a) and j < len(b):\n"
    "        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n"
    "            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n```\n\n"
    "Table 3: 12 runs, mean latency 48.25 ms (sd 3.9), p99 = 71.0 ms; throughput 1,024 req/s at 65% CPU. "
    "Between 1990 and 2020 the population grew from 5,135,000 to 7,794,798 (+51.8%).\n\n"
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the boiling point of water at sea level, in Celsius and Fahrenheit?<|im_end|>\n"
    "<|im_start|>assistant\nAt sea level, water boils at 100 degrees Celsius, which is 212 degrees "
    "Fahrenheit.<|im_end|>\n"
    "Photosynthesis converts light energy into chemical energy: plants take in carbon dioxide and water "
    "and, using sunlight, produce glucose and release oxygen as a by-product."
)


@pytest.fixture(scope="session")
def smol_tokens(smollm2_tokenizer_ref):
    ids = smollm2_tokenizer_ref(SMOL_TEXT, add_special_tokens=False)["input_ids"]
    assert len(ids) >= 256, len(ids)
    assert 1 in ids and 2 in ids, "chat turn must tokenize <|im_start|>/<|im_end|> as special tokens"
    return list(ids)


@pytest.fixture(scope="session")
def smol_ref_model(smollm2_path):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(smollm2_path.parent), gguf_file=smollm2_path.name,
                                                dtype=torch.float32).eval()


@pytest.fixture(scope="session")
def smol_ref_logits(smol_ref_model, smol_tokens):
    return rf.hf_logits(smol_ref_model, smol_tokens)


def test_reference_smollm2_sane(smol_ref_model, smollm2_tokenizer_ref):
    """The transformers reference itself works: greedy continuation names Paris."""
    import torch

    tok = smollm2_tokenizer_ref
    ids = tok("The capital of France is", add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        out = smol_ref_model.generate(ids, max_new_tokens=4, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids.shape[1]:])


def test_akunu_smollm2_logits_match_transformers(smollm2, smol_ref_logits, smol_tokens):
    got = smollm2.logits(smol_tokens)
    assert got.shape == smol_ref_logits.shape, (got.shape, smol_ref_logits.shape)
    assert got.dtype == np.float32 and np.isfinite(got).all()
    ok, c = rf.criterion(smol_ref_logits, got)
    assert ok, f"SmolLM2 Q4_1: {rf.describe(c)}"
