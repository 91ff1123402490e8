"""Hugging Face architectures as data: how each `model_type` maps onto akunu.

To load another architecture from SafeTensors/MLX once akunu runs its graph (its GGUF path):
add an ArchSpec here (tensor names, config keys and defaults, which rows to reorder for the RoPE
kernel, which norms store w for a (1 + w) multiplier, which layers slide) and list its model_type
in ARCHITECTURES. Nothing else in the loader is per-architecture.

Semantics follow transformers' modeling/configuration files of each family (the reference the
tests compare with), which differ from llama.cpp's GGUF conventions in places: Q/K rows are in
rotate-half order (reordered only for the Llama kernel, which rotates adjacent pairs), Gemma norm
weights are stored without the + 1 llama.cpp's converter folds in, Phi-3's sliding window is
honoured (llama.cpp ignores it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable


# Config fields every architecture reads: ModelConfig field -> (config.json key, default).
# A default of None means the key is required.
BASE_CONFIG_KEYS = {
    "dim": ("hidden_size", None),
    "n_layers": ("num_hidden_layers", None),
    "n_heads": ("num_attention_heads", None),
    "ffn_dim": ("intermediate_size", None),
    "vocab_size": ("vocab_size", None),
}

# Which layers use the sliding window when config.json has no "layer_types" (or the family does
# not read it): (config, n_layers) -> one flag per layer. transformers 5 writes layer_types for
# the families that read it; older configs imply them from these keys.
SlidingRule = Callable[[dict, int], list]


def every_layer(cfg: dict, n: int) -> list:
    return [True] * n


def every_other_layer(cfg: dict, n: int) -> list:  # Gemma 2: layers 0, 2, 4 ... slide
    return [i % 2 == 0 for i in range(n)]


def all_but_last_of_pattern(cfg: dict, n: int) -> list:  # Gemma 3: sliding_window_pattern (6)
    p = cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern", 6))
    if isinstance(p, bool) or not isinstance(p, int) or p <= 0:
        raise ValueError(f"'sliding_window_pattern' must be a positive integer, got {p!r}")
    return [(i + 1) % p != 0 for i in range(n)]


def from_max_window_layers(cfg: dict, n: int) -> list:  # Qwen2/3: layers >= max_window_layers slide
    first = cfg.get("max_window_layers", 28)
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise ValueError(f"'max_window_layers' must be a non-negative integer, got {first!r}")
    return [i >= first for i in range(n)]


@dataclass(frozen=True)
class ArchSpec:
    """How one Hugging Face model_type maps onto akunu (see ARCHITECTURES)."""

    architecture: str  # akunu's ArchDescriptor name
    # HF name -> canonical name for tensors outside the layers
    global_tensors: dict
    # name after "model.layers.N." -> canonical name after "layers.N."; every one is required
    layer_tensors: dict
    # canonical per-layer name -> config field giving the head count to reorder its rows by:
    # HF stores Q/K in rotate-half order, akunu's Llama RoPE kernel rotates adjacent pairs.
    # Families whose descriptor uses the NeoX kernel (rotate-half) list none.
    permute_rows: dict = field(default_factory=dict)
    # canonical names (global, or per layer without "layers.N.") of RMSNorm weights the model
    # multiplies by (1 + w): akunu's norm multiplies by w, so 1 is added at load.
    norms_plus_one: tuple = ()
    layer_prefix: str = "model.layers."
    config_keys: dict = field(default_factory=lambda: dict(BASE_CONFIG_KEYS))
    # optional config keys and their defaults (the transformers config class's defaults)
    defaults: dict = field(default_factory=dict)
    activation_keys: tuple = ("hidden_act",)  # the first present one names the FFN activation
    activations: tuple = ("silu",)             # values meaning the descriptor's kernel
    # config flags that would need weights akunu has no place for (biases ...)
    refuse_when_true: tuple = ()
    # tensors a checkpoint may carry that the forward pass does not need
    ignored_suffixes: tuple = ("rotary_emb.inv_freq",)
    tied_default: bool = False
    embedding_scale_sqrt_dim: bool = False  # Gemma: embeddings * sqrt(hidden_size)
    # config key whose value s sets the softmax scale to s ** -0.5 (Gemma 2/3); None: head_dim
    query_scalar_key: str | None = None
    read_softcaps: bool = False  # attn_logit_softcapping / final_logit_softcapping (Gemma 2/3)
    # Sliding window: None = the family has none (a "sliding_window" key is ignored, as
    # transformers does); otherwise the rule for configs without layer_types.
    sliding: SlidingRule | None = None
    reads_layer_types: bool = False  # config.json "layer_types" decides which layers slide
    window_enabled_by: str | None = None  # Qwen: the window counts only when this flag is true
    # Gemma 3: sliding layers rotate with their own RoPE parameters
    # (rope_parameters["sliding_attention"], or the older rope_local_base_freq).
    local_rope: bool = False


LLAMA_GLOBAL_TENSORS = {
    "model.embed_tokens.weight": "token_embedding",
    "model.norm.weight": "output_norm",
    "lm_head.weight": "output",
}
LLAMA_LAYER_TENSORS = {
    "input_layernorm.weight": "attention_norm",
    "self_attn.q_proj.weight": "attention.q",
    "self_attn.k_proj.weight": "attention.k",
    "self_attn.v_proj.weight": "attention.v",
    "self_attn.o_proj.weight": "attention.o",
    "post_attention_layernorm.weight": "ffn_norm",
    "mlp.gate_proj.weight": "ffn.gate",
    "mlp.up_proj.weight": "ffn.up",
    "mlp.down_proj.weight": "ffn.down",
}
QKV_BIASES = {f"self_attn.{x}_proj.bias": f"attention.{x}_bias" for x in "qkv"}
QK_NORMS = {"self_attn.q_norm.weight": "attention.q_norm", "self_attn.k_norm.weight": "attention.k_norm"}
# Gemma 2/3: four norms per layer; the pre-FFN norm is akunu's ffn_norm.
GEMMA2_LAYER_TENSORS = dict(LLAMA_LAYER_TENSORS, **{
    "post_attention_layernorm.weight": "post_attention_norm",
    "pre_feedforward_layernorm.weight": "ffn_norm",
    "post_feedforward_layernorm.weight": "post_ffn_norm",
})


def _norms(tensors: dict) -> tuple:
    return tuple(c for c in tensors.values() if c.endswith("norm"))


LLAMA = ArchSpec(
    architecture="llama",
    global_tensors=LLAMA_GLOBAL_TENSORS,
    layer_tensors=LLAMA_LAYER_TENSORS,
    permute_rows={"attention.q": "n_heads", "attention.k": "n_kv_heads"},
    defaults={"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 2048},
    refuse_when_true=("attention_bias", "mlp_bias"),
)

# Mistral: Llama's graph and layout, a window on every layer when sliding_window is set.
MISTRAL = replace(LLAMA, sliding=every_layer, defaults=dict(LLAMA.defaults, sliding_window=4096))

# Qwen2: Q/K/V biases; rotate-half RoPE, which akunu's qwen2 descriptor runs as is (NeoX kernel).
QWEN2 = ArchSpec(
    architecture="qwen2",
    global_tensors=LLAMA_GLOBAL_TENSORS,
    layer_tensors=dict(LLAMA_LAYER_TENSORS, **QKV_BIASES),
    defaults={"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 32768, "sliding_window": 4096},
    refuse_when_true=("mlp_bias",),
    sliding=from_max_window_layers,
    reads_layer_types=True,
    window_enabled_by="use_sliding_window",
)

# Qwen3: no biases (attention_bias would add an o_proj bias too), per-head Q/K RMSNorm.
QWEN3 = replace(QWEN2, architecture="qwen3", layer_tensors=dict(LLAMA_LAYER_TENSORS, **QK_NORMS),
                refuse_when_true=("attention_bias", "mlp_bias"))

# Gemma: (1 + w) norms, GELU-tanh ("gelu" is a legacy spelling transformers reads as tanh),
# embeddings * sqrt(hidden), tied output, rotate-half RoPE.
GEMMA = ArchSpec(
    architecture="gemma",
    global_tensors=LLAMA_GLOBAL_TENSORS,
    layer_tensors=LLAMA_LAYER_TENSORS,
    norms_plus_one=_norms(LLAMA_GLOBAL_TENSORS) + _norms(LLAMA_LAYER_TENSORS),
    defaults={"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 8192},
    activations=("gelu_pytorch_tanh", "gelu"),
    refuse_when_true=("attention_bias", "use_bidirectional_attention"),
    tied_default=True,
    embedding_scale_sqrt_dim=True,
)

# Gemma 2: post-norms, softcaps, query_pre_attn_scalar, even layers slide.
GEMMA2 = replace(
    GEMMA, architecture="gemma2", layer_tensors=GEMMA2_LAYER_TENSORS,
    norms_plus_one=_norms(LLAMA_GLOBAL_TENSORS) + _norms(GEMMA2_LAYER_TENSORS),
    defaults=dict(GEMMA.defaults, query_pre_attn_scalar=256, attn_logit_softcapping=50.0,
                  final_logit_softcapping=30.0, sliding_window=4096),
    activation_keys=("hidden_activation",), activations=("gelu_pytorch_tanh",),
    query_scalar_key="query_pre_attn_scalar", read_softcaps=True,
    sliding=every_other_layer, reads_layer_types=True)

# Gemma 3 (text, model_type gemma3_text): + Q/K norms (also 1 + w), local RoPE on sliding layers,
# one global layer per sliding_window_pattern, no softcaps unless the config sets them.
GEMMA3_LAYER_TENSORS = dict(GEMMA2_LAYER_TENSORS, **QK_NORMS)
GEMMA3 = replace(
    GEMMA2, architecture="gemma3", layer_tensors=GEMMA3_LAYER_TENSORS,
    norms_plus_one=_norms(LLAMA_GLOBAL_TENSORS) + _norms(GEMMA3_LAYER_TENSORS),
    defaults=dict(GEMMA2.defaults, rope_theta=1_000_000.0, rope_local_base_freq=10000.0,
                  max_position_embeddings=131072, attn_logit_softcapping=None, final_logit_softcapping=None),
    sliding=all_but_last_of_pattern, local_rope=True)

# Phi-3: fused qkv_proj and gate_up_proj (split by the engine into row ranges), rotate-half RoPE
# over partial_rotary_factor of each head, a window on every layer when sliding_window is set.
PHI3 = ArchSpec(
    architecture="phi3",
    global_tensors=LLAMA_GLOBAL_TENSORS,
    layer_tensors={
        "input_layernorm.weight": "attention_norm",
        "self_attn.qkv_proj.weight": "attention.qkv",
        "self_attn.o_proj.weight": "attention.o",
        "post_attention_layernorm.weight": "ffn_norm",
        "mlp.gate_up_proj.weight": "ffn.gate_up",
        "mlp.down_proj.weight": "ffn.down",
    },
    defaults={"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 4096},
    sliding=every_layer,
)

# Hugging Face model_type -> ArchSpec. ("gemma3" is the multimodal model: not listed.)
ARCHITECTURES = {"llama": LLAMA, "mistral": MISTRAL, "qwen2": QWEN2, "qwen3": QWEN3, "gemma": GEMMA,
                 "gemma2": GEMMA2, "gemma3_text": GEMMA3, "phi3": PHI3}
