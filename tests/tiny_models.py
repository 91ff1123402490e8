"""The tiny random models the tests build: one spec per case, and its transformers model.

Every family (Llama, Qwen2, Qwen3, Mistral, Gemma, Gemma 2, Gemma 3, Phi-3) is an ``ArchSpec``: the
family, the shapes, the family's features (biases, QK-norm, softcaps, sliding windows, partial or
Llama-3-scaled RoPE, tied embeddings) and the init gains. ``make_hf_model`` builds the random
transformers model of a spec (float32, eval mode, eager attention); tests/gguf_writer.py writes it
as llama.cpp would and tests/references.py rebuilds the reference from the written file.

Init: larger-than-default gains so that attention is peaked (RoPE, the Q/K permutation, windows
and softcaps visibly matter) and log-normal output-row norms (``row_sigma``) so that the output
distribution has real argmax margins. The gains were calibrated so that float16-level numerical
noise passes the tests' criterion (argmax >= 99%, mean KL <= 1e-3) with a wide margin, while a
missing feature fails it by orders of magnitude (the ``test_reference_*`` tests check that).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

FAMILIES = ("llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "gemma3", "phi3")
GEMMA_FAMILY = ("gemma", "gemma2", "gemma3")


@dataclass(frozen=True)
class ArchSpec:
    name: str
    family: str                 # one of FAMILIES
    dtype: str = "F16"          # the file's matrices: a key of gguf_writer.DTYPES
    hidden: int = 128
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 32
    ffn: int = 256
    tied: bool = False
    rope_theta: float = 10000.0
    local_rope_theta: float = 10000.0  # gemma3 sliding layers
    llama3_rope: bool = False   # Llama 3 rope scaling (llama.cpp writes it as a rope_freqs tensor)
    llama3_original_ctx: int = 64  # small: positions used by the tests exceed it
    norm_eps: float = 1e-6
    context_length: int = 2048
    write_key_length: bool = True  # llama.cpp writes attention.key_length when the HF config has head_dim
    sliding_window: int | None = None
    attn_softcap: float | None = None
    final_softcap: float | None = None
    partial_rotary: float = 1.0
    rope_linear_factor: float | None = None  # gemma3: linear scaling of the global layers (4B and up)
    seed: int = 0
    # init gains (std = gain / sqrt(fan_in))
    qk_gain: float = 1.0
    qk_norm_gain: float = 1.8      # QK-norm weights: scores stay peaked after normalizing heads
    bias_std: float = 0.5
    out_gain: float = 1.5
    row_sigma: float = 0.7  # log-normal spread of output-row norms -> peaked distributions, real argmax margins

    def __post_init__(self):
        assert self.family in FAMILIES, self.family

    @property
    def rope_dim(self) -> int:
        return int(self.partial_rotary * self.hidden) // self.n_heads if self.family == "phi3" else self.head_dim

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


# Each family's defaults; a test case is one of these with some fields replaced (family_spec).
# Sliding windows are far shorter than the ~300-token prompts; Gemma 3 has 6 layers so that one of
# them is global.
ARCH_BASE = {
    "llama": ArchSpec("base", "llama", dtype="F32", norm_eps=1e-5, write_key_length=False),
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


def family_spec(family: str, name: str, **fields) -> ArchSpec:
    """A case of ``family``: its ARCH_BASE defaults with ``fields`` replaced."""
    return replace(ARCH_BASE[family], name=name, **fields)


# The Llama cases (tests/test_reference_logits.py): each dtype, tied and untied, Llama 3 RoPE.
LLAMA_SPECS = {s.name: s for s in [
    family_spec("llama", "f32_untied", dtype="F32", tied=False, seed=1),
    family_spec("llama", "f32_tied_llama3", dtype="F32", tied=True, llama3_rope=True, seed=2),
    family_spec("llama", "f16_tied", dtype="F16", hidden=64, head_dim=16, n_layers=3, ffn=192,
                tied=True, write_key_length=True, seed=3),
    family_spec("llama", "q8_0_untied", dtype="Q8_0", tied=False, seed=4),
    family_spec("llama", "q4_0_tied", dtype="Q4_0", tied=True, seed=5),
    family_spec("llama", "q4_0_untied_llama3", dtype="Q4_0", tied=False, llama3_rope=True,
                n_layers=3, ffn=192, seed=6),
]}

# The other families (tests/test_architectures.py): F16 and one quantized type each.
ARCH_QUANT = {"qwen2": "Q8_0", "qwen3": "Q4_0", "mistral": "Q8_0", "gemma": "Q8_0", "gemma2": "Q8_0",
              "gemma3": "Q8_0", "phi3": "Q4_0"}
ARCH_SPECS = {}
for _fam, _quant in ARCH_QUANT.items():
    for _dt in ("F16", _quant):
        _name = f"{_fam}_{_dt.lower()}"
        ARCH_SPECS[_name] = family_spec(_fam, _name, dtype=_dt)
# Gemma 3 4B and up: linear RoPE scaling on the global layers only.
ARCH_SPECS["gemma3_f16_linear"] = family_spec("gemma3", "gemma3_f16_linear", dtype="F16", rope_linear_factor=8.0,
                                              seed=28)


# --------------------------------------------------------------------------------------
# transformers side
# --------------------------------------------------------------------------------------

def hf_config(spec: ArchSpec, vocab_size: int = 32000, **overrides):
    """The transformers config of ``spec`` (``overrides`` replace fields: used for broken references)."""
    import transformers as tf

    common = dict(vocab_size=vocab_size, hidden_size=spec.hidden, intermediate_size=spec.ffn,
                  num_hidden_layers=spec.n_layers, num_attention_heads=spec.n_heads,
                  num_key_value_heads=spec.n_kv_heads, head_dim=spec.head_dim,
                  max_position_embeddings=spec.context_length, rms_norm_eps=spec.norm_eps,
                  tie_word_embeddings=spec.tied, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    rope = spec.rope_parameters
    f = spec.family
    if f == "llama":
        kw = dict(common, rope_parameters=rope, attention_bias=False, mlp_bias=False, hidden_act="silu")
        kw.pop("pad_token_id")
        cls = tf.LlamaConfig
    elif f == "qwen2":
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


def model_class(family: str):
    """The transformers causal-LM class of ``family``."""
    import transformers as tf

    return {"llama": tf.LlamaForCausalLM, "qwen2": tf.Qwen2ForCausalLM, "qwen3": tf.Qwen3ForCausalLM,
            "mistral": tf.MistralForCausalLM, "gemma": tf.GemmaForCausalLM, "gemma2": tf.Gemma2ForCausalLM,
            "gemma3": tf.Gemma3ForCausalLM, "phi3": tf.Phi3ForCausalLM}[family]


def make_hf_model(spec: ArchSpec, vocab_size: int = 32000, **overrides):
    """Random model of ``spec.family`` (float32, eval mode) with the test-friendly init."""
    model = model_class(spec.family)(hf_config(spec, vocab_size, **overrides)).float().eval()
    (_init_llama if spec.family == "llama" else _init_by_name)(model, spec)
    if spec.tied:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def _init_llama(model, spec: ArchSpec) -> None:
    """The Llama recipe (the first one, which the Llama cases' files and margins come from): each
    layer's projections then norms in module order, the embedding scaled for the logits if tied."""
    import torch

    assert spec.n_heads * spec.head_dim == spec.hidden, "the Llama cases assume head_dim*n_heads == hidden"
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


def _init_by_name(model, spec: ArchSpec) -> None:
    """The other families' recipe: every parameter by kind, in sorted name order (so it covers
    biases, QK-norms, post-norms and fused projections alike), then the embedding and the head."""
    import torch

    g = torch.Generator().manual_seed(2000 + spec.seed)
    gemma = spec.family in GEMMA_FAMILY

    def rnd(shape, std):
        return torch.randn(*shape, generator=g) * std

    with torch.no_grad():
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
        emb = model.model.embed_tokens.weight
        if spec.tied:
            # The scaled input (Gemma: * sqrt(hidden)) and the logits both need a useful spread.
            emb.copy_(rnd(emb.shape, spec.out_gain / math.sqrt(spec.hidden)))
        else:
            emb.copy_(rnd(emb.shape, 1.0))
            model.lm_head.weight.copy_(rnd(model.lm_head.weight.shape, spec.out_gain / math.sqrt(spec.hidden)))
        head = model.lm_head.weight
        head.mul_(torch.exp(spec.row_sigma * rnd((head.shape[0], 1), 1.0)))
