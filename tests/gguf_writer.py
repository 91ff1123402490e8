"""GGUF files of the tiny models (tests/tiny_models.py), written in llama.cpp's conventions, and
read back.

A spec's random transformers model is written exactly the way llama.cpp's ``convert_hf_to_gguf.py``
writes its family (tensor names, the Q/K row order, metadata keys), with the tokenizer of a real
vocabulary file (llama-spm, 32000 tokens). ``read_dequantized`` reads a file back through gguf-py
(for the references: tests/references.py). Conventions per family (llama.cpp's converter /
llama-model.cpp / gguf-py constants):

* every family: ``token_embd``, ``output_norm``, ``output`` (omitted when the embeddings are tied),
  ``blk.N.attn_norm``, ``attn_q``, ``attn_k``, ``attn_v``, ``attn_output``, ``ffn_norm``,
  ``ffn_gate``, ``ffn_up``, ``ffn_down`` (all ``.weight``). 1-D tensors (norms, biases,
  rope_freqs) stay F32; 2-D weights take the file dtype.
* llama:   Q and K permuted from HF's rotate-half RoPE layout into the interleaved (GPT-J style,
           adjacent pairs) layout of ggml's normal-mode RoPE:
           ``w.reshape(n_head, 2, hd//2, in).swapaxes(1, 2).reshape(w.shape)`` (K uses
           ``n_head_kv``). Llama 3 rope scaling is not metadata but a ``rope_freqs.weight`` F32
           tensor of ``head_dim/2`` per-frequency divisors (ggml divides ``theta`` by them).
* qwen2:   no Q/K permutation (NeoX RoPE), attn_{q,k,v}.bias F32.
* qwen3:   attn_q_norm / attn_k_norm [head_dim] (plain weights), key_length written (head_dim
           may differ from hidden / heads), usually tied.
* mistral: converted by LlamaModel: general.architecture "llama", Q/K permuted. The converter
           writes no window; akunu honours llama.attention.sliding_window when a file has it.
* gemma:   every *norm.weight stored as w + 1 (HF's (1 + w) RMSNorm), tied, GELU-tanh,
           embeddings * sqrt(hidden), NeoX RoPE.
* gemma2:  + post_attention_norm / post_ffw_norm (pre-FFN norm is ffn_norm),
           attn_logit_softcapping, final_logit_softcapping, attention.sliding_window; layers
           0, 2, 4... slide (llama.cpp's swa pattern 2); attention scale 1/sqrt(head_dim).
* gemma3:  + attn_q_norm / attn_k_norm (also + 1), no softcaps; layer i slides unless
           i % 6 == 5; sliding layers use RoPE base 10000, global ones rope.freq_base.
* phi3:    attn_qkv (Q, K, V rows) and ffn_up holding gate then up rows; NeoX RoPE over
           rope.dimension_count = int(partial_rotary_factor * hidden) // heads dims;
           attention.sliding_window written (0 when none) but llama.cpp ignores it.
"""
from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from paths import tokenizer_testdata
from tiny_models import GEMMA_FAMILY, ArchSpec, make_hf_model

TOKENIZER_DIR = tokenizer_testdata()
VOCAB_GGUF = TOKENIZER_DIR / "ggml-vocab-llama-spm.gguf"  # smallest real vocab (32000)

# spec.dtype -> (the matrices' ggml type, general.file_type)
DTYPES = {
    "F32": (QT.F32, gguf.LlamaFileType.ALL_F32),
    "F16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
    "BF16": (QT.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "Q8_0": (QT.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "Q4_0": (QT.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
    "Q4_1": (QT.Q4_1, gguf.LlamaFileType.MOSTLY_Q4_1),
}

# family -> general.architecture as llama.cpp's converter writes it
GGUF_ARCH = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "mistral": "llama", "gemma": "gemma",
             "gemma2": "gemma2", "gemma3": "gemma3", "phi3": "phi3"}
# families converted by LlamaModel: Q/K rows permuted for ggml's interleaved RoPE
PERMUTED_QK = ("llama", "mistral")


# --------------------------------------------------------------------------------------
# conversions (llama.cpp LlamaModel.permute and its inverse, llama3 rope factors)
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
# tensor names
# --------------------------------------------------------------------------------------

def _layer_names(spec: ArchSpec) -> list[tuple[str, str]]:
    """(HF suffix under model.layers.N., GGUF suffix under blk.N.) for one layer, in file order."""
    f = spec.family
    if f == "llama":
        return [("input_layernorm.weight", "attn_norm.weight"), ("self_attn.q_proj.weight", "attn_q.weight"),
                ("self_attn.k_proj.weight", "attn_k.weight"), ("self_attn.v_proj.weight", "attn_v.weight"),
                ("self_attn.o_proj.weight", "attn_output.weight"),
                ("post_attention_layernorm.weight", "ffn_norm.weight"), ("mlp.gate_proj.weight", "ffn_gate.weight"),
                ("mlp.up_proj.weight", "ffn_up.weight"), ("mlp.down_proj.weight", "ffn_down.weight")]
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


def name_pairs(spec: ArchSpec) -> list[tuple[str, str]]:
    """(HF state-dict name, GGUF tensor name) of every tensor of ``spec``'s model, in file order
    (Llama files put the layers before the output tensors, the other families after)."""
    head = [("model.embed_tokens.weight", "token_embd.weight")]
    out = [("model.norm.weight", "output_norm.weight")]
    if not spec.tied:
        out.append(("lm_head.weight", "output.weight"))
    layers = [(f"model.layers.{i}.{h}", f"blk.{i}.{g}") for i in range(spec.n_layers) for h, g in _layer_names(spec)]
    return head + layers + out if spec.family == "llama" else head + out + layers


def gguf_tensors_from_hf(model, spec: ArchSpec) -> dict[str, np.ndarray]:
    """float32 GGUF-named tensors (numpy row-major = HF [out, in]) of ``model`` in the family's
    llama.cpp conventions: Gemma's norms + 1, Q/K permuted where the converter permutes them, a
    rope_freqs tensor (after the embeddings) for Llama 3 rope scaling."""
    sd = {k: v.detach().float().numpy().copy() for k, v in model.state_dict().items()}
    out = {}
    for hf, gg in name_pairs(spec):
        w = sd[hf]
        if spec.family in GEMMA_FAMILY and hf.endswith("norm.weight"):
            w = w + 1.0  # the converter folds Gemma's (1 + w) into the stored weight
        if spec.family in PERMUTED_QK and hf.endswith(("q_proj.weight", "k_proj.weight")):
            w = permute_qk(w, spec.n_heads if "q_proj" in hf else spec.n_kv_heads)
        out[gg] = w
        if gg == "token_embd.weight" and spec.llama3_rope:
            out["rope_freqs.weight"] = llama3_rope_factors(spec.head_dim, spec.rope_parameters)
    return out


# --------------------------------------------------------------------------------------
# writing
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


def family_kv(spec: ArchSpec, w: GGUFWriter) -> None:
    """The family's own metadata keys (sliding window, softcaps, rope scaling) for ``spec``."""
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


def write_gguf(path: Path, spec: ArchSpec, tensors: dict[str, np.ndarray], *, arch: str | None = None,
               vocab_src: Path = VOCAB_GGUF, dtype_override: dict[str, QT] | None = None,
               rope_dim: int | None = None, extra_kv=None, quantize=None, file_type=None) -> Path:
    """Write ``tensors`` (float32, GGUF names) with llama.cpp's metadata for ``spec``.

    By default the file is what the converter writes for ``spec``; the keywords make other files
    (bad-input tests, mixed-dtype files): ``arch`` replaces general.architecture, ``rope_dim``
    rope.dimension_count, ``extra_kv(writer)`` adds keys after the family's own;
    ``dtype_override`` maps tensor name -> ggml type to force; ``quantize(arr, qtype)`` -> GGUF
    block bytes replaces gguf-py's quantizer (which falls back to a random payload for the types
    it cannot quantize); ``file_type`` overrides general.file_type.
    """
    qtype, ftype = DTYPES[spec.dtype]
    path = Path(path)
    w = GGUFWriter(str(path), GGUF_ARCH[spec.family] if arch is None else arch)
    w.add_name(f"akunu-tiny-{spec.name}")
    w.add_type("model")
    w.add_context_length(spec.context_length)
    w.add_embedding_length(spec.hidden)
    w.add_block_count(spec.n_layers)
    w.add_feed_forward_length(spec.ffn)
    w.add_rope_dimension_count(spec.rope_dim if rope_dim is None else rope_dim)
    w.add_head_count(spec.n_heads)
    w.add_head_count_kv(spec.n_kv_heads)
    w.add_rope_freq_base(spec.rope_theta)
    w.add_layer_norm_rms_eps(spec.norm_eps)
    if spec.write_key_length:
        w.add_key_length(spec.head_dim)
        w.add_value_length(spec.head_dim)
    family_kv(spec, w)
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


def build_gguf(spec: ArchSpec, out_dir: Path):
    """Create (or reuse) the GGUF of ``spec`` in ``out_dir``; returns (path, original HF model)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = make_hf_model(spec, vocab_size_of())
    path = out_dir / f"tiny-{spec.family}-{spec.name}.gguf"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        write_gguf(tmp, spec, gguf_tensors_from_hf(model, spec))
        os.replace(tmp, path)
    return path, model


# --------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------

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


@functools.lru_cache(maxsize=32)
def _read_dequantized_cached(path: str, mtime_ns: int):
    return read_dequantized(Path(path))


def read_dequantized_cached(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """read_dequantized, once per file version (broken references reread the same files)."""
    return _read_dequantized_cached(str(path), os.stat(path).st_mtime_ns)
