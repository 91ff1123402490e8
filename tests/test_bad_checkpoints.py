"""Corrupt or unsupported Hugging Face checkpoints raise clear exceptions naming the problem
(never a crash): missing shards, truncated or lying SafeTensors headers, unknown dtypes, missing
config keys, unsupported model types, MLX quantization mistakes; and the engine's own checks of
the table Python hands it (offsets past the end of a file, inconsistent configs)."""
from __future__ import annotations

import json
import os
import shutil

import pytest

import gguf_writer as gw
import hf_checkpoints as hc
import tiny_models as tm

SPEC = tm.family_spec("llama", "bad_base", hidden=64, head_dim=16, n_heads=4, n_kv_heads=2, n_layers=1, ffn=128,
                      seed=31)


@pytest.fixture(scope="module")
def bases(tmp_path_factory, tokenizer_dir):
    single, _ = hc.save_checkpoint(SPEC, tmp_path_factory.mktemp("bad_single"), tokenizer_dir)
    sharded, _ = hc.save_checkpoint(SPEC, tmp_path_factory.mktemp("bad_sharded"), tokenizer_dir, max_shard_size="2MB")
    mlx, _, _ = hc.save_mlx_checkpoint(SPEC, tmp_path_factory.mktemp("bad_mlx") / "m", tokenizer_dir, 4, 32)
    return {"single": single, "sharded": sharded, "mlx": mlx}


@pytest.fixture
def ckpt(bases, tmp_path):
    """A private copy of a valid checkpoint to corrupt: ckpt("single" | "sharded" | "mlx")."""
    def make(kind="single"):
        dst = tmp_path / kind
        shutil.copytree(bases[kind], dst)
        return dst
    return make


def expect_error(akunu_mod, path, cls, *words, names=None):
    with pytest.raises(cls) as info:
        akunu_mod.Model(str(path))
    msg = str(info.value)
    for w in words:
        assert w.lower() in msg.lower(), (w, msg)
    assert str(names or path) in msg, f"message should name {names or path}: {msg}"
    return msg


def edit_json(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def edit_header(path, fn):
    header, payload = hc.read_raw(path)
    fn(header)
    hc.write_raw(path, header, payload)


@pytest.mark.parametrize("kind", ["single", "sharded", "mlx"])
def test_valid_bases_load(kind, bases, akunu_mod):
    m = akunu_mod.Model(str(bases[kind]))
    assert m.config["n_layers"] == 1 and m.generate("Hello", max_tokens=3) is not None


# ------------------------------------------------------------------ files


def test_missing_shard(ckpt, akunu_mod):
    d = ckpt("sharded")
    shards = sorted(p for p in d.glob("model-*.safetensors"))
    assert len(shards) >= 2
    shards[-1].unlink()
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "missing shard", shards[-1].name)


def test_index_points_at_the_wrong_shard(ckpt, akunu_mod):
    d = ckpt("sharded")
    index = d / "model.safetensors.index.json"
    shards = sorted({*json.loads(index.read_text())["weight_map"].values()})
    edit_json(index, lambda j: j["weight_map"].update({"model.norm.weight": next(
        s for s in shards if s != j["weight_map"]["model.norm.weight"])}))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "model.norm.weight", "does not hold it")


@pytest.mark.parametrize("keep", [0.7, 0.999])
def test_truncated_safetensors(ckpt, akunu_mod, keep):
    d = ckpt()
    f = d / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: int(len(data) * keep)])
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "truncated", names=f)


def test_truncated_inside_header(ckpt, akunu_mod):
    d = ckpt()
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[:200])
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "header length", names=f)


def test_header_not_json(ckpt, akunu_mod):
    d = ckpt()
    f = d / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[8:12] = b"\xff\xfe{{"
    f.write_bytes(bytes(data))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "not valid json", names=f)


def test_header_lies_about_size(ckpt, akunu_mod):
    d = ckpt()
    f = d / "model.safetensors"
    name = "model.layers.0.self_attn.q_proj.weight"

    def lie(h):
        h[name]["shape"] = [h[name]["shape"][0] * 2, h[name]["shape"][1]]  # shape twice the bytes given
    edit_header(f, lie)
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, name, "needs", names=f)


def test_header_offsets_past_the_data(ckpt, akunu_mod):
    d = ckpt()
    f = d / "model.safetensors"
    name = "model.norm.weight"

    def lie(h):
        end = max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
        size = h[name]["data_offsets"][1] - h[name]["data_offsets"][0]
        h[name]["data_offsets"] = [end, end + size]
    edit_header(f, lie)
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, name, "truncated", names=f)


@pytest.mark.parametrize("dtype,shape_scale", [("Q9", 1), ("F64", 0.5), ("I8", 4)])
def test_unsupported_dtype(ckpt, akunu_mod, dtype, shape_scale):
    d = ckpt()
    f = d / "model.safetensors"
    name = "model.layers.0.mlp.up_proj.weight"

    def retype(h):
        h[name]["dtype"] = dtype
        rows, cols = h[name]["shape"]
        h[name]["shape"] = [rows, int(cols * shape_scale)]  # keep the byte count consistent
    edit_header(f, retype)
    expect_error(akunu_mod, d, akunu_mod.UnsupportedError, name, dtype, names=f)


def test_missing_tensor(ckpt, akunu_mod):
    d = ckpt()
    f = d / "model.safetensors"
    edit_header(f, lambda h: h.pop("model.layers.0.mlp.up_proj.weight"))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "missing tensor", "model.layers.0.mlp.up_proj.weight")


def test_unknown_tensor_refused(ckpt, akunu_mod):
    """A bias the engine has no place for must not be silently dropped."""
    d = ckpt()
    f = d / "model.safetensors"

    def add_bias(h):
        h["model.layers.0.self_attn.q_proj.bias"] = {"dtype": "F32", "shape": [16],
                                                     "data_offsets": h["model.norm.weight"]["data_offsets"][:1] +
                                                     [h["model.norm.weight"]["data_offsets"][0] + 64]}
    edit_header(f, add_bias)
    expect_error(akunu_mod, d, akunu_mod.UnsupportedError, "model.layers.0.self_attn.q_proj.bias")


def test_no_safetensors_files(ckpt, akunu_mod):
    d = ckpt()
    (d / "model.safetensors").unlink()
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "no model.safetensors")


def test_no_tokenizer_json(ckpt, akunu_mod):
    d = ckpt()
    (d / "tokenizer.json").unlink()
    expect_error(akunu_mod, d, akunu_mod.TokenizerError, "tokenizer.json")


def test_directory_without_config(tmp_path, akunu_mod):
    (tmp_path / "x").mkdir()
    with pytest.raises(IsADirectoryError, match="config.json"):
        akunu_mod.Model(str(tmp_path / "x"))


# ------------------------------------------------------------------ config.json


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                                 "vocab_size", "model_type"])
def test_missing_config_key(ckpt, akunu_mod, key):
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.pop(key))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, key)


@pytest.mark.parametrize("key,value", [("hidden_size", "64"), ("num_attention_heads", 0), ("num_key_value_heads", 3),
                                       ("rms_norm_eps", -1), ("tie_word_embeddings", "yes"), ("head_dim", 15)])
def test_bad_config_value(ckpt, akunu_mod, key, value):
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.update({key: value}))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, key if key != "num_key_value_heads" else "num_key_value")


def test_config_not_json(ckpt, akunu_mod):
    d = ckpt()
    (d / "config.json").write_text("{not json")
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "config.json", "not valid json")


@pytest.mark.parametrize("model_type", ["gpt2", "falcon", "gemma3", "phi"])
def test_unsupported_model_type(ckpt, akunu_mod, model_type):
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.update(model_type=model_type))
    msg = expect_error(akunu_mod, d, akunu_mod.UnsupportedError, f"model_type '{model_type}'")
    for supported in ("llama", "mistral", "qwen2", "gemma3_text", "phi3"):  # lists what is supported
        assert supported in msg


def test_other_family_without_its_tensors(ckpt, akunu_mod):
    """A Llama checkpoint relabelled qwen2 lacks the Q/K/V biases: refused by name."""
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.update(model_type="qwen2"))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "missing tensor", "model.layers.0.self_attn.q_proj.bias")


def test_unsupported_rope_scaling(ckpt, akunu_mod):
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.update(rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                                                     "rope_theta": 10000.0}))
    expect_error(akunu_mod, d, akunu_mod.UnsupportedError, "yarn")


def test_config_disagrees_with_tensors(ckpt, akunu_mod):
    """config.json's sizes and the stored shapes must agree (the engine would read past a weight)."""
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.update(intermediate_size=96))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "model.layers.0.mlp", "shape")


def test_tokenizer_larger_than_embedding(ckpt, akunu_mod):
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.update(vocab_size=1000))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "tokenizer.json has 32000 tokens")


def test_biases_in_config_refused(ckpt, akunu_mod):
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.update(attention_bias=True))
    expect_error(akunu_mod, d, akunu_mod.UnsupportedError, "attention_bias")


# ------------------------------------------------------------------ MLX


@pytest.mark.parametrize("bits,group,cls,word", [(7, 32, "UnsupportedError", "7-bit"),
                                                 (4, 48, "UnsupportedError", "group_size 48"),
                                                 ("4", 32, "ModelFormatError", "bits")])
def test_mlx_bad_quantization_config(ckpt, akunu_mod, bits, group, cls, word):
    d = ckpt("mlx")
    edit_json(d / "config.json", lambda c: c.update(quantization={"bits": bits, "group_size": group},
                                                    quantization_config={"bits": bits, "group_size": group}))
    expect_error(akunu_mod, d, getattr(akunu_mod, cls), word)


def test_mlx_quantization_config_disagrees_with_tensors(ckpt, akunu_mod):
    """Claiming 8 bits for 4-bit data: the scales no longer match the unpacked width."""
    d = ckpt("mlx")
    edit_json(d / "config.json", lambda c: c.update(quantization={"bits": 8, "group_size": 32}))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "scales", "expected", names="model.safetensors")


def test_mlx_without_quantization_config(ckpt, akunu_mod):
    d = ckpt("mlx")
    edit_json(d / "config.json", lambda c: (c.pop("quantization"), c.pop("quantization_config")))
    expect_error(akunu_mod, d, akunu_mod.ModelFormatError, "quantized", "no 'quantization'")


def test_mlx_packed_weight_without_scales(ckpt, akunu_mod):
    d = ckpt("mlx")
    f = d / "model.safetensors"
    edit_header(f, lambda h: (h.pop("model.layers.0.mlp.up_proj.scales"), h.pop("model.layers.0.mlp.up_proj.biases")))
    expect_error(akunu_mod, d, akunu_mod.UnsupportedError, "model.layers.0.mlp.up_proj.weight", "U32", names=f)


def test_other_quantization_methods_refused(ckpt, akunu_mod):
    d = ckpt()
    edit_json(d / "config.json", lambda c: c.update(quantization_config={"quant_method": "gptq", "bits": 4}))
    expect_error(akunu_mod, d, akunu_mod.UnsupportedError, "gptq")


# ------------------------------------------------------------------ the engine's own checks


@pytest.fixture
def table(bases):
    """The HFCheckpoint Python builds for the valid single-file base (to corrupt by hand)."""
    from akunu.hf_checkpoint import read_checkpoint

    return read_checkpoint(bases["single"]).checkpoint


def _load_core(akunu_mod, table):
    return akunu_mod._core.Model(table)


def test_engine_checks_offsets_against_the_file(table, akunu_mod):
    tensors = table.tensors
    t = tensors[3]
    size = os.path.getsize(t.data.file)
    s = t.data
    s.offset = size - s.n_bytes // 2
    t.data = s
    tensors[3] = t
    table.tensors = tensors
    with pytest.raises(akunu_mod.ModelFormatError, match="past the end of the file"):
        _load_core(akunu_mod, table)


def test_engine_checks_sizes_and_dtypes(table, akunu_mod):
    tensors = table.tensors
    s = tensors[0].data
    s.n_bytes -= 4
    tensors[0].data = s
    table.tensors = tensors
    with pytest.raises(akunu_mod.ModelFormatError, match="needs"):
        _load_core(akunu_mod, table)
    s.n_bytes += 4
    s.dtype = "F8"
    tensors[0].data = s
    table.tensors = tensors
    with pytest.raises(akunu_mod.UnsupportedError, match="F8"):
        _load_core(akunu_mod, table)


@pytest.mark.parametrize("field,value,word", [("n_kv_heads", 3, "not a multiple"), ("rope_inv_freq", [1.0], "RoPE"),
                                              ("dim", 0, "dim"), ("architecture", "gpt2", "gpt2"),
                                              ("layer_sliding", [1, 0, 1], "sliding-layer flags"),
                                              ("rope_inv_freq_local", [1.0], "local RoPE"),
                                              ("attn_logit_softcap", -1.0, "softcaps"),
                                              ("attention_scale", float("nan"), "scales")])
def test_engine_checks_config(table, akunu_mod, field, value, word):
    cfg = table.config
    setattr(cfg, field, value)
    table.config = cfg
    with pytest.raises((akunu_mod.ModelFormatError, akunu_mod.UnsupportedError), match=word):
        _load_core(akunu_mod, table)


def test_engine_checks_eog_ids(table, akunu_mod):
    table.eog_ids = [2, 10 ** 6]
    with pytest.raises(akunu_mod.ModelFormatError, match="outside the vocabulary"):
        _load_core(akunu_mod, table)


def test_engine_checks_permutation_heads(table, akunu_mod):
    tensors = table.tensors
    q = next(t for t in tensors if t.canonical.endswith("attention.q"))
    q.permute_heads = 7
    table.tensors = [q if t.canonical == q.canonical else t for t in tensors]
    with pytest.raises(akunu_mod.ModelFormatError, match="heads"):
        _load_core(akunu_mod, table)


def test_engine_refuses_plus_one_on_a_matrix(table, akunu_mod):
    tensors = table.tensors
    q = next(t for t in tensors if t.canonical.endswith("attention.q"))
    q.add_one, q.permute_heads = True, 0
    table.tensors = [q if t.canonical == q.canonical else t for t in tensors]
    with pytest.raises(akunu_mod.ModelFormatError, match="must be a vector"):
        _load_core(akunu_mod, table)


def test_engine_reorders_vectors_too(bases, tmp_path, akunu_mod):
    """permute_heads on a vector (a future Q/K bias) reorders its elements like matrix rows: a
    table asking to reorder input_layernorm computes what a checkpoint with that norm stored
    reordered computes."""
    import numpy as np
    from akunu.hf_checkpoint import read_checkpoint

    table = read_checkpoint(bases["single"]).checkpoint
    tensors = table.tensors
    norm = next(t for t in tensors if t.canonical == "layers.0.attention_norm")
    norm.permute_heads = 2
    table.tensors = tensors
    reordered = _load_core(akunu_mod, table)

    d = tmp_path / "pre"
    shutil.copytree(bases["single"], d)
    header, payload = hc.read_raw(d / "model.safetensors")
    b, e = header["model.layers.0.input_layernorm.weight"]["data_offsets"]
    w = np.frombuffer(payload[b:e], dtype="<f4")
    payload = payload[:b] + gw.permute_qk(w, 2).astype("<f4").tobytes() + payload[e:]
    hc.write_raw(d / "model.safetensors", header, payload)
    ids = [1, 450, 301, 18919, 1709, 1589, 29892, 2]
    stored = akunu_mod.Model(str(d))
    np.testing.assert_array_equal(reordered.logits(ids), stored.logits(ids))
    assert not np.array_equal(stored.logits(ids), akunu_mod.Model(str(bases["single"])).logits(ids))


def test_misaligned_tensors_are_copied(bases, tmp_path, akunu_mod):
    """SafeTensors data that is not aligned to its element size (here every F32 tensor shifted by 2
    bytes) is copied into aligned memory instead of read in place: same logits."""
    import numpy as np

    d = tmp_path / "shifted"
    shutil.copytree(bases["single"], d)
    header, payload = hc.read_raw(d / "model.safetensors")
    for k, v in header.items():
        if k != "__metadata__":
            v["data_offsets"] = [o + 2 for o in v["data_offsets"]]
    hc.write_raw(d / "model.safetensors", header, b"\0\0" + payload)
    shifted, original = akunu_mod.Model(str(d)), akunu_mod.Model(str(bases["single"]))
    ids = [1, 450, 301, 18919, 1709, 1589, 29892, 2]
    np.testing.assert_array_equal(shifted.logits(ids), original.logits(ids))
    if shifted.backend == "cpu":
        # every matrix is held in the loader's memory (vectors were copied into F32 buffers at upload)
        assert original._engine.loader_owned_bytes < shifted._engine.loader_owned_bytes == sum(t[3] for t in shifted.tensors
                                                                                 if len(t[2]) == 2)
