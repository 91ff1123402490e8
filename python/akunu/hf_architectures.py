"""Hugging Face architectures as data: how each `model_type` maps onto akunu.

To load another architecture from SafeTensors/MLX once akunu runs its graph (its GGUF path):
add an ArchSpec here (tensor names, config keys and defaults, which rows to reorder for the RoPE
kernel) and list its model_type in ARCHITECTURES. Nothing else in the loader is per-architecture.
"""

from __future__ import annotations

from dataclasses import dataclass, field


# Config fields every architecture reads: ModelConfig field -> (config.json key, default).
# A default of None means the key is required.
BASE_CONFIG_KEYS = {
    "dim": ("hidden_size", None),
    "n_layers": ("num_hidden_layers", None),
    "n_heads": ("num_attention_heads", None),
    "ffn_dim": ("intermediate_size", None),
    "vocab_size": ("vocab_size", None),
}


@dataclass(frozen=True)
class ArchSpec:
    """How one Hugging Face model_type maps onto akunu (see ARCHITECTURES)."""

    architecture: str  # akunu's ArchDescriptor name
    # HF name -> canonical name for tensors outside the layers
    global_tensors: dict
    # name after "model.layers.N." -> canonical name after "layers.N."
    layer_tensors: dict
    # canonical per-layer name -> config field giving the head count to reorder its rows by:
    # HF stores Q/K in rotate-half order, akunu's Llama RoPE kernel rotates adjacent pairs.
    permute_rows: dict = field(default_factory=dict)
    layer_prefix: str = "model.layers."
    config_keys: dict = field(default_factory=lambda: dict(BASE_CONFIG_KEYS))
    # optional config keys and their defaults (the transformers config class's defaults)
    defaults: dict = field(default_factory=dict)
    activations: tuple = ("silu",)
    # config flags that would need weights akunu has no place for (biases ...)
    refuse_when_true: tuple = ()
    # tensors a checkpoint may carry that the forward pass does not need
    ignored_suffixes: tuple = ("rotary_emb.inv_freq",)
    tied_default: bool = False


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

LLAMA = ArchSpec(
    architecture="llama",
    global_tensors=LLAMA_GLOBAL_TENSORS,
    layer_tensors=LLAMA_LAYER_TENSORS,
    permute_rows={"attention.q": "n_heads", "attention.k": "n_kv_heads"},
    defaults={"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 2048},
    refuse_when_true=("attention_bias", "mlp_bias"),
)

# Hugging Face model_type -> ArchSpec. Mistral is Llama's graph (sliding_window handled below).
ARCHITECTURES = {"llama": LLAMA, "mistral": LLAMA}

# The canonical tensors every layer needs and the ones outside the layers.
REQUIRED_LAYER_TENSORS = ("attention_norm", "attention.q", "attention.k", "attention.v", "attention.o", "ffn_norm",
                          "ffn.gate", "ffn.up", "ffn.down")
