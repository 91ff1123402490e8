"""References and the comparison with them: transformers float32 holding a GGUF's dequantized
weights, the logit-agreement criterion every engine comparison clears, and the varied text the
comparisons run on.

The reference of a tiny model (tests/tiny_models.py) is rebuilt from the GGUF file itself
(gguf-py read + dequantize + un-permute, tests/gguf_writer.py), so quantized files are compared
against their dequantized weights. Deliberately broken references (no Q/K un-permute, no llama3
factors, a family feature removed) must fail the criterion: the ``test_reference_*`` tests check
that every comparison can fail.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gguf_writer import GGUF_ARCH, PERMUTED_QK, name_pairs, read_dequantized_cached, unpermute_qk
from tiny_models import GEMMA_FAMILY, ArchSpec, hf_config, model_class

# --------------------------------------------------------------------------------------
# reference: rebuild an HF float32 model from a GGUF file (dequantized weights)
# --------------------------------------------------------------------------------------


def reference_from_gguf(path: Path, spec: ArchSpec, *, unpermute: bool = True, use_rope_freqs: bool = True,
                        unfold_norms: bool = True, **overrides):
    """HF model of ``spec.family`` (float32) holding the GGUF's dequantized weights.

    Llama 3 scaling is applied llama.cpp-style from the file's rope_freqs tensor:
    inv_freq = base_inv_freq / rope_freqs. ``overrides`` change the config; ``unpermute=False``
    keeps the file's interleaved Q/K rows, ``use_rope_freqs=False`` ignores rope_freqs and
    ``unfold_norms=False`` keeps Gemma's stored w + 1: all produce deliberately *wrong*
    references for the tests that prove the criterion bites.
    """
    import torch

    meta, t = read_dequantized_cached(path)
    assert meta["general.architecture"] == GGUF_ARCH[spec.family], meta["general.architecture"]
    vocab = t["token_embd.weight"].shape[0]
    rope_freqs = t.get("rope_freqs.weight")
    if rope_freqs is not None:  # the divisors replace the config's scaling
        overrides.setdefault("rope_parameters", {"rope_type": "default", "rope_theta": float(spec.rope_theta)})
    model = model_class(spec.family)(hf_config(spec, vocab, **overrides)).float().eval()
    sd = {}
    for hf, gg in name_pairs(spec):
        w = t[gg]
        if spec.family in GEMMA_FAMILY and hf.endswith("norm.weight") and unfold_norms:
            w = w - 1.0
        if spec.family in PERMUTED_QK and hf.endswith(("q_proj.weight", "k_proj.weight")) and unpermute:
            w = unpermute_qk(w, spec.n_heads if "q_proj" in hf else spec.n_kv_heads)
        sd[hf] = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (spec.tied and k == "lm_head.weight")]
    assert not missing and not unexpected, (missing, unexpected)
    if spec.tied:
        model.tie_weights()
        assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)
    if use_rope_freqs and rope_freqs is not None:
        rot = model.model.rotary_emb
        factors = torch.from_numpy(rope_freqs.reshape(-1).astype(np.float32))
        base = rot.inv_freq.detach().clone()
        assert factors.shape == base.shape, (factors.shape, base.shape)
        rot.inv_freq = base / factors
        if hasattr(rot, "original_inv_freq"):
            rot.original_inv_freq = rot.inv_freq
    return model


def hf_logits(model, tokens) -> np.ndarray:
    import torch

    with torch.no_grad():
        ids = torch.tensor([list(tokens)], dtype=torch.long)
        return model(ids).logits[0].float().numpy()


# --------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------

def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def compare_logits(ref: np.ndarray, got: np.ndarray) -> dict:
    """argmax agreement and mean KL(softmax(ref) || softmax(got))."""
    ref = np.asarray(ref)
    got = np.asarray(got)
    assert ref.shape == got.shape, (ref.shape, got.shape)
    lp, lq = log_softmax(ref), log_softmax(got)
    kl = (np.exp(lp) * (lp - lq)).sum(-1)
    return {
        "agree": float((ref.argmax(-1) == got.argmax(-1)).mean()),
        "kl_mean": float(kl.mean()),
        "kl_max": float(kl.max()),
        "max_abs": float(np.abs(ref.astype(np.float64) - got).max()),
        "n": int(ref.shape[0]),
    }


# The bar every comparison with a reference must clear (the issues' acceptance criterion).
MIN_AGREE = 0.99
MAX_KL = 1e-3


def meets_bar(c: dict) -> bool:
    """Whether a compare_logits result clears the bar."""
    return c["agree"] >= MIN_AGREE and c["kl_mean"] <= MAX_KL


def criterion(ref: np.ndarray, got: np.ndarray) -> tuple[bool, dict]:
    """(clears the bar, compare_logits result)."""
    c = compare_logits(ref, got)
    return meets_bar(c), c


def assert_decode_matches_teacher_forcing(model, prompt: list[int], n: int) -> None:
    """Greedy decode replays (one token each) after `prompt` pick what teacher-forced logits of the
    same tokens pick: the decode table reads the KV cache as the all-rows passes do."""
    model._engine.reset()
    first = model._engine.prefill(prompt)
    gen = [first] + list(model._engine.chain_decode(first, n - 1))
    model._engine.reset()
    assert gen == model.logits(prompt + gen[:-1])[len(prompt) - 1:].argmax(-1).tolist()


def describe(c: dict) -> str:
    """A compare_logits result against the bar, for assertion messages."""
    return (f"argmax agreement {c['agree']:.4f} (need >= {MIN_AGREE}), mean KL {c['kl_mean']:.3e} "
            f"(need <= {MAX_KL}), max KL {c['kl_max']:.3e}, max |dlogit| {c['max_abs']:.3e}, n={c['n']}")


# --------------------------------------------------------------------------------------
# text
# --------------------------------------------------------------------------------------

VARIED_TEXT = (
    "The lighthouse keeper climbed the spiral stairs every evening, counting the steps out of habit: "
    "one hundred and twelve, never more, never fewer. Storms rolled in from the west in late autumn, "
    "and the ships that passed the headland learned to trust the slow white sweep of the lamp.\n\n"
    "def fibonacci(n: int) -> list[int]:\n"
    "    seq = [0, 1]\n"
    "    while len(seq) < n:\n"
    "        seq.append(seq[-1] + seq[-2])\n"
    "    return seq[:n]\n\n"
    "for i, x in enumerate(fibonacci(12)):\n"
    "    print(f\"{i:>3}: {x}\")  # 0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89\n\n"
    "Quarterly figures: revenue rose 14.7% to $3,482,190.55 while costs fell from 2,901,334 to 2,756,020; "
    "the ratio 0.7915 beat the forecast of 0.8123 by 2.6 percentage points (Q3 2023 vs. Q3 2022).\n\n"
    "<|im_start|>user\nCan you explain why the sky is blue in one sentence?<|im_end|>\n"
    "<|im_start|>assistant\nSunlight scatters off air molecules, and shorter blue wavelengths scatter "
    "much more strongly than red ones, so blue light reaches your eyes from every direction.<|im_end|>\n"
    "Sie sagte: \u00abDas Wetter ist heute sch\u00f6n, nicht wahr?\u00bb \u2014 und l\u00e4chelte. "
    "Caf\u00e9 cr\u00e8me, na\u00efve fa\u00e7ade, \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8, "
    "emoji \U0001F600 and symbols \u2211 \u221a \u03c0 \u2248 3.14159.\n"
    "In 1969, Apollo 11 landed at 20:17 UTC; Armstrong stepped out six hours later, and the phrase "
    "about one small step was heard by roughly 600 million people around the world."
)


def reference_tokenizer(gguf_dir: Path, gguf_file: str):
    """transformers tokenizer built from a GGUF's tokenizer metadata (independent of akunu)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf_file)


def varied_tokens(tokenizer, min_tokens: int = 256, max_tokens: int = 320) -> list[int]:
    ids = tokenizer(VARIED_TEXT, add_special_tokens=True)["input_ids"]
    while len(ids) < min_tokens:
        ids = ids + tokenizer(" " + VARIED_TEXT, add_special_tokens=False)["input_ids"]
    return list(ids[:max_tokens])
