"""Reading a Hugging Face checkpoint directory into the table the engine loads (_core.HFCheckpoint).

A directory holds config.json, model.safetensors (or shards model-0000X-of-0000N.safetensors
listed in model.safetensors.index.json) and tokenizer.json (+ tokenizer_config.json,
generation_config.json). MLX (mlx-community) checkpoints look the same, with
config.json["quantization"] = {"group_size": g, "bits": b} and `scales`/`biases` beside each
quantized `weight`.

Python parses the JSON (config, SafeTensors headers, index) and checks it; the engine maps the
files, re-checks every offset against the real file sizes and converts what must be converted
(docs/adr/0005-safetensors-json-in-python.md). What differs between architectures is data in
hf_architectures.py; the SafeTensors headers are read by safetensors_index.py.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from . import _core
from ._core import ModelFormatError, UnsupportedError
from .hf_architectures import ARCHITECTURES, ArchSpec
from .safetensors_index import FLOAT_DTYPES, StoredTensor, list_tensors, read_json

MLX_BITS = (2, 3, 4, 5, 6, 8)
MLX_GROUP_SIZES = (32, 64, 128)
# Sizes config.json may claim before any tensor is seen: the engine's fields are 32-bit, and the
# per-layer tables and RoPE tables built here are sized by them (fuzz/python/fuzz_hf_config.py).
MAX_CONFIG_INT = 2**32 - 1
MAX_LAYERS = 65536   # Llama 3.1 405B has 126
MAX_HEAD_DIM = 1024  # the engine's limit (Model::finish_load)


# --------------------------------------------------------------------------------------
# config.json
# --------------------------------------------------------------------------------------

def _positive_int(cfg: dict, key: str, default, where: str) -> int:
    if key not in cfg or cfg[key] is None:
        if default is None:
            raise ModelFormatError(f"{where}: config.json is missing '{key}'")
        return default
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_CONFIG_INT:
        raise ModelFormatError(f"{where}: config.json '{key}' must be a positive 32-bit integer, got {v!r}")
    return v


def _positive_float(value, key: str, where: str) -> float:
    try:
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0 and math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        ok = False
    if not ok:
        raise ModelFormatError(f"{where}: config.json '{key}' must be a positive number, got {value!r}")
    return float(value)


def _is_per_layer_type(params: dict) -> bool:
    return bool(params) and "rope_type" not in params and "type" not in params and \
        all(isinstance(v, dict) for v in params.values())


def rope_parameters(cfg: dict, arch: ArchSpec, where: str, layer_type: str = "full_attention") -> dict:
    """RoPE settings from either spelling: transformers 5's "rope_parameters" or the older
    top-level "rope_theta" + "rope_scaling". Families with local RoPE (Gemma 3) keep one set per
    layer type ({"full_attention": {...}, "sliding_attention": {...}}); their older spelling
    gives the sliding layers "rope_local_base_freq" and no scaling."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(params, dict):
        raise ModelFormatError(f"{where}: config.json rope parameters must be an object, got {params!r}")
    theta_key = "rope_local_base_freq" if layer_type == "sliding_attention" else "rope_theta"
    if _is_per_layer_type(params):
        if not arch.local_rope:
            raise UnsupportedError(f"{where}: per-layer-type RoPE parameters are not supported for this architecture")
        params = params.get(layer_type) or {}
    elif layer_type == "sliding_attention":
        params = {}  # older spelling: rope_scaling applies to the global layers only
    out = dict(params)
    out["rope_type"] = params.get("rope_type", params.get("type", "default")) or "default"
    theta = params.get("rope_theta", cfg.get(theta_key, arch.defaults.get(theta_key, 10000.0)))
    out["rope_theta"] = _positive_float(theta, theta_key, where)
    return out


def rope_frequencies(rope: dict, rope_dim: int, where: str) -> list[float]:
    """The rope_dim / 2 inverse frequencies with the scaling folded in (transformers' formulas)."""
    theta = rope["rope_theta"]
    base = [theta ** (-2.0 * i / rope_dim) for i in range(rope_dim // 2)]
    kind = rope["rope_type"]
    if kind == "default":
        return base
    factor = _positive_float(rope.get("factor"), "rope factor", where)
    if kind == "linear":
        return [f / factor for f in base]
    if kind == "llama3":
        low = _positive_float(rope.get("low_freq_factor", 1.0), "low_freq_factor", where)
        high = _positive_float(rope.get("high_freq_factor", 4.0), "high_freq_factor", where)
        old = _positive_float(rope.get("original_max_position_embeddings", 8192), "original_max_position_embeddings",
                              where)
        if high <= low:
            raise ModelFormatError(f"{where}: llama3 rope scaling needs high_freq_factor > low_freq_factor")
        low_wavelen, high_wavelen = old / low, old / high
        out = []
        for f in base:
            wavelen = 2 * math.pi / f
            if wavelen < high_wavelen:
                out.append(f)
            elif wavelen > low_wavelen:
                out.append(f / factor)
            else:
                smooth = (old / wavelen - low) / (high - low)
                out.append((1 - smooth) * f / factor + smooth * f)
        return out
    raise UnsupportedError(f"{where}: rope scaling type '{kind}' is not supported (default, linear, llama3)")


@dataclass
class CheckpointConfig:
    model_type: str
    arch: ArchSpec
    config: "_core.ModelConfig"
    tied: bool


def _optional(cfg: dict, key: str, arch: ArchSpec):
    """config.json's value for `key` (None when it is null), or the config class's default when
    the key is absent."""
    return cfg[key] if key in cfg else arch.defaults.get(key)


def _sliding(cfg: dict, arch: ArchSpec, n_layers: int, where: str) -> tuple[int | None, list]:
    """(window or None, one flag per layer: does it slide / use the local RoPE)."""
    if arch.sliding is None:
        return None, [False] * n_layers
    window = _optional(cfg, "sliding_window", arch)
    if window is not None:
        window = _positive_int({"sliding_window": window}, "sliding_window", None, where)
    if arch.window_enabled_by and not cfg.get(arch.window_enabled_by):
        window = None  # Qwen: a window without use_sliding_window is not used
    types = cfg.get("layer_types") if arch.reads_layer_types else None
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layers:
            raise ModelFormatError(f"{where}: config.json 'layer_types' must list one type per layer "
                                   f"({n_layers}), got {types!r}")
        unknown = sorted({t for t in types if t not in ("sliding_attention", "full_attention")}, key=str)
        if unknown:
            raise UnsupportedError(f"{where}: layer type(s) {', '.join(map(repr, unknown))} are not supported "
                                   "(sliding_attention, full_attention)")
        flags = [t == "sliding_attention" for t in types]
    else:
        try:
            flags = arch.sliding(cfg, n_layers)
        except ValueError as e:
            raise ModelFormatError(f"{where}: config.json {e}") from None
    if window is None and not arch.local_rope:
        flags = [False] * n_layers
    return window, flags


def _optional_float(cfg: dict, key: str, arch: ArchSpec, where: str) -> float:
    """A positive number, or 0 for an absent-with-no-default / null key (feature off)."""
    v = _optional(cfg, key, arch)
    return 0.0 if v is None else _positive_float(v, key, where)


def read_config(cfg: dict, where: str) -> CheckpointConfig:
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelFormatError(f"{where}: config.json has no 'model_type'")
    arch = ARCHITECTURES.get(model_type)
    if arch is None:
        raise UnsupportedError(f"{where}: model_type '{model_type}' is not supported for SafeTensors/MLX checkpoints "
                               f"(supported: {', '.join(sorted(ARCHITECTURES))})")
    for flag in arch.refuse_when_true:
        if cfg.get(flag):
            raise UnsupportedError(f"{where}: config.json sets '{flag}', which akunu does not support for {model_type}")
    act_key = next((k for k in arch.activation_keys if cfg.get(k) is not None), None)
    act = cfg[act_key] if act_key else arch.activations[0]
    if act not in arch.activations:
        raise UnsupportedError(f"{where}: {act_key} '{act}' is not supported for {model_type} "
                               f"({', '.join(arch.activations)})")
    c = _core.ModelConfig()
    c.architecture = arch.architecture
    c.name = str(cfg.get("_name_or_path") or os.path.basename(os.path.normpath(where)))
    for fld, (key, default) in arch.config_keys.items():
        setattr(c, fld, _positive_int(cfg, key, default, where))
    if c.n_layers > MAX_LAYERS:
        raise ModelFormatError(f"{where}: config.json 'num_hidden_layers' {c.n_layers} is over {MAX_LAYERS}")
    c.n_kv_heads = _positive_int(cfg, "num_key_value_heads", c.n_heads, where)
    if cfg.get("head_dim") is None and c.dim % c.n_heads != 0:
        raise ModelFormatError(f"{where}: hidden_size {c.dim} is not a multiple of num_attention_heads {c.n_heads} "
                               "and config.json gives no head_dim")
    c.head_dim = _positive_int(cfg, "head_dim", c.dim // c.n_heads, where)
    if c.head_dim > MAX_HEAD_DIM:
        raise UnsupportedError(f"{where}: head_dim {c.head_dim} is not supported (at most {MAX_HEAD_DIM})")
    if c.n_heads % c.n_kv_heads != 0:
        raise ModelFormatError(f"{where}: num_attention_heads {c.n_heads} is not a multiple of num_key_value_heads "
                               f"{c.n_kv_heads}")
    rope = rope_parameters(cfg, arch, where)
    # transformers 5 keeps partial_rotary_factor in rope_parameters, older configs at the top
    rotary = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    rotary = _positive_float(rotary, "partial_rotary_factor", where)
    if rotary > 1:
        raise ModelFormatError(f"{where}: config.json 'partial_rotary_factor' must be at most 1, got {rotary!r}")
    c.rope_dim = int(c.head_dim * rotary)
    if c.head_dim % 2 or c.rope_dim % 2 or not 0 < c.rope_dim <= c.head_dim:
        raise ModelFormatError(f"{where}: head_dim {c.head_dim} / rotary dimension {c.rope_dim} must be even")
    c.max_seq_len = _positive_int(cfg, "max_position_embeddings", arch.defaults.get("max_position_embeddings", 2048),
                                  where)
    eps = cfg.get("rms_norm_eps", arch.defaults.get("rms_norm_eps", 1e-6))
    c.norm_eps = _positive_float(eps, "rms_norm_eps", where)
    c.rope_theta = rope["rope_theta"]
    c.rope_inv_freq = rope_frequencies(rope, c.rope_dim, where)

    window, flags = _sliding(cfg, arch, c.n_layers, where)
    c.sliding_window = window or 0
    c.layer_sliding = [int(f) for f in flags]
    if arch.local_rope and any(flags):
        c.rope_inv_freq_local = rope_frequencies(rope_parameters(cfg, arch, where, "sliding_attention"), c.rope_dim,
                                                 where)
    if arch.embedding_scale_sqrt_dim:
        c.embedding_scale = math.sqrt(c.dim)
    if arch.query_scalar_key:
        scalar = _optional_float(cfg, arch.query_scalar_key, arch, where)
        c.attention_scale = scalar ** -0.5 if scalar else 0.0
    if arch.read_softcaps:
        c.attn_logit_softcap = _optional_float(cfg, "attn_logit_softcapping", arch, where)
        c.final_logit_softcap = _optional_float(cfg, "final_logit_softcapping", arch, where)
    tied = cfg.get("tie_word_embeddings", arch.tied_default)
    if not isinstance(tied, bool):
        raise ModelFormatError(f"{where}: config.json 'tie_word_embeddings' must be true or false, got {tied!r}")
    return CheckpointConfig(model_type, arch, c, tied)


# --------------------------------------------------------------------------------------
# MLX quantization
# --------------------------------------------------------------------------------------

def quantization_config(cfg: dict, where: str) -> dict | None:
    """config.json's MLX "quantization" (or a "quantization_config" in the same form), checked."""
    q = cfg.get("quantization")
    if q is None:
        q = cfg.get("quantization_config")
        if q is None:
            return None
        method = q.get("quant_method") if isinstance(q, dict) else None
        if method not in (None, "mlx"):
            raise UnsupportedError(f"{where}: quantization method '{method}' is not supported (akunu reads MLX affine "
                                   "quantization and unquantized F32/F16/BF16 checkpoints)")
    if q is False:
        return None
    if not isinstance(q, dict):
        raise ModelFormatError(f"{where}: config.json 'quantization' must be an object, got {q!r}")
    mode = q.get("mode", "affine")
    if mode != "affine":
        raise UnsupportedError(f"{where}: MLX quantization mode '{mode}' is not supported (affine)")
    _quant_params(q, q, "quantization", where)
    return q


def _quant_params(entry: dict, top: dict, what: str, where: str) -> tuple[int, int]:
    bits = entry.get("bits", top.get("bits"))
    group = entry.get("group_size", top.get("group_size"))
    if isinstance(bits, bool) or not isinstance(bits, int) or isinstance(group, bool) or not isinstance(group, int):
        raise ModelFormatError(f"{where}: config.json {what} needs integer 'bits' and 'group_size', "
                               f"got {bits!r} and {group!r}")
    if bits not in MLX_BITS:
        raise UnsupportedError(f"{where}: {what}: {bits}-bit MLX quantization is not supported "
                               f"({', '.join(map(str, MLX_BITS))})")
    if group not in MLX_GROUP_SIZES:
        raise UnsupportedError(f"{where}: {what}: MLX group_size {group} is not supported "
                               f"({', '.join(map(str, MLX_GROUP_SIZES))})")
    return bits, group


# --------------------------------------------------------------------------------------
# the whole checkpoint
# --------------------------------------------------------------------------------------

@dataclass
class LoadedCheckpoint:
    checkpoint: "_core.HFCheckpoint"
    tokenizer: object  # HFTokenizer
    chat_template: str
    model_type: str


def _canonical(name: str, arch: ArchSpec, n_layers: int, where: str) -> str | None:
    if name in arch.global_tensors:
        return arch.global_tensors[name]
    if name.startswith(arch.layer_prefix):
        layer, _, rest = name[len(arch.layer_prefix):].partition(".")
        if layer.isdigit() and rest in arch.layer_tensors:
            if int(layer) >= n_layers:
                raise ModelFormatError(f"{where}: tensor '{name}' belongs to layer {layer}, but config.json says "
                                       f"num_hidden_layers = {n_layers}")
            return f"layers.{int(layer)}.{arch.layer_tensors[rest]}"
    return None


def _hf_name(canonical: str, arch: ArchSpec) -> str:
    """The Hugging Face name a canonical tensor is read from (for messages)."""
    for hf, c in arch.global_tensors.items():
        if c == canonical:
            return hf
    _, layer, rest = canonical.split(".", 2)
    for hf, c in arch.layer_tensors.items():
        if c == rest:
            return f"{arch.layer_prefix}{layer}.{hf}"
    return canonical


def read_checkpoint(path: str | os.PathLike) -> LoadedCheckpoint:
    """Everything the engine and the Python Model need from a checkpoint directory. Raises
    ModelFormatError / UnsupportedError / TokenizerError naming the file and the problem."""
    from .hf_tokenizer import HFTokenizer, read_chat_template

    path = os.path.abspath(os.fspath(path))
    cfg_path = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_path):
        raise ModelFormatError(f"{path}: no config.json (a Hugging Face checkpoint directory needs config.json, "
                               "*.safetensors and tokenizer.json)")
    cfg = read_json(cfg_path, "config.json")
    cc = read_config(cfg, path)
    arch, c = cc.arch, cc.config
    quant = quantization_config(cfg, path)
    stored = list_tensors(path)

    companions = {n for n in stored if n.endswith((".scales", ".biases")) and n.rsplit(".", 1)[0] + ".weight" in stored}
    chosen: dict[str, StoredTensor] = {}
    unexpected = []
    for name, t in stored.items():
        if name in companions or name.endswith(arch.ignored_suffixes):
            continue
        canonical = _canonical(name, arch, c.n_layers, path)
        if canonical is None:
            unexpected.append(name)
        elif canonical == "output" and cc.tied:
            continue  # tied: some checkpoints still save lm_head; the embedding is the output
        else:
            chosen[canonical] = t
    if unexpected:
        shown = ", ".join(sorted(unexpected)[:5]) + (f", ... ({len(unexpected)} in all)" if len(unexpected) > 5 else "")
        raise UnsupportedError(f"{path}: tensors akunu does not know how to use for model_type '{cc.model_type}': "
                               f"{shown}")
    required = ["token_embedding", "output_norm"] + ([] if cc.tied else ["output"])
    required += [f"layers.{l}.{s}" for l in range(c.n_layers) for s in arch.layer_tensors.values()]
    missing = [r for r in required if r not in chosen]
    if missing:
        shown = ", ".join(_hf_name(m, arch) for m in missing[:5]) + (f", ... ({len(missing)} in all)"
                                                                     if len(missing) > 5 else "")
        raise ModelFormatError(f"{path}: missing tensor(s) {shown}")

    tensors = []
    for canonical in required:
        t = chosen[canonical]
        entry = _core.CheckpointTensor()
        entry.canonical = canonical
        entry.data = t.slice()
        base = t.name[: -len(".weight")] if t.name.endswith(".weight") else t.name
        scales, biases = stored.get(base + ".scales"), stored.get(base + ".biases")
        if scales is not None or biases is not None:
            if scales is None or biases is None:
                raise ModelFormatError(f"{path}: '{t.name}' has {'scales' if scales else 'biases'} but no "
                                       f"{'biases' if scales else 'scales'}")
            if quant is None:
                raise ModelFormatError(f"{path}: '{t.name}' is quantized (scales/biases) but config.json has no "
                                       "'quantization'")
            override = quant.get(base, {})
            if override is False:
                raise ModelFormatError(f"{path}: config.json marks '{base}' unquantized, but it has scales/biases")
            if not isinstance(override, dict):
                raise ModelFormatError(f"{path}: config.json quantization entry for '{base}' must be an object")
            entry.bits, entry.group_size = _quant_params(override, quant, f"quantization of '{base}'", path)
            entry.scales, entry.biases = scales.slice(), biases.slice()
        if t.dtype not in FLOAT_DTYPES and not (t.dtype == "U32" and entry.bits):
            raise UnsupportedError(f"{t.file}: tensor '{t.name}' has dtype {t.dtype}; akunu loads F32, F16 and BF16 "
                                   "tensors (and U32 only as MLX-packed weights)")
        short = canonical.split(".", 2)[-1] if canonical.startswith("layers.") else canonical
        rows_by = arch.permute_rows.get(short)
        entry.permute_heads = getattr(c, rows_by) if rows_by else 0
        entry.add_one = short in arch.norms_plus_one
        tensors.append(entry)

    tokenizer = HFTokenizer.from_dir(path)
    if tokenizer.vocab_size > c.vocab_size:
        raise ModelFormatError(f"{path}: tokenizer.json has {tokenizer.vocab_size} tokens but the embedding only "
                               f"{c.vocab_size} rows")
    tokenizer.pad_vocab(c.vocab_size)
    ckpt = _core.HFCheckpoint()
    ckpt.path = path
    ckpt.format = "mlx" if any(t.bits for t in tensors) else "safetensors"
    ckpt.config = c
    ckpt.tensors = tensors
    ckpt.eog_ids = tokenizer.eog_ids
    return LoadedCheckpoint(ckpt, tokenizer, read_chat_template(path), cc.model_type)
