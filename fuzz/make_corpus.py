"""Writes the fuzzers' seed corpora under tests/data/fuzz/<target>/corpus/ (fuzz/README.md).

Seeds are small real files, written by the reference writers (gguf-py's GGUFWriter, transformers'
config classes), not by akunu:

* GGUF models (fuzz_gguf_reader, fuzz_model_config): one tiny random model per architecture
  family and tensor type mix (F32, F16, Q8_0, Q4_0), each with a trimmed vocabulary;
* GGUF vocabularies (fuzz_tokenizer): llama.cpp's vocab-only files (tests/paths.py finds them)
  cut down to their first tokens plus some special ones, followed by a text to encode;
* SafeTensors files and shard indexes, transformers' config.json for each family (and an MLX
  one), and the chat templates akunu ships plus the SmolLM2 GGUF's (the Python targets).

Run from the repository root (python fuzz/make_corpus.py); it replaces the seed folders. The
corpora are committed, so CI never runs this.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import quantize

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
FUZZ_DATA = REPO / "tests" / "data" / "fuzz"
TEXT_MARKER = b"\nAKUNU_FUZZ_TEXT\n"  # fuzz/fuzz_tokenizer.cpp: the text to encode follows it

# --------------------------------------------------------------------------------------
# GGUF vocabularies, trimmed
# --------------------------------------------------------------------------------------

KEEP_TOKENS = 320     # the first ids: specials, byte tokens, the commonest pieces
KEEP_SPECIALS = 24    # and this many control / user-defined tokens from the rest
KEEP_MERGES = 400
SPECIAL_ID_KEYS = ("bos", "eos", "unknown", "eot", "eom", "padding", "seperator", "cls", "mask",
                   "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep")


def _field_value(reader: GGUFReader, key: str):
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def trimmed_vocab_kvs(path: Path) -> tuple[dict, list]:
    """The tokenizer.ggml.* metadata of `path` cut to KEEP_TOKENS tokens (+ specials), special ids
    renumbered (dropped when their token was cut), merges kept when all their parts survive."""
    reader = GGUFReader(path)
    tokens = _field_value(reader, "tokenizer.ggml.tokens")
    types = _field_value(reader, "tokenizer.ggml.token_type")
    scores = _field_value(reader, "tokenizer.ggml.scores")
    keep = list(range(min(KEEP_TOKENS, len(tokens))))
    if types is not None:
        keep += [i for i in range(len(keep), len(tokens)) if types[i] in (3, 4)][:KEEP_SPECIALS]
    new_id = {old: new for new, old in enumerate(keep)}
    kvs: dict = {}
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre"):
        if key in reader.fields:
            kvs[key] = (GGUFValueType.STRING, _field_value(reader, key))
    kvs["tokenizer.ggml.tokens"] = (GGUFValueType.ARRAY, [tokens[i] for i in keep], GGUFValueType.STRING)
    if scores is not None:
        kvs["tokenizer.ggml.scores"] = (GGUFValueType.ARRAY, [float(scores[i]) for i in keep], GGUFValueType.FLOAT32)
    if types is not None:
        kvs["tokenizer.ggml.token_type"] = (GGUFValueType.ARRAY, [int(types[i]) for i in keep], GGUFValueType.INT32)
    merges = _field_value(reader, "tokenizer.ggml.merges")
    if merges is not None:
        kept_text = {tokens[i] for i in keep}
        kept = [m for m in merges if " " in m[1:] and all(p in kept_text for p in _merge_parts(m))]
        kvs["tokenizer.ggml.merges"] = (GGUFValueType.ARRAY, kept[:KEEP_MERGES] or merges[:8], GGUFValueType.STRING)
    for name in SPECIAL_ID_KEYS:
        key = f"tokenizer.ggml.{name}_token_id"
        old = _field_value(reader, key)
        if old is not None and int(old) in new_id:
            kvs[key] = (GGUFValueType.UINT32, new_id[int(old)])
    for key in ("tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_space_prefix"):
        if key in reader.fields:
            kvs[key] = (GGUFValueType.BOOL, bool(_field_value(reader, key)))
    arch = _field_value(reader, "general.architecture") or "llama"
    return kvs, arch


def _merge_parts(merge: str) -> tuple[str, str, str]:
    sp = merge.find(" ", 1)
    left, right = merge[:sp], merge[sp + 1:]
    return left, right, left + right


def _add_kv(writer: GGUFWriter, key: str, spec: tuple) -> None:
    vtype, value = spec[0], spec[1]
    if vtype == GGUFValueType.ARRAY:
        writer.add_key_value(key, value, vtype, sub_type=spec[2])
    else:
        writer.add_key_value(key, value, vtype)


def write_gguf(path: Path, arch: str, kvs: dict, tensors: dict) -> bytes:
    """A GGUF written by gguf-py: metadata `kvs` ({key: (type, value[, element type])}) and
    `tensors` ({name: (array, GGMLQuantizationType)}); returns its bytes."""
    writer = GGUFWriter(str(path), arch)
    for key, spec in kvs.items():
        _add_kv(writer, key, spec)
    for name, (array, qtype) in tensors.items():
        if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            dtype = np.float32 if qtype == GGMLQuantizationType.F32 else np.float16
            writer.add_tensor(name, array.astype(dtype))
        else:
            writer.add_tensor(name, quantize(array.astype(np.float32), qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def vocab_files() -> list[Path]:
    from paths import llama_cpp_vocabs, tokenizer_testdata

    found = {p.name: p for p in sorted(tokenizer_testdata().glob("ggml-vocab-*.gguf"))}
    for p in sorted(llama_cpp_vocabs().glob("ggml-vocab-*.gguf")):
        found.setdefault(p.name, p)
    return list(found.values())


def vocab_seeds(tmp: Path) -> list[bytes]:
    seeds = []
    for path in vocab_files():
        kvs, arch = trimmed_vocab_kvs(path)
        data = write_gguf(tmp / path.name, arch, kvs, {})
        inp = path.with_name(path.name + ".inp")
        text = inp.read_bytes().split(b"\n__ggml_vocab_test__\n")[:6] if inp.is_file() else [b"Hello world"]
        seeds.append(data + TEXT_MARKER + b" ".join(t.strip(b"\n") for t in text)[:400])
    return seeds


# --------------------------------------------------------------------------------------
# GGUF models: one tiny random model per family
# --------------------------------------------------------------------------------------

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 32, 2, 1, 16, 32

# (name, architecture, layers, matrix type, features)
MODELS = [
    ("llama_f16", "llama", 1, GGMLQuantizationType.F16, {}),
    ("llama_q8_rope_freqs", "llama", 2, GGMLQuantizationType.Q8_0, {"rope_freqs": True, "tied": True}),
    ("llama_q4_linear_rope", "llama", 1, GGMLQuantizationType.Q4_0, {"linear_rope": 2.0, "window": 8}),
    ("qwen2_f32_bias", "qwen2", 1, GGMLQuantizationType.F32, {"bias": True}),
    ("qwen3_q8_qk_norm", "qwen3", 1, GGMLQuantizationType.Q8_0, {"qk_norm": True}),
    ("gemma2_f16_post_norms", "gemma2", 2, GGMLQuantizationType.F16, {"post_norms": True, "softcap": True}),
    ("gemma3_q8_pattern", "gemma3", 2, GGMLQuantizationType.Q8_0,
     {"post_norms": True, "qk_norm": True, "pattern": [True, False]}),
    ("phi3_f16_fused", "phi3", 1, GGMLQuantizationType.F16, {"fused": True, "window": 16}),
]


def model_kvs(arch: str, layers: int, features: dict, vocab: dict) -> dict:
    u32, f32 = GGUFValueType.UINT32, GGUFValueType.FLOAT32
    kvs = {
        "general.name": (GGUFValueType.STRING, f"tiny {arch}"),
        f"{arch}.context_length": (u32, 256),
        f"{arch}.embedding_length": (u32, HIDDEN),
        f"{arch}.block_count": (u32, layers),
        f"{arch}.feed_forward_length": (u32, FFN),
        f"{arch}.attention.head_count": (u32, HEADS),
        f"{arch}.attention.head_count_kv": (u32, KV_HEADS),
        f"{arch}.attention.key_length": (u32, HEAD_DIM),
        f"{arch}.attention.value_length": (u32, HEAD_DIM),
        f"{arch}.rope.dimension_count": (u32, HEAD_DIM),
        f"{arch}.rope.freq_base": (f32, 10000.0),
        f"{arch}.attention.layer_norm_rms_epsilon": (f32, 1e-6),
    }
    if "linear_rope" in features:
        kvs[f"{arch}.rope.scaling.type"] = (GGUFValueType.STRING, "linear")
        kvs[f"{arch}.rope.scaling.factor"] = (f32, features["linear_rope"])
    if "window" in features:
        kvs[f"{arch}.attention.sliding_window"] = (u32, features["window"])
    if features.get("softcap"):
        kvs[f"{arch}.attn_logit_softcapping"] = (f32, 50.0)
        kvs[f"{arch}.final_logit_softcapping"] = (f32, 30.0)
    if "pattern" in features:
        kvs[f"{arch}.attention.sliding_window"] = (u32, 8)
        kvs[f"{arch}.attention.sliding_window_pattern"] = (GGUFValueType.ARRAY, features["pattern"], GGUFValueType.BOOL)
        kvs[f"{arch}.rope.freq_base_swa"] = (f32, 10000.0)
    kvs.update(vocab)
    return kvs


def model_tensors(layers: int, qtype, features: dict, n_vocab: int, rng) -> dict:
    def matrix(rows, cols):  # numpy [rows, cols]: GGUF dims [cols, rows]
        return rng.standard_normal((rows, cols)).astype(np.float32) * 0.1

    def vector(n):
        return 1.0 + rng.standard_normal(n).astype(np.float32) * 0.1

    f32 = GGMLQuantizationType.F32
    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    t = {"token_embd.weight": (matrix(n_vocab, HIDDEN), qtype), "output_norm.weight": (vector(HIDDEN), f32)}
    if not features.get("tied"):
        t["output.weight"] = (matrix(n_vocab, HIDDEN), qtype)
    if features.get("rope_freqs"):
        t["rope_freqs.weight"] = (np.linspace(1, 8, HEAD_DIM // 2).astype(np.float32), f32)
    for l in range(layers):
        p = f"blk.{l}."
        t[p + "attn_norm.weight"] = (vector(HIDDEN), f32)
        if features.get("fused"):
            t[p + "attn_qkv.weight"] = (matrix(q_dim + 2 * kv_dim, HIDDEN), qtype)
            t[p + "ffn_up.weight"] = (matrix(2 * FFN, HIDDEN), qtype)
        else:
            t[p + "attn_q.weight"] = (matrix(q_dim, HIDDEN), qtype)
            t[p + "attn_k.weight"] = (matrix(kv_dim, HIDDEN), qtype)
            t[p + "attn_v.weight"] = (matrix(kv_dim, HIDDEN), qtype)
            t[p + "ffn_gate.weight"] = (matrix(FFN, HIDDEN), qtype)
            t[p + "ffn_up.weight"] = (matrix(FFN, HIDDEN), qtype)
        t[p + "attn_output.weight"] = (matrix(HIDDEN, q_dim), qtype)
        t[p + "ffn_norm.weight"] = (vector(HIDDEN), f32)
        t[p + "ffn_down.weight"] = (matrix(HIDDEN, FFN), qtype)
        if features.get("bias"):
            for x, n in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
                t[p + f"attn_{x}.bias"] = (vector(n), f32)
        if features.get("qk_norm"):
            t[p + "attn_q_norm.weight"] = (vector(HEAD_DIM), f32)
            t[p + "attn_k_norm.weight"] = (vector(HEAD_DIM), f32)
        if features.get("post_norms"):
            t[p + "post_attention_norm.weight"] = (vector(HIDDEN), f32)
            t[p + "post_ffw_norm.weight"] = (vector(HIDDEN), f32)
    return t


def model_seeds(tmp: Path) -> list[bytes]:
    from paths import tokenizer_testdata

    global KEEP_TOKENS, KEEP_SPECIALS, KEEP_MERGES
    saved = KEEP_TOKENS, KEEP_SPECIALS, KEEP_MERGES
    KEEP_TOKENS, KEEP_SPECIALS, KEEP_MERGES = 64, 4, 40  # the models' vocabularies: small
    try:
        vocabs = {"spm": trimmed_vocab_kvs(tokenizer_testdata() / "ggml-vocab-llama-spm.gguf")[0],
                  "bpe": trimmed_vocab_kvs(tokenizer_testdata() / "ggml-vocab-qwen2.gguf")[0]}
    finally:
        KEEP_TOKENS, KEEP_SPECIALS, KEEP_MERGES = saved
    seeds = []
    rng = np.random.default_rng(0)
    for i, (name, arch, layers, qtype, features) in enumerate(MODELS):
        vocab = vocabs["spm" if i % 2 == 0 else "bpe"]
        n_vocab = len(vocab["tokenizer.ggml.tokens"][1])
        kvs = model_kvs(arch, layers, features, vocab)
        seeds.append(write_gguf(tmp / f"{name}.gguf", arch, kvs, model_tensors(layers, qtype, features, n_vocab, rng)))
    return seeds


# --------------------------------------------------------------------------------------
# Python targets: SafeTensors, shard indexes, config.json, chat templates
# --------------------------------------------------------------------------------------

def safetensors_bytes(tensors: dict, metadata: dict | None = None) -> bytes:
    """A .safetensors file as the format's specification lays it out (8-byte header length,
    JSON header, data), the tensors as (dtype name, shape, raw bytes)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds() -> list[bytes]:
    rng = np.random.default_rng(1)
    f32 = rng.standard_normal((4, 8)).astype(np.float32)
    return [
        safetensors_bytes({"model.norm.weight": ("F32", (8,), f32[0].tobytes())}, {"format": "pt"}),
        safetensors_bytes({"a": ("F16", (4, 8), f32.astype(np.float16).tobytes()),
                           "b": ("BF16", (2, 2), b"\x80\x3f" * 4), "c": ("U32", (3,), b"\x01\0\0\0" * 3)}),
        safetensors_bytes({"empty": ("F32", (0, 4), b""), "i64": ("I64", (1,), b"\0" * 8)}),
    ]


def index_seeds() -> list[bytes]:
    # fuzz/python/fuzz_safetensors_index.py lays the shards out: a.safetensors holds "a" and "b".
    return [json.dumps(x).encode() for x in (
        {"metadata": {"total_size": 96}, "weight_map": {"a": "a.safetensors", "b": "a.safetensors"}},
        {"weight_map": {"a": "a.safetensors"}},
        {"weight_map": {"b": "a.safetensors", "c": "b.safetensors"}},
    )]


def config_seeds() -> list[bytes]:
    import tiny_models as tm

    seeds = []
    for family in tm.FAMILIES:
        spec = tm.family_spec(family, f"fuzz_{family}")
        cfg = tm.hf_config(spec, vocab_size=64).to_dict()
        seeds.append(json.dumps(cfg, sort_keys=True).encode())
    mlx = tm.hf_config(tm.family_spec("llama", "fuzz_mlx"), vocab_size=64).to_dict()
    mlx["quantization"] = {"group_size": 32, "bits": 4, "model.embed_tokens": {"group_size": 64, "bits": 8}}
    seeds.append(json.dumps(mlx, sort_keys=True).encode())
    return seeds


def template_seeds() -> list[bytes]:
    from akunu.chat_templates import FAMILY_TEMPLATES
    from paths import smollm2_path

    templates = list(FAMILY_TEMPLATES.values())
    reader = GGUFReader(smollm2_path())
    templates.append(reader.fields["tokenizer.chat_template"].contents())
    return [t.encode() for t in templates]


# --------------------------------------------------------------------------------------

def write_corpus(target: str, seeds: list[bytes]) -> None:
    folder = FUZZ_DATA / target / "corpus"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for seed in seeds:  # named by content, as libFuzzer names what it adds
        (folder / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    print(f"{target}: {len(seeds)} seeds, {sum(map(len, seeds))} bytes")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        models = model_seeds(tmp)
        vocabs = vocab_seeds(tmp)
    write_corpus("fuzz_gguf_reader", models + vocabs[:4])
    write_corpus("fuzz_model_config", models)
    write_corpus("fuzz_tokenizer", vocabs + models[:2])
    write_corpus("fuzz_safetensors_header", safetensors_seeds())
    write_corpus("fuzz_safetensors_index", index_seeds())
    write_corpus("fuzz_hf_config", config_seeds())
    write_corpus("fuzz_chat_template", template_seeds())


if __name__ == "__main__":
    main()
