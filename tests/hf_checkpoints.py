"""Tiny Hugging Face checkpoints for the SafeTensors / MLX / hub tests, written by transformers
itself (save_pretrained) or, for MLX, by an MLX-style quantizer written here from MLX's
documented affine formula.

* ``save_checkpoint``: a random ``LlamaForCausalLM`` (tiny_models.make_hf_model) saved with
  ``save_pretrained(safe_serialization=True)`` in F32/F16/BF16, optionally sharded, plus the
  tokenizer files transformers exports for the llama-spm test vocabulary (tokenizer.json built
  from the GGUF vocab, no network).
* ``mlx_quantize`` / ``mlx_pack``: MLX affine quantization (mlx.core.quantize): per group of
  ``group_size`` values, scale = (max - min) / (2^bits - 1) with the sign chosen so the larger
  edge in magnitude is hit exactly (q0 = round(edge / scale); if q0 != 0: scale = edge / q0,
  bias = edge), q = clip(round((w - bias) / scale), 0, 2^bits - 1), value = scale * q + bias.
  Values are packed into each row's little-endian bit stream (element 0 in the lowest bits, 3-
  and 6-bit values straddling bytes and uint32 words), stored as uint32.
* ``save_arch_checkpoint``: the same for the other families (tiny_models.ArchSpec recipes),
  with ``load_reference`` (transformers float32, eager attention) as the reference.
* ``save_mlx_checkpoint``: an mlx-community style directory (config.json with "quantization",
  ``weight``/``scales``/``biases`` per quantized Linear and the embedding) and the float32
  transformers model holding exactly the dequantized weights (the reference).
"""
from __future__ import annotations

import json
import shutil
from functools import lru_cache
from pathlib import Path

import numpy as np

import gguf_writer as gw
import references as rf
import tiny_models as tm

# --------------------------------------------------------------------------------------
# tokenizer files
# --------------------------------------------------------------------------------------

LLAMA2_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}"
    "{% else %}{{ '<<SYS>>\n' + message['content'] + '\n<</SYS>>\n\n' }}{% endif %}{% endfor %}"
)


@lru_cache(maxsize=1)
def vocab_size() -> int:
    return gw.vocab_size_of()  # reading the GGUF vocab takes seconds: once per session


def export_tokenizer(out_dir: Path, tok, chat_template: str | None = LLAMA2_CHAT_TEMPLATE) -> Path:
    """tokenizer.json + tokenizer_config.json of `tok`, a transformers tokenizer (the tests build
    theirs from the GGUF test vocabularies: references.reference_tokenizer)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(out_dir))
    if chat_template is not None:
        cfg_path = out_dir / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["chat_template"] = chat_template
        cfg_path.write_text(json.dumps(cfg, indent=2))
    return out_dir


def copy_tokenizer(src: Path, dst: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        if (Path(src) / name).exists():
            shutil.copy(Path(src) / name, Path(dst) / name)


# --------------------------------------------------------------------------------------
# SafeTensors (transformers save_pretrained)
# --------------------------------------------------------------------------------------

TORCH_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def save_checkpoint(spec: tm.ArchSpec, out_dir: Path, tokenizer_dir: Path, dtype: str = "F32",
                    max_shard_size: str | None = None, vocab: int | None = None):
    """Save a random tiny Llama as a Hugging Face checkpoint (`vocab`: embedding rows, default the
    tokenizer's); returns (dir, the float32 reference model holding exactly the stored weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    out_dir = Path(out_dir)
    model = tm.make_hf_model(spec, vocab or vocab_size())
    stored = model.to(getattr(torch, TORCH_DTYPES[dtype]))
    kwargs = {"safe_serialization": True}
    if max_shard_size:
        kwargs["max_shard_size"] = max_shard_size
    stored.save_pretrained(str(out_dir), **kwargs)
    copy_tokenizer(tokenizer_dir, out_dir)
    ref = AutoModelForCausalLM.from_pretrained(str(out_dir), dtype=torch.float32).eval()
    return out_dir, ref


# --------------------------------------------------------------------------------------
# MLX affine quantization (written from MLX's documented formula)
# --------------------------------------------------------------------------------------

def mlx_quantize(w: np.ndarray, bits: int, group_size: int, scale_dtype=np.float16):
    """(q uint8 [rows, cols], scales, biases [rows, cols/group]) as mlx.core.quantize computes them."""
    rows, cols = w.shape
    g = w.astype(np.float32).reshape(rows, cols // group_size, group_size)
    n_bins = float(2 ** bits - 1)
    w_max, w_min = g.max(-1), g.min(-1)
    mask = np.abs(w_min) > np.abs(w_max)
    scale = np.maximum((w_max - w_min) / n_bins, 1e-7)
    scale = np.where(mask, scale, -scale)
    edge = np.where(mask, w_min, w_max)
    q0 = np.rint(edge / scale)
    nonzero = q0 != 0
    scale = np.where(nonzero, edge / np.where(nonzero, q0, 1), scale)
    bias = np.where(nonzero, edge, 0.0)
    # MLX rounds with the float32 scale/bias, then stores them in the model's dtype.
    q = np.clip(np.rint((g - bias[..., None]) / scale[..., None]), 0, n_bins).astype(np.uint8)
    return q.reshape(rows, cols), scale.astype(scale_dtype), bias.astype(scale_dtype)


def mlx_dequantize(q: np.ndarray, scales: np.ndarray, biases: np.ndarray, group_size: int) -> np.ndarray:
    rows, cols = q.shape
    s = scales.astype(np.float32).repeat(group_size, axis=1)
    b = biases.astype(np.float32).repeat(group_size, axis=1)
    return (s * q.astype(np.float32) + b).reshape(rows, cols)


def mlx_pack(q: np.ndarray, bits: int) -> np.ndarray:
    """Pack [rows, cols] integers into uint32 [rows, cols * bits / 32]: each row a little-endian bit
    stream with element i at bits [i * bits, (i + 1) * bits)."""
    rows, cols = q.shape
    assert cols * bits % 32 == 0
    bit_values = (q[..., None].astype(np.uint32) >> np.arange(bits, dtype=np.uint32)) & 1  # [rows, cols, bits]
    stream = bit_values.reshape(rows, cols * bits).astype(np.uint8)
    packed_bytes = np.packbits(stream, axis=1, bitorder="little")  # [rows, cols * bits / 8]
    return packed_bytes.view("<u4").reshape(rows, cols * bits // 32)


def save_mlx_checkpoint(spec: tm.ArchSpec, out_dir: Path, tokenizer_dir: Path, bits: int, group_size: int,
                        scale_dtype: str = "F16", overrides: dict | None = None):
    """An mlx-community style checkpoint of a random tiny model of ``spec.family``; every Linear and
    the embedding are quantized, vectors (norms, biases) stay float (`overrides`: module path ->
    {"bits", "group_size"} as MLX writes per-layer mixes).
    Returns (dir, reference float32 transformers model holding the dequantized weights)."""
    import torch

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    overrides = overrides or {}
    model = tm.make_hf_model(spec, vocab_size())
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    if spec.tied:
        state.pop("lm_head.weight", None)
    tdtype = torch.float16 if scale_dtype == "F16" else torch.bfloat16

    def stored(a: np.ndarray):  # float32 -> the checkpoint's float dtype (as raw bytes + its values)
        t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(tdtype)
        return (scale_dtype, list(a.shape), t.view(torch.int16).numpy().tobytes()), t.float().numpy()

    tensors, dequantized = {}, {}
    for name, w in state.items():
        module = name[: -len(".weight")]
        if w.ndim != 2:
            tensors[name], dequantized[name] = stored(w)
            continue
        b = overrides.get(module, {}).get("bits", bits)
        gs = overrides.get(module, {}).get("group_size", group_size)
        _, w_stored = stored(w)  # MLX quantizes the model's stored (fp16/bf16) weights
        q, s, bi = mlx_quantize(w_stored, b, gs, np.float32)
        tensors[module + ".scales"], s_values = stored(s)
        tensors[module + ".biases"], b_values = stored(bi)
        packed = mlx_pack(q, b)
        tensors[name] = ("U32", list(packed.shape), packed.astype("<u4").tobytes())
        dequantized[name] = mlx_dequantize(q, s_values, b_values, gs)
    write_safetensors(out_dir / "model.safetensors", tensors, {"format": "mlx"})
    cfg = tm.hf_config(spec, vocab_size()).to_dict()
    quant = {"group_size": group_size, "bits": bits}
    quant.update(overrides)
    cfg["quantization"] = quant
    cfg["quantization_config"] = dict(quant)
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2))
    copy_tokenizer(tokenizer_dir, out_dir)

    ref = tm.make_hf_model(spec, vocab_size())
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in dequantized.items()}
    missing, unexpected = ref.load_state_dict(sd, strict=False)
    assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
    if spec.tied:
        ref.tie_weights()
    return out_dir, ref, dequantized


# --------------------------------------------------------------------------------------
# SafeTensors surgery for the corrupt-input tests
# --------------------------------------------------------------------------------------

def read_raw(path: Path) -> tuple[dict, bytes]:
    data = Path(path).read_bytes()
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_raw(path: Path, header: dict, payload: bytes) -> None:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    Path(path).write_bytes(len(raw).to_bytes(8, "little") + raw + payload)


def write_safetensors(path: Path, tensors: dict, metadata: dict | None = None) -> None:
    """A .safetensors file from {name: (dtype, shape, raw bytes)}, laid out as the safetensors
    library does (header padded to 8 bytes, tensors back to back)."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    write_raw(path, header, b"".join(chunks))


# --------------------------------------------------------------------------------------
# other architectures (tiny_models.ARCH_SPECS recipes) as SafeTensors
# --------------------------------------------------------------------------------------

def save_arch_checkpoint(spec: tm.ArchSpec, out_dir: Path, tokenizer_dir: Path, dtype: str = "F32",
                         max_shard_size: str | None = None):
    """Save a random tiny model of ``spec.family`` (tiny_models.make_hf_model: peaked
    attention, real argmax margins) with save_pretrained(safe_serialization=True) in ``dtype``;
    returns (dir, the float32 transformers model read back from it: the reference)."""
    import torch

    out_dir = Path(out_dir)
    model = tm.make_hf_model(spec, vocab_size())
    kwargs = {"safe_serialization": True}
    if max_shard_size:
        kwargs["max_shard_size"] = max_shard_size
    model.to(getattr(torch, TORCH_DTYPES[dtype])).save_pretrained(str(out_dir), **kwargs)
    copy_tokenizer(tokenizer_dir, out_dir)
    return out_dir, load_reference(out_dir)


def load_reference(path: Path, **config_overrides):
    """transformers' float32 eager model of a checkpoint directory (``config_overrides`` change its
    config: used for deliberately wrong references)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(str(path), **config_overrides)
    return AutoModelForCausalLM.from_pretrained(str(path), config=cfg, dtype=torch.float32,
                                                attn_implementation="eager").eval()


def edited_copy(src: Path, dst: Path, edit) -> Path:
    """A copy of checkpoint `src` at `dst` whose config.json went through edit(config dict)."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    edit(cfg)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def checkpoint_cache(save, cases: dict, tmp_path_factory, tokenizer_dir: Path, tokens):
    """name in `cases` -> (dir, transformers' logits of `tokens`); each checkpoint is written once by
    save(spec, dir, tokenizer_dir, dtype, shard) from cases[name] = (spec, dtype, shard)."""
    cache = {}

    def get(name):
        if name not in cache:
            spec, dtype, shard = cases[name]
            path, ref = save(spec, tmp_path_factory.mktemp(name), tokenizer_dir, dtype, shard)
            cache[name] = (path, rf.hf_logits(ref, tokens))
        return cache[name]

    return get
