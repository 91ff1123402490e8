"""Tiny random Llama models written as GGUF files in llama.cpp's conventions.

Used by the reference-logit tests: a random ``transformers.LlamaForCausalLM``
is built, written to GGUF exactly the way llama.cpp's ``convert_hf_to_gguf.py``
(``LlamaModel``) would write it, and the *reference* for an engine under test is
rebuilt from the GGUF file itself (gguf-py read + dequantize + un-permute), so
quantized files are compared against their dequantized weights.

Conventions reproduced here (from llama.cpp's convert script / gguf-py):

* tensor names ``token_embd``, ``output``, ``output_norm``, ``blk.N.attn_norm``,
  ``attn_q``, ``attn_k``, ``attn_v``, ``attn_output``, ``ffn_norm``,
  ``ffn_gate``, ``ffn_up``, ``ffn_down`` (all ``.weight``); ``output`` is
  omitted when the embeddings are tied.
* Q and K projections are permuted from HF's rotate-half RoPE layout into the
  interleaved (GPT-J style, adjacent pairs) layout that ggml's normal-mode RoPE
  uses:  ``w.reshape(n_head, 2, hd//2, in).swapaxes(1, 2).reshape(w.shape)``
  where K uses ``n_head_kv``.
* Llama-3 rope scaling is *not* written as metadata; a ``rope_freqs.weight``
  F32 tensor of ``head_dim/2`` per-frequency divisors is written instead
  (ggml divides ``theta`` by the factor).
* 1-D tensors (norms, rope_freqs) stay F32; 2-D weights take the file dtype.

The model is initialised with larger-than-default gains so that attention is
peaked (RoPE and the Q/K permutation visibly matter) and with log-normal
output-row norms so the output distribution has real argmax margins.  The gains
were calibrated so that float16-level numerical noise passes the test criterion
(argmax >= 99%, mean KL <= 1e-3) with a wide margin, while wrong RoPE /
un-permuted Q/K / missing llama3 factors fail it by orders of magnitude.  ``tests/test_reference_logits.py``
checks that deliberately broken references (no RoPE, un-permuted Q/K, missing
llama3 factors) fail the agreement criterion, i.e. that the test can fail.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from paths import tokenizer_testdata  # noqa: E402

TOKENIZER_DIR = tokenizer_testdata()
VOCAB_GGUF = TOKENIZER_DIR / "ggml-vocab-llama-spm.gguf"  # smallest real vocab (32000)

DTYPES = {
    "F32": (QT.F32, gguf.LlamaFileType.ALL_F32),
    "F16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
    "Q8_0": (QT.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "Q4_0": (QT.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
}


@dataclass(frozen=True)
class TinySpec:
    name: str
    dtype: str = "F32"  # F32, F16, Q8_0, Q4_0
    hidden: int = 128
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 32
    ffn: int = 256
    tied: bool = False
    llama3_rope: bool = False
    llama3_original_ctx: int = 64  # small: positions used by the tests exceed it
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    context_length: int = 2048
    write_key_length: bool = False  # llama.cpp writes attention.key_length when HF config has head_dim
    seed: int = 0
    # init gains (std = gain / sqrt(fan_in))
    qk_gain: float = 1.0
    out_gain: float = 1.5
    row_sigma: float = 0.7  # log-normal spread of output-row norms -> peaked distributions, real argmax margins

    @property
    def rope_parameters(self) -> dict:
        if self.llama3_rope:
            return {
                "rope_type": "llama3",
                "rope_theta": float(self.rope_theta),
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": self.llama3_original_ctx,
            }
        return {"rope_type": "default", "rope_theta": float(self.rope_theta)}


# A representative set of cases (shared by tests).
SPECS = {
    "f32_untied": TinySpec("f32_untied", dtype="F32", tied=False, seed=1),
    "f32_tied_llama3": TinySpec("f32_tied_llama3", dtype="F32", tied=True, llama3_rope=True, seed=2),
    "f16_tied": TinySpec("f16_tied", dtype="F16", hidden=64, head_dim=16, n_layers=3, ffn=192,
                         tied=True, write_key_length=True, seed=3),
    "q8_0_untied": TinySpec("q8_0_untied", dtype="Q8_0", tied=False, seed=4),
    "q4_0_tied": TinySpec("q4_0_tied", dtype="Q4_0", tied=True, seed=5),
    "q4_0_untied_llama3": TinySpec("q4_0_untied_llama3", dtype="Q4_0", tied=False, llama3_rope=True,
                                   n_layers=3, ffn=192, seed=6),
}


# --------------------------------------------------------------------------------------
# HF side
# --------------------------------------------------------------------------------------

def hf_config(spec: TinySpec, vocab_size: int = 32000):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden,
        intermediate_size=spec.ffn,
        num_hidden_layers=spec.n_layers,
        num_attention_heads=spec.n_heads,
        num_key_value_heads=spec.n_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.context_length,
        rms_norm_eps=spec.norm_eps,
        rope_parameters=spec.rope_parameters,
        tie_word_embeddings=spec.tied,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=1,
        eos_token_id=2,
        hidden_act="silu",
    )


def make_hf_model(spec: TinySpec, vocab_size: int = 32000):
    """Random LlamaForCausalLM (float32, eval mode) with test-friendly init."""
    import torch
    from transformers import LlamaForCausalLM

    assert spec.n_heads * spec.head_dim == spec.hidden, "tests assume head_dim*n_heads == hidden"
    cfg = hf_config(spec, vocab_size)
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).float().eval()
    g = torch.Generator().manual_seed(1000 + spec.seed)

    def rnd(shape, std):
        return torch.randn(*shape, generator=g) * std

    with torch.no_grad():
        m = model.model
        m.embed_tokens.weight.copy_(rnd(m.embed_tokens.weight.shape, 1.0))
        for layer in m.layers:
            a, f = layer.self_attn, layer.mlp
            for lin, gain in ((a.q_proj, spec.qk_gain), (a.k_proj, spec.qk_gain), (a.v_proj, 1.0),
                              (a.o_proj, 1.0), (f.gate_proj, 1.0), (f.up_proj, 1.0), (f.down_proj, 1.0)):
                lin.weight.copy_(rnd(lin.weight.shape, gain / math.sqrt(lin.weight.shape[1])))
            layer.input_layernorm.weight.copy_(1.0 + rnd((spec.hidden,), 0.2))
            layer.post_attention_layernorm.weight.copy_(1.0 + rnd((spec.hidden,), 0.2))
        m.norm.weight.copy_(1.0 + rnd((spec.hidden,), 0.2))
        if spec.tied:
            # tied: logits = E h; scale E so logits have a useful spread
            m.embed_tokens.weight.mul_(spec.out_gain / math.sqrt(spec.hidden))
        else:
            model.lm_head.weight.copy_(rnd(model.lm_head.weight.shape, spec.out_gain / math.sqrt(spec.hidden)))
        head = model.lm_head.weight  # == embed_tokens.weight when tied
        head.mul_(torch.exp(spec.row_sigma * rnd((head.shape[0], 1), 1.0)))
    if spec.tied:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


# --------------------------------------------------------------------------------------
# permutation (llama.cpp LlamaModel.permute) and its inverse
# --------------------------------------------------------------------------------------

def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate-half row order -> GGUF interleaved row order (per head)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(head_dim: int, rope: dict) -> np.ndarray:
    """Per-frequency divisors exactly as llama.cpp's convert computes for rope_type llama3."""
    base = rope["rope_theta"]
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    factor = rope.get("factor", 8.0)
    low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    old_ctx = rope.get("original_max_position_embeddings", 8192)
    low_wl, high_wl = old_ctx / low, old_ctx / high
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old_ctx / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


# --------------------------------------------------------------------------------------
# GGUF writing
# --------------------------------------------------------------------------------------

def _copy_tokenizer_kv(writer: GGUFWriter, src: Path) -> int:
    reader = GGUFReader(str(src))
    vocab_size = None
    for key, fld in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = fld.types[0]
        sub = fld.types[-1] if vtype == GGUFValueType.ARRAY else None
        val = fld.contents()
        writer.add_key_value(key, val, vtype, sub_type=sub)
        if key == "tokenizer.ggml.tokens":
            vocab_size = len(val)
    assert vocab_size
    return vocab_size


def vocab_size_of(src: Path = VOCAB_GGUF) -> int:
    reader = GGUFReader(str(src))
    return len(reader.fields["tokenizer.ggml.tokens"].data)


def gguf_tensors_from_hf(model, spec: TinySpec) -> dict[str, np.ndarray]:
    """float32 GGUF-named tensors (numpy row-major = HF [out, in]) with Q/K permuted."""
    sd = {k: v.detach().float().numpy().copy() for k, v in model.state_dict().items()}
    out: dict[str, np.ndarray] = {"token_embd.weight": sd["model.embed_tokens.weight"]}
    if spec.llama3_rope:
        out["rope_freqs.weight"] = llama3_rope_factors(spec.head_dim, spec.rope_parameters)
    for i in range(spec.n_layers):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        out[b + "attn_norm.weight"] = sd[p + "input_layernorm.weight"]
        out[b + "attn_q.weight"] = permute_qk(sd[p + "self_attn.q_proj.weight"], spec.n_heads)
        out[b + "attn_k.weight"] = permute_qk(sd[p + "self_attn.k_proj.weight"], spec.n_kv_heads)
        out[b + "attn_v.weight"] = sd[p + "self_attn.v_proj.weight"]
        out[b + "attn_output.weight"] = sd[p + "self_attn.o_proj.weight"]
        out[b + "ffn_norm.weight"] = sd[p + "post_attention_layernorm.weight"]
        out[b + "ffn_gate.weight"] = sd[p + "mlp.gate_proj.weight"]
        out[b + "ffn_up.weight"] = sd[p + "mlp.up_proj.weight"]
        out[b + "ffn_down.weight"] = sd[p + "mlp.down_proj.weight"]
    out["output_norm.weight"] = sd["model.norm.weight"]
    if not spec.tied:
        out["output.weight"] = sd["lm_head.weight"]
    return out


def write_gguf(path: Path, spec: TinySpec, tensors: dict[str, np.ndarray], *, arch: str = "llama",
               vocab_src: Path = VOCAB_GGUF, dtype_override: dict[str, QT] | None = None) -> Path:
    """Write ``tensors`` (float32, GGUF names) with llama.cpp's metadata for ``spec``.

    ``dtype_override`` maps tensor name -> ggml type to force (used by bad-input tests).
    """
    qtype, ftype = DTYPES[spec.dtype]
    path = Path(path)
    w = GGUFWriter(str(path), arch)
    w.add_name(f"akunu-tiny-{spec.name}")
    w.add_type("model")
    w.add_context_length(spec.context_length)
    w.add_embedding_length(spec.hidden)
    w.add_block_count(spec.n_layers)
    w.add_feed_forward_length(spec.ffn)
    w.add_rope_dimension_count(spec.head_dim)
    w.add_head_count(spec.n_heads)
    w.add_head_count_kv(spec.n_kv_heads)
    w.add_rope_freq_base(spec.rope_theta)
    w.add_layer_norm_rms_eps(spec.norm_eps)
    if spec.write_key_length:
        w.add_key_length(spec.head_dim)
        w.add_value_length(spec.head_dim)
    w.add_file_type(ftype)
    vocab = _copy_tokenizer_kv(w, vocab_src)
    w.add_vocab_size(vocab)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        t = QT.F32 if arr.ndim == 1 else qtype
        if dtype_override and name in dtype_override:
            t = dtype_override[name]
        if t == QT.F32:
            w.add_tensor(name, arr)
        elif t == QT.F16:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            try:
                q = gguf.quants.quantize(arr, t)
            except Exception:  # gguf-py cannot quantize this type: random payload of the right size
                shape = gguf.quants.quant_shape_to_byte_shape(arr.shape, t)
                q = np.random.default_rng(0).integers(0, 256, size=shape, dtype=np.uint8)
            w.add_tensor(name, q, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def build_tiny_gguf(spec: TinySpec, out_dir: Path):
    """Create (or reuse) the GGUF for ``spec``; returns (path, original_hf_model)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = vocab_size_of()
    model = make_hf_model(spec, vocab)
    path = out_dir / f"tiny-{spec.name}.gguf"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        write_gguf(tmp, spec, gguf_tensors_from_hf(model, spec))
        os.replace(tmp, path)
    return path, model


# --------------------------------------------------------------------------------------
# reference: rebuild an HF float32 model from a GGUF file (dequantized weights)
# --------------------------------------------------------------------------------------

def _kv(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def read_dequantized(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata dict, {name: float32 numpy [rows, cols]}) from a GGUF via gguf-py."""
    r = GGUFReader(str(path))
    meta = {k: f.contents() for k, f in r.fields.items()
            if not k.startswith("tokenizer.ggml.") and not k.startswith("GGUF.")}
    tensors = {}
    for t in r.tensors:
        arr = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        tensors[t.name] = arr.reshape(shape)
    return meta, tensors


def reference_from_gguf(path: Path, *, unpermute: bool = True, use_rope_freqs: bool = True):
    """HF LlamaForCausalLM (float32) holding the GGUF's dequantized weights.

    Llama-3 scaling is applied llama.cpp-style: inv_freq = base_inv_freq / rope_freqs.
    ``unpermute`` / ``use_rope_freqs`` = False produce deliberately *wrong* models,
    used to prove that the comparison criterion detects such bugs.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    meta, t = read_dequantized(path)
    arch = meta["general.architecture"]
    assert arch == "llama", arch
    n_heads = int(meta["llama.attention.head_count"])
    n_kv = int(meta["llama.attention.head_count_kv"])
    hidden = int(meta["llama.embedding_length"])
    head_dim = int(meta.get("llama.attention.key_length", meta.get("llama.rope.dimension_count", hidden // n_heads)))
    n_layers = int(meta["llama.block_count"])
    tied = "output.weight" not in t
    vocab = t["token_embd.weight"].shape[0]
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=int(meta["llama.feed_forward_length"]),
        num_hidden_layers=n_layers, num_attention_heads=n_heads, num_key_value_heads=n_kv, head_dim=head_dim,
        max_position_embeddings=int(meta["llama.context_length"]),
        rms_norm_eps=float(meta["llama.attention.layer_norm_rms_epsilon"]),
        rope_parameters={"rope_type": "default", "rope_theta": float(meta.get("llama.rope.freq_base", 10000.0))},
        tie_word_embeddings=tied, attention_bias=False, mlp_bias=False,
    )
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).float().eval()
    up = (lambda w, n: unpermute_qk(w, n)) if unpermute else (lambda w, n: w)
    sd = {"model.embed_tokens.weight": t["token_embd.weight"], "model.norm.weight": t["output_norm.weight"]}
    if not tied:
        sd["lm_head.weight"] = t["output.weight"]
    for i in range(n_layers):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        sd[p + "input_layernorm.weight"] = t[b + "attn_norm.weight"]
        sd[p + "self_attn.q_proj.weight"] = up(t[b + "attn_q.weight"], n_heads)
        sd[p + "self_attn.k_proj.weight"] = up(t[b + "attn_k.weight"], n_kv)
        sd[p + "self_attn.v_proj.weight"] = t[b + "attn_v.weight"]
        sd[p + "self_attn.o_proj.weight"] = t[b + "attn_output.weight"]
        sd[p + "post_attention_layernorm.weight"] = t[b + "ffn_norm.weight"]
        sd[p + "mlp.gate_proj.weight"] = t[b + "ffn_gate.weight"]
        sd[p + "mlp.up_proj.weight"] = t[b + "ffn_up.weight"]
        sd[p + "mlp.down_proj.weight"] = t[b + "ffn_down.weight"]
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (tied and k == "lm_head.weight")]
    assert not missing and not unexpected, (missing, unexpected)
    if tied:
        model.tie_weights()
        assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)
    if use_rope_freqs and "rope_freqs.weight" in t:
        rot = model.model.rotary_emb
        factors = torch.from_numpy(t["rope_freqs.weight"].reshape(-1).astype(np.float32))
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
