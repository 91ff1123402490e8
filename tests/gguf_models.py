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

import functools
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

@functools.lru_cache(maxsize=8)
def _tokenizer_kv(src: str) -> tuple:
    """(key, value, type, sub_type) of every tokenizer.* field of ``src`` (parsed once: slow)."""
    reader = GGUFReader(src)
    out = []
    for key, fld in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = fld.types[0]
        sub = fld.types[-1] if vtype == GGUFValueType.ARRAY else None
        out.append((key, fld.contents(), vtype, sub))
    return tuple(out)


def _copy_tokenizer_kv(writer: GGUFWriter, src: Path) -> int:
    vocab_size = None
    for key, val, vtype, sub in _tokenizer_kv(str(src)):
        writer.add_key_value(key, val, vtype, sub_type=sub)
        if key == "tokenizer.ggml.tokens":
            vocab_size = len(val)
    assert vocab_size
    return vocab_size


def vocab_size_of(src: Path = VOCAB_GGUF) -> int:
    for key, val, _, _ in _tokenizer_kv(str(src)):
        if key == "tokenizer.ggml.tokens":
            return len(val)
    raise KeyError("tokenizer.ggml.tokens")


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
               vocab_src: Path = VOCAB_GGUF, dtype_override: dict[str, QT] | None = None,
               rope_dim: int | None = None, extra_kv=None, quantize=None, file_type=None) -> Path:
    """Write ``tensors`` (float32, GGUF names) with llama.cpp's metadata for ``spec``.

    ``dtype_override`` maps tensor name -> ggml type to force (bad-input tests, mixed-dtype files).
    ``quantize(arr, qtype)`` -> GGUF block bytes replaces gguf-py's quantizer (which falls back to a
    random payload for the types it cannot quantize); ``file_type`` overrides general.file_type.
    ``rope_dim`` overrides rope.dimension_count (partial rotary); ``extra_kv(writer)`` adds an
    architecture's own keys (sliding window, softcaps, ...).
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
    w.add_rope_dimension_count(spec.head_dim if rope_dim is None else rope_dim)
    w.add_head_count(spec.n_heads)
    w.add_head_count_kv(spec.n_kv_heads)
    w.add_rope_freq_base(spec.rope_theta)
    w.add_layer_norm_rms_eps(spec.norm_eps)
    if spec.write_key_length:
        w.add_key_length(spec.head_dim)
        w.add_value_length(spec.head_dim)
    if extra_kv is not None:
        extra_kv(w)
    w.add_file_type(ftype if file_type is None else file_type)
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
        elif quantize is not None:
            w.add_tensor(name, quantize(arr, t), raw_dtype=t)
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


# ======================================================================================
# Other architectures: Qwen2, Qwen3, Mistral, Gemma, Gemma 2, Gemma 3, Phi-3
# ======================================================================================
#
# Same recipe as the Llama functions above: a random transformers model of the family (tiny
# sizes, peaked attention), written to GGUF the way llama.cpp's convert_hf_to_gguf.py writes that
# family, and a reference rebuilt from the GGUF's dequantized tensors. Conventions per family
# (llama.cpp's converter / llama-model.cpp / gguf-py constants):
#
# * qwen2:   no Q/K permutation (NeoX RoPE), attn_{q,k,v}.bias F32.
# * qwen3:   attn_q_norm / attn_k_norm [head_dim] (plain weights), key_length written (head_dim
#            may differ from hidden / heads), usually tied.
# * mistral: converted by LlamaModel: general.architecture "llama", Q/K permuted. The converter
#            writes no window; akunu honours llama.attention.sliding_window when a file has it.
# * gemma:   every *norm.weight stored as w + 1 (HF's (1 + w) RMSNorm), tied, GELU-tanh,
#            embeddings * sqrt(hidden), NeoX RoPE.
# * gemma2:  + post_attention_norm / post_ffw_norm (pre-FFN norm is ffn_norm),
#            attn_logit_softcapping, final_logit_softcapping, attention.sliding_window; layers
#            0, 2, 4... slide (llama.cpp's swa pattern 2); attention scale 1/sqrt(head_dim).
# * gemma3:  + attn_q_norm / attn_k_norm (also + 1), no softcaps; layer i slides unless
#            i % 6 == 5; sliding layers use RoPE base 10000, global ones rope.freq_base.
# * phi3:    attn_qkv (Q, K, V rows) and ffn_up holding gate then up rows; NeoX RoPE over
#            rope.dimension_count = int(partial_rotary_factor * hidden) // heads dims;
#            attention.sliding_window written (0 when none) but llama.cpp ignores it.

GEMMA_FAMILY = ("gemma", "gemma2", "gemma3")
GGUF_ARCH = {"qwen2": "qwen2", "qwen3": "qwen3", "mistral": "llama", "gemma": "gemma", "gemma2": "gemma2",
             "gemma3": "gemma3", "phi3": "phi3"}


@dataclass(frozen=True)
class ArchSpec:
    name: str
    family: str                 # key of GGUF_ARCH
    dtype: str = "F16"
    hidden: int = 128
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 32
    ffn: int = 256
    tied: bool = False
    rope_theta: float = 10000.0
    local_rope_theta: float = 10000.0  # gemma3 sliding layers
    norm_eps: float = 1e-6
    context_length: int = 2048
    write_key_length: bool = True
    sliding_window: int | None = None
    attn_softcap: float | None = None
    final_softcap: float | None = None
    partial_rotary: float = 1.0
    rope_linear_factor: float | None = None  # gemma3: linear scaling of the global layers (4B and up)
    seed: int = 0
    qk_gain: float = 1.0
    qk_norm_gain: float = 1.8      # QK-norm weights: scores stay peaked after normalizing heads
    bias_std: float = 0.5
    out_gain: float = 1.5
    row_sigma: float = 0.7

    @property
    def rope_dim(self) -> int:
        return int(self.partial_rotary * self.hidden) // self.n_heads if self.family == "phi3" else self.head_dim


def arch_hf_config(spec: ArchSpec, vocab_size: int = 32000, **overrides):
    """The transformers config of ``spec`` (``overrides`` replace fields: used for broken references)."""
    import transformers as tf

    common = dict(vocab_size=vocab_size, hidden_size=spec.hidden, intermediate_size=spec.ffn,
                  num_hidden_layers=spec.n_layers, num_attention_heads=spec.n_heads,
                  num_key_value_heads=spec.n_kv_heads, head_dim=spec.head_dim,
                  max_position_embeddings=spec.context_length, rms_norm_eps=spec.norm_eps,
                  tie_word_embeddings=spec.tied, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    rope = {"rope_type": "default", "rope_theta": float(spec.rope_theta)}
    f = spec.family
    if f == "qwen2":
        kw = dict(common, rope_parameters=rope, use_sliding_window=False)
        cls = tf.Qwen2Config
    elif f == "qwen3":
        kw = dict(common, rope_parameters=rope, use_sliding_window=False, attention_bias=False)
        cls = tf.Qwen3Config
    elif f == "mistral":
        kw = dict(common, rope_parameters=rope, sliding_window=spec.sliding_window)
        cls = tf.MistralConfig
    elif f == "gemma":
        kw = dict(common, rope_parameters=rope, hidden_act="gelu_pytorch_tanh")
        cls = tf.GemmaConfig
    elif f == "gemma2":
        kw = dict(common, rope_parameters=rope, hidden_activation="gelu_pytorch_tanh",
                  query_pre_attn_scalar=spec.head_dim, sliding_window=spec.sliding_window,
                  attn_logit_softcapping=spec.attn_softcap, final_logit_softcapping=spec.final_softcap,
                  layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(spec.n_layers)])
        cls = tf.Gemma2Config
    elif f == "gemma3":
        kw = dict(common, hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=spec.head_dim,
                  sliding_window=spec.sliding_window,
                  rope_parameters={"full_attention": (dict(rope, rope_type="linear", factor=spec.rope_linear_factor)
                                                      if spec.rope_linear_factor else dict(rope)),
                                   "sliding_attention": {"rope_type": "default",
                                                         "rope_theta": float(spec.local_rope_theta)}},
                  layer_types=["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(spec.n_layers)])
        cls = tf.Gemma3TextConfig
    elif f == "phi3":
        kw = dict(common, rope_parameters=dict(rope, partial_rotary_factor=spec.partial_rotary),
                  sliding_window=None, hidden_act="silu")
        kw.pop("head_dim")
        cls = tf.Phi3Config
    else:
        raise ValueError(f)
    kw.update(overrides)
    cfg = cls(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def _arch_model_class(family: str):
    import transformers as tf

    return {"qwen2": tf.Qwen2ForCausalLM, "qwen3": tf.Qwen3ForCausalLM, "mistral": tf.MistralForCausalLM,
            "gemma": tf.GemmaForCausalLM, "gemma2": tf.Gemma2ForCausalLM, "gemma3": tf.Gemma3ForCausalLM,
            "phi3": tf.Phi3ForCausalLM}[family]


def make_arch_hf_model(spec: ArchSpec, vocab_size: int = 32000, **overrides):
    """Random model of ``spec.family`` (float32, eval) with the Llama test's init recipe."""
    import torch

    cfg = arch_hf_config(spec, vocab_size, **overrides)
    model = _arch_model_class(spec.family)(cfg).float().eval()
    g = torch.Generator().manual_seed(2000 + spec.seed)
    gemma = spec.family in GEMMA_FAMILY

    def rnd(shape, std):
        return torch.randn(*shape, generator=g) * std

    with torch.no_grad():
        m = model.model
        for name, prm in sorted(model.named_parameters()):
            if name.startswith("lm_head") or name == "model.embed_tokens.weight":
                continue
            if prm.ndim == 2:  # projections: std gain / sqrt(fan_in); Q/K rows sharper
                gain = spec.qk_gain if (".q_proj." in name or ".k_proj." in name) else 1.0
                w = rnd(prm.shape, 1.0 / math.sqrt(prm.shape[1]))
                if ".qkv_proj." in name:  # phi3: Q and K rows of the fused projection
                    w[: spec.n_heads * spec.head_dim + spec.n_kv_heads * spec.head_dim] *= spec.qk_gain
                prm.copy_(w * gain)
            elif name.endswith(".bias"):
                prm.copy_(rnd(prm.shape, spec.bias_std))
            elif "norm" in name:
                scale = spec.qk_norm_gain if ("q_norm" in name or "k_norm" in name) else 1.0
                eff = scale * (1.0 + rnd(prm.shape, 0.2))  # the effective multiplier
                prm.copy_(eff - 1.0 if gemma else eff)      # Gemma's RMSNorm multiplies by (1 + w)
            else:
                raise AssertionError(f"uninitialised parameter {name}")
        emb = m.embed_tokens.weight
        if spec.tied:
            # The scaled input (Gemma: * sqrt(hidden)) and the logits both need a useful spread.
            emb.copy_(rnd(emb.shape, spec.out_gain / math.sqrt(spec.hidden)))
        else:
            emb.copy_(rnd(emb.shape, 1.0))
            model.lm_head.weight.copy_(rnd(model.lm_head.weight.shape, spec.out_gain / math.sqrt(spec.hidden)))
        head = model.lm_head.weight
        head.mul_(torch.exp(spec.row_sigma * rnd((head.shape[0], 1), 1.0)))
    if spec.tied:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def _arch_layer_names(spec: ArchSpec) -> list[tuple[str, str]]:
    """(HF suffix under model.layers.N., GGUF suffix under blk.N.) for one layer."""
    f = spec.family
    names = [("input_layernorm.weight", "attn_norm.weight"), ("self_attn.o_proj.weight", "attn_output.weight"),
             ("mlp.down_proj.weight", "ffn_down.weight")]
    if f == "phi3":
        names += [("self_attn.qkv_proj.weight", "attn_qkv.weight"), ("mlp.gate_up_proj.weight", "ffn_up.weight")]
    else:
        names += [("self_attn.q_proj.weight", "attn_q.weight"), ("self_attn.k_proj.weight", "attn_k.weight"),
                  ("self_attn.v_proj.weight", "attn_v.weight"), ("mlp.gate_proj.weight", "ffn_gate.weight"),
                  ("mlp.up_proj.weight", "ffn_up.weight")]
    if f == "qwen2":
        names += [(f"self_attn.{x}_proj.bias", f"attn_{x}.bias") for x in "qkv"]
    if f in ("qwen3", "gemma3"):
        names += [("self_attn.q_norm.weight", "attn_q_norm.weight"), ("self_attn.k_norm.weight", "attn_k_norm.weight")]
    if f in ("gemma2", "gemma3"):
        names += [("post_attention_layernorm.weight", "post_attention_norm.weight"),
                  ("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
                  ("post_feedforward_layernorm.weight", "post_ffw_norm.weight")]
    else:
        names += [("post_attention_layernorm.weight", "ffn_norm.weight")]
    return names


def _arch_name_pairs(spec: ArchSpec) -> list[tuple[str, str]]:
    pairs = [("model.embed_tokens.weight", "token_embd.weight"), ("model.norm.weight", "output_norm.weight")]
    if not spec.tied:
        pairs.append(("lm_head.weight", "output.weight"))
    for i in range(spec.n_layers):
        pairs += [(f"model.layers.{i}.{h}", f"blk.{i}.{g}") for h, g in _arch_layer_names(spec)]
    return pairs


def arch_gguf_tensors_from_hf(model, spec: ArchSpec) -> dict[str, np.ndarray]:
    """float32 GGUF-named tensors of ``model`` in the family's llama.cpp conventions."""
    sd = {k: v.detach().float().numpy().copy() for k, v in model.state_dict().items()}
    out = {}
    for hf, gg in _arch_name_pairs(spec):
        w = sd[hf]
        if spec.family in GEMMA_FAMILY and hf.endswith("norm.weight"):
            w = w + 1.0  # the converter folds Gemma's (1 + w) into the stored weight
        if spec.family == "mistral" and hf.endswith(("q_proj.weight", "k_proj.weight")):
            w = permute_qk(w, spec.n_heads if "q_proj" in hf else spec.n_kv_heads)
        out[gg] = w
    return out


def _arch_extra_kv(spec: ArchSpec):
    def extra(w: GGUFWriter):
        f = spec.family
        if f in ("mistral", "gemma2", "gemma3") and spec.sliding_window:
            w.add_sliding_window(spec.sliding_window)
        if f == "phi3":
            w.add_sliding_window(spec.sliding_window or 0)
        if f == "gemma3" and spec.rope_linear_factor:
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(spec.rope_linear_factor)
        if f == "gemma2":
            if spec.attn_softcap:
                w.add_attn_logit_softcapping(spec.attn_softcap)
            if spec.final_softcap:
                w.add_final_logit_softcapping(spec.final_softcap)
    return extra


def build_arch_gguf(spec: ArchSpec, out_dir: Path):
    """Create (or reuse) the GGUF for ``spec``; returns (path, original HF model)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = make_arch_hf_model(spec, vocab_size_of())
    path = out_dir / f"tiny-{spec.family}-{spec.name}.gguf"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        write_gguf(tmp, spec, arch_gguf_tensors_from_hf(model, spec), arch=GGUF_ARCH[spec.family],
                   rope_dim=spec.rope_dim, extra_kv=_arch_extra_kv(spec))
        os.replace(tmp, path)
    return path, model


@functools.lru_cache(maxsize=32)
def _read_dequantized_cached(path: str, mtime_ns: int):
    """read_dequantized, once per file version (broken references reread the same files)."""
    return read_dequantized(Path(path))


def arch_reference_from_gguf(path: Path, spec: ArchSpec, *, unfold_norms: bool = True, **overrides):
    """HF model of ``spec.family`` (float32) holding the GGUF's dequantized weights.

    ``overrides`` change the config and ``unfold_norms=False`` keeps Gemma's stored w + 1:
    both produce deliberately *wrong* references for the tests that prove the criterion bites.
    """
    import torch

    meta, t = _read_dequantized_cached(str(path), os.stat(path).st_mtime_ns)
    assert meta["general.architecture"] == GGUF_ARCH[spec.family], meta["general.architecture"]
    vocab = t["token_embd.weight"].shape[0]
    model = _arch_model_class(spec.family)(arch_hf_config(spec, vocab, **overrides)).float().eval()
    sd = {}
    for hf, gg in _arch_name_pairs(spec):
        w = t[gg]
        if spec.family in GEMMA_FAMILY and hf.endswith("norm.weight") and unfold_norms:
            w = w - 1.0
        if spec.family == "mistral" and hf.endswith(("q_proj.weight", "k_proj.weight")):
            w = unpermute_qk(w, spec.n_heads if "q_proj" in hf else spec.n_kv_heads)
        sd[hf] = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (spec.tied and k == "lm_head.weight")]
    assert not missing and not unexpected, (missing, unexpected)
    if spec.tied:
        model.tie_weights()
        assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)
    return model


# Two dtypes per family: F16 and one quantized type. Sliding windows are far shorter than the
# ~300-token prompts; Gemma 3 has 6 layers so that one of them is global.
ARCH_BASE = {
    "qwen2": ArchSpec("base", "qwen2", seed=21),
    "qwen3": ArchSpec("base", "qwen3", hidden=64, head_dim=32, tied=True, seed=22),  # q_dim 128 != hidden 64
    "mistral": ArchSpec("base", "mistral", sliding_window=48, write_key_length=False, seed=23),
    "gemma": ArchSpec("base", "gemma", tied=True, seed=24),
    "gemma2": ArchSpec("base", "gemma2", tied=True, sliding_window=32, attn_softcap=6.0, final_softcap=4.0,
                       qk_gain=1.5, seed=25),
    "gemma3": ArchSpec("base", "gemma3", hidden=64, head_dim=16, n_layers=6, ffn=128, tied=True,
                       sliding_window=32, rope_theta=1000000.0, seed=26),
    "phi3": ArchSpec("base", "phi3", partial_rotary=0.5, write_key_length=False, seed=27),
}
ARCH_QUANT = {"qwen2": "Q8_0", "qwen3": "Q4_0", "mistral": "Q8_0", "gemma": "Q8_0", "gemma2": "Q8_0",
              "gemma3": "Q8_0", "phi3": "Q4_0"}
ARCH_SPECS = {}
for _fam, _base in ARCH_BASE.items():
    for _dt in ("F16", ARCH_QUANT[_fam]):
        _name = f"{_fam}_{_dt.lower()}"
        ARCH_SPECS[_name] = replace(_base, name=_name, dtype=_dt)
# Gemma 3 4B and up: linear RoPE scaling on the global layers only.
ARCH_SPECS["gemma3_f16_linear"] = replace(ARCH_BASE["gemma3"], name="gemma3_f16_linear", dtype="F16",
                                          rope_linear_factor=8.0, seed=28)
