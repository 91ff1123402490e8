"""Hugging Face SafeTensors checkpoints (F32 / F16 / BF16, single file and sharded) against
transformers, and the tokenizer.json tokenizer against the GGUF one.

Each checkpoint is written by transformers' own save_pretrained(safe_serialization=True) and the
reference is transformers loading that directory back in float32 (so F16/BF16 are compared on the
stored, rounded weights). Criterion as in test_reference_logits.py: argmax agreement >= 99% and
mean KL <= 1e-3 over >= 256 tokens of varied text.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import gguf_writer as gw
import hf_checkpoints as hc
import references as rf
import tiny_models as tm


CASES = {
    "f32_untied": (tm.family_spec("llama", "st_f32_untied", seed=11), "F32", None),
    "f16_tied_llama3": (tm.family_spec("llama", "st_f16_tied_llama3", tied=True, llama3_rope=True, seed=12), "F16",
                        None),
    "bf16_untied": (tm.family_spec("llama", "st_bf16_untied", hidden=64, head_dim=16, n_layers=3, ffn=192, seed=13),
                    "BF16", None),
    "f32_sharded": (tm.family_spec("llama", "st_f32_sharded", n_kv_heads=1, seed=14), "F32", "3MB"),
}


@pytest.fixture(scope="module")
def tokens(varied_ids):
    return varied_ids


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tokenizer_dir, tokens):
    """name -> (dir, reference logits)."""
    return hc.checkpoint_cache(hc.save_checkpoint, CASES, tmp_path_factory, tokenizer_dir, tokens)


@pytest.mark.parametrize("name", list(CASES))
def test_safetensors_logits_match_transformers(name, checkpoint, tokens, akunu_mod):
    spec, dtype, shard = CASES[name]
    path, ref = checkpoint(name)
    shards = sorted(p.name for p in path.glob("*.safetensors"))
    if shard:
        assert len(shards) >= 3 and (path / "model.safetensors.index.json").exists(), shards
    else:
        assert shards == ["model.safetensors"]
    m = akunu_mod.Model(str(path))
    assert m.format == "safetensors"
    cfg = m.config
    assert (cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["ffn_dim"],
            cfg["vocab_size"], cfg["tie_embeddings"]) == (spec.hidden, spec.n_layers, spec.n_heads, spec.n_kv_heads,
                                                          spec.head_dim, spec.ffn, 32000, spec.tied)
    assert cfg["norm_eps"] == pytest.approx(spec.norm_eps, rel=1e-5)
    matrices = {t[1] for t in m.tensors if len(t[2]) == 2}
    assert matrices == {dtype}, matrices
    if m.backend == "cpu":  # zero copy: only the reordered Q/K rows live in the loader's memory
        qk = sum(t[3] for t in m.tensors if t[0].endswith(("q_proj.weight", "k_proj.weight")))
        assert m._engine.loader_owned_bytes == qk, (m._engine.loader_owned_bytes, qk)
    got = m.logits(tokens)
    assert got.shape == ref.shape and np.isfinite(got).all()
    c = rf.compare_logits(ref, got)
    assert rf.meets_bar(c), f"{name}: {c}"
    assert len(set(ref.argmax(-1).tolist())) >= 30, "reference argmax is degenerate"


def test_criterion_catches_unpermuted_qk(checkpoint, tokens):
    """The Q/K row reorder matters: transformers with Q/K permuted into the interleaved layout (what
    akunu would compute if it skipped, or doubled, the reorder) fails the criterion."""
    import torch
    from transformers import AutoModelForCausalLM

    path, ref = checkpoint("f32_untied")
    spec = CASES["f32_untied"][0]
    broken = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    with torch.no_grad():
        for layer in broken.model.layers:
            a = layer.self_attn
            a.q_proj.weight.copy_(torch.from_numpy(gw.permute_qk(a.q_proj.weight.numpy(), spec.n_heads)))
            a.k_proj.weight.copy_(torch.from_numpy(gw.permute_qk(a.k_proj.weight.numpy(), spec.n_kv_heads)))
    c = rf.compare_logits(ref, rf.hf_logits(broken, tokens))
    assert not rf.meets_bar(c), c


# ------------------------------------------------------------------ same model as GGUF


@pytest.fixture(scope="module")
def twins(checkpoint, tmp_path_factory, akunu_mod):
    """The f32_untied checkpoint loaded from SafeTensors and, written by the tests' llama.cpp-style
    GGUF writer from the same weights, from GGUF."""
    import torch
    from transformers import AutoModelForCausalLM

    path, _ = checkpoint("f32_untied")
    spec = CASES["f32_untied"][0]
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    gguf_path = gw.write_gguf(tmp_path_factory.mktemp("twin") / "twin.gguf", spec, gw.gguf_tensors_from_hf(model, spec))
    return akunu_mod.Model(str(path)), akunu_mod.Model(str(gguf_path))


def test_safetensors_and_gguf_compute_the_same_logits(twins, tokens):
    st, gg = twins
    np.testing.assert_allclose(st.logits(tokens[:64]), gg.logits(tokens[:64]), atol=1e-4, rtol=0)


def test_generate_stream_chat_match_gguf(twins, akunu_mod):
    st, gg = twins
    assert isinstance(st.tokenizer, akunu_mod.HFTokenizer) and isinstance(gg.tokenizer, akunu_mod.Tokenizer)
    prompt = "The lighthouse keeper climbed the stairs and"
    assert st.tokenizer.encode(prompt, add_special=True) == gg.tokenizer.encode(prompt, add_special=True)
    text = st.generate(prompt, max_tokens=24)
    assert text and text == gg.generate(prompt, max_tokens=24)
    pieces_st = list(st.stream(prompt, max_tokens=24))
    assert pieces_st == list(gg.stream(prompt, max_tokens=24)) and "".join(pieces_st) == text
    assert st.generate_tokens(prompt, max_tokens=12, temperature=0.8, seed=3) == \
        gg.generate_tokens(prompt, max_tokens=12, temperature=0.8, seed=3)

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a color."}]
    formatted = st.format_chat(messages)
    assert formatted == "<s><<SYS>>\nBe brief.\n<</SYS>>\n\n[INST] Name a color. [/INST]"
    ids = st.tokenizer.encode(formatted, add_special=False, parse_special=True)
    assert ids[0] == st.tokenizer.bos_id == 1 and ids.count(1) == 1  # "<s>" parsed as the BOS token
    assert st.chat(messages, max_tokens=16) == gg.generate(ids, max_tokens=16)
    assert "".join(st.chat(messages, max_tokens=16, stream=True)) == st.chat(messages, max_tokens=16)


def test_chat_template_matches_transformers(checkpoint, akunu_mod):
    from transformers import AutoTokenizer

    path, _ = checkpoint("f16_tied_llama3")
    m = akunu_mod.Model(str(path))
    assert m.chat_template == hc.LLAMA2_CHAT_TEMPLATE
    messages = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "Bye"}]
    expect = AutoTokenizer.from_pretrained(str(path)).apply_chat_template(messages, tokenize=False,
                                                                          add_generation_prompt=True)
    assert m.format_chat(messages) == expect


def test_generation_config_eos_stops_generation(checkpoint, tmp_path, akunu_mod):
    """generation_config.json's eos_token_id ends a generation (the engine gets the ids at load)."""
    path, _ = checkpoint("f32_untied")
    m = akunu_mod.Model(str(path))
    prompt = "Quarterly figures: revenue rose"
    free = m.generate_tokens(prompt, max_tokens=12)
    k = next(i for i in range(3, len(free)) if free[i] not in free[:i] and free[i] > 2)
    copy = tmp_path / "eos"
    shutil.copytree(path, copy)
    gen_cfg = json.loads((copy / "generation_config.json").read_text())
    gen_cfg["eos_token_id"] = [2, free[k]]
    (copy / "generation_config.json").write_text(json.dumps(gen_cfg))
    m2 = akunu_mod.Model(str(copy))
    assert m2.tokenizer.is_eog(free[k]) and m2.tokenizer.is_eog(2)
    assert m2.generate_tokens(prompt, max_tokens=12) == free[:k]
    assert m2.finish_reason == "stop"
    assert m2.generate_tokens(prompt, max_tokens=12, temperature=1e-4, seed=0) == free[:k]  # sampled path


# ------------------------------------------------------------------ tokenizer.json vs GGUF tokenizer


@pytest.mark.parametrize("vocab", ["ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf"])
def test_hf_tokenizer_matches_gguf_tokenizer(vocab, tmp_path, akunu_mod):
    """HFTokenizer (tokenizer.json through `tokenizers`) answers every call the Python Model makes
    exactly like akunu's own GGUF tokenizer on the same vocabulary (SentencePiece-style and
    byte-level BPE)."""
    from akunu.hf_tokenizer import HFTokenizer

    hc.export_tokenizer(tmp_path, rf.reference_tokenizer(gw.TOKENIZER_DIR, vocab), chat_template=None)
    hf = HFTokenizer.from_dir(tmp_path)
    assert HFTokenizer.from_file(tmp_path / "tokenizer.json").encode(rf.VARIED_TEXT) == hf.encode(rf.VARIED_TEXT)
    gg = akunu_mod.Tokenizer.from_file(str(gw.TOKENIZER_DIR / vocab))
    assert hf.vocab_size == gg.vocab_size and len(hf) == len(gg)
    assert (hf.bos_id, hf.eos_id) == (gg.bos_id, gg.eos_id), ((hf.bos_id, hf.eos_id), (gg.bos_id, gg.eos_id))
    text = rf.VARIED_TEXT
    for add_special in (False, True):
        for parse_special in (False, True):
            assert hf.encode(text, add_special, parse_special) == gg.encode(text, add_special, parse_special), \
                (vocab, add_special, parse_special)
    ids = gg.encode(text, add_special=True, parse_special=True)
    assert hf.decode(ids) == gg.decode(ids)
    assert hf.decode(ids, skip_special=False) == gg.decode(ids, skip_special=False)
    sample = sorted(set(ids) | set(range(0, hf.vocab_size, 97)))
    for i in sample:
        assert hf.token_to_piece(i) == gg.token_to_piece(i), (i, hf.token_text(i))
        assert hf.token_text(i) == gg.token_text(i)
        assert hf.is_control(i) == gg.is_control(i), (i, hf.token_text(i))
        assert hf.is_eog(i) == gg.is_eog(i), (i, hf.token_text(i))
    # byte-by-byte streaming: no split characters, concatenation == decode
    pieces = hf.decode_stream(ids)
    assert len(pieces) == len(ids) and "".join(pieces) == hf.decode(ids)
    assert all("\ufffd" not in p for p in pieces)
    with pytest.raises(ValueError):
        hf.decode([hf.vocab_size])
    with pytest.raises(ValueError):
        hf.token_to_piece(-1)


# ------------------------------------------------------------------ config spellings


def test_older_rope_spelling_reads_the_same(checkpoint, tmp_path, tokens, akunu_mod):
    """transformers < 5 wrote rope_theta + rope_scaling ({"rope_type"| "type": ...}) instead of
    rope_parameters: the same model either way."""
    path, _ = checkpoint("f16_tied_llama3")

    def old_style(cfg):
        rope = cfg.pop("rope_parameters")
        cfg["rope_theta"] = rope.pop("rope_theta")
        rope["type"] = rope.pop("rope_type")
        cfg["rope_scaling"] = rope
    old = hc.edited_copy(path, tmp_path / "old", old_style)
    np.testing.assert_array_equal(akunu_mod.Model(str(old)).logits(tokens[:48]),
                                  akunu_mod.Model(str(path)).logits(tokens[:48]))


def test_linear_rope_scaling_matches_transformers(checkpoint, tmp_path, tokens, akunu_mod):
    import torch
    from transformers import AutoModelForCausalLM

    path, _ = checkpoint("bf16_untied")
    lin = hc.edited_copy(path, tmp_path / "linear", lambda c: c.update(
        rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}))
    ref = rf.hf_logits(AutoModelForCausalLM.from_pretrained(str(lin), dtype=torch.float32).eval(), tokens)
    c = rf.compare_logits(ref, akunu_mod.Model(str(lin)).logits(tokens))
    assert rf.meets_bar(c), c
    plain = akunu_mod.Model(str(path)).logits(tokens)  # the scaling changes the model
    assert not np.allclose(plain, ref, atol=1e-2)


def test_mistral_sliding_window(checkpoint, tmp_path, akunu_mod):
    """model_type mistral runs Llama's graph with a window on every layer (the context is not
    capped at it); inside the window it is the same model as full attention. Mistral against
    transformers past the window: tests/test_safetensors_architectures.py."""
    path, _ = checkpoint("f32_untied")
    mis = hc.edited_copy(path, tmp_path / "mistral", lambda c: c.update(model_type="mistral", sliding_window=256))
    m = akunu_mod.Model(str(mis))
    assert m.config["trained_context_length"] == 2048 and m.config["sliding_window"] == 256
    assert m.config["sliding_layers"] == [True, True]
    ids = m.tokenizer.encode("Hello there", add_special=True)
    np.testing.assert_array_equal(m.logits(ids), akunu_mod.Model(str(path)).logits(ids))
    assert akunu_mod.Model(str(mis), context_length=512).context_length == 512
    # model_type llama has no window: transformers ignores the key, and so does akunu
    lla = hc.edited_copy(path, tmp_path / "llama", lambda c: c.update(sliding_window=16))
    assert akunu_mod.Model(str(lla)).config["sliding_window"] == 0


def test_embedding_padded_past_the_tokenizer(tokenizer_dir, tmp_path, akunu_mod):
    """Checkpoints often pad the embedding past tokenizer.json's last id: the model loads, the
    padded ids are valid and decode to nothing (a stream never raises on them)."""
    spec = tm.family_spec("llama", "st_padded", hidden=64, head_dim=16, n_layers=1, ffn=128, seed=15)
    path, ref = hc.save_checkpoint(spec, tmp_path / "padded", tokenizer_dir, vocab=32064)
    m = akunu_mod.Model(str(path))
    tok = m.tokenizer
    assert m.config["vocab_size"] == tok.vocab_size == 32064
    assert tok.token_to_piece(32050) == b"" and not tok.is_control(32050) and tok.token_text(32050) == ""
    assert tok.decode([450, 32050, 301]) == tok.decode([450, 301])
    ids = tok.encode("The lighthouse", add_special=True)
    c = rf.compare_logits(rf.hf_logits(ref, ids), m.logits(ids))
    assert c["agree"] == 1.0 and c["kl_mean"] <= rf.MAX_KL, c
    with pytest.raises(ValueError):
        tok.token_to_piece(32064)
