"""generate / stream / chat / generate_tokens behaviour on SmolLM2-135M-Instruct Q4_1."""
from __future__ import annotations

import pytest

PROMPT = "Here is a short story about a robot who learns to paint:"


@pytest.fixture(scope="module")
def greedy_text(smollm2):
    out = smollm2.generate(PROMPT, max_tokens=32, temperature=0.0)
    assert isinstance(out, str) and len(out.strip()) > 10, repr(out)
    return out


def test_generate_greedy_deterministic(smollm2, greedy_text):
    assert smollm2.generate(PROMPT, max_tokens=32, temperature=0.0) == greedy_text


def test_stream_joins_to_generate(smollm2, greedy_text):
    pieces = list(smollm2.stream(PROMPT, max_tokens=32, temperature=0.0))
    assert all(isinstance(p, str) for p in pieces)
    assert len(pieces) > 1
    assert "".join(pieces) == greedy_text


def test_generate_tokens_decodes_to_generate(smollm2):
    ids = smollm2.tokenizer.encode(PROMPT)
    toks = smollm2.generate_tokens(ids, max_tokens=20)
    assert 0 < len(toks) <= 20 and all(isinstance(t, int) for t in toks)
    assert smollm2.generate(ids, max_tokens=20) == smollm2.tokenizer.decode(toks)


def test_stop_string_cuts_output(smollm2, greedy_text):
    k = len(greedy_text) // 2
    stop = greedy_text[k:k + 4]
    assert stop.strip(), "pick a non-blank stop string"
    expected = greedy_text[:greedy_text.index(stop)]
    out = smollm2.generate(PROMPT, max_tokens=32, temperature=0.0, stop=[stop])
    assert out == expected
    assert stop not in out
    streamed = "".join(smollm2.stream(PROMPT, max_tokens=32, temperature=0.0, stop=[stop]))
    assert streamed == expected


def test_max_tokens_zero(smollm2):
    assert smollm2.generate(PROMPT, max_tokens=0) == ""
    assert list(smollm2.stream(PROMPT, max_tokens=0)) in ([], [""])
    assert smollm2.generate_tokens(smollm2.tokenizer.encode(PROMPT), max_tokens=0) == []


def test_seeded_sampling_reproducible(smollm2):
    kw = dict(max_tokens=24, temperature=1.0, top_p=0.95, top_k=0)
    a = smollm2.generate(PROMPT, seed=1234, **kw)
    b = smollm2.generate(PROMPT, seed=1234, **kw)
    assert a == b
    outs = {smollm2.generate(PROMPT, seed=s, **kw) for s in (1, 2, 3, 4)}
    assert len(outs) >= 2, outs


def test_top_k_1_equals_greedy(smollm2, greedy_text):
    for seed in (7, 8):
        assert smollm2.generate(PROMPT, max_tokens=32, temperature=0.8, top_k=1, seed=seed) == greedy_text


def test_stats(smollm2):
    ids = smollm2.tokenizer.encode(PROMPT)
    toks = smollm2.generate_tokens(ids, max_tokens=12)
    s = smollm2.stats
    assert s.prompt_tokens == len(ids)
    assert s.generated_tokens == len(toks)
    assert 0 < s.generated_tokens <= 12
    assert s.prefill_ms > 0 and s.decode_ms > 0
    assert s.prefill_tokens_per_sec > 0 and s.decode_tokens_per_sec > 0
    # prefill t/s counts the tokens prefilled, not those reused from the cache (tests/test_prompt_reuse.py)
    assert 0 <= s.cached_tokens < s.prompt_tokens
    prefilled = s.prompt_tokens - s.cached_tokens
    assert s.prefill_tokens_per_sec == pytest.approx(prefilled / (s.prefill_ms / 1e3), rel=0.1)
    # decode rate: either all generated tokens or all but the one produced by prefill
    rates = [n / (s.decode_ms / 1e3) for n in (s.generated_tokens, s.generated_tokens - 1) if n > 0]
    assert any(s.decode_tokens_per_sec == pytest.approx(r, rel=0.1) for r in rates), (s.decode_tokens_per_sec, rates)
    smollm2.generate(PROMPT, max_tokens=5)
    assert smollm2.stats.generated_tokens <= 5


def _render_template(smollm2_path, messages):
    import jinja2
    from gguf import GGUFReader

    tmpl = GGUFReader(str(smollm2_path)).fields["tokenizer.chat_template"].contents()
    return jinja2.Environment().from_string(tmpl).render(messages=messages, add_generation_prompt=True,
                                                          bos_token="<|im_start|>", eos_token="<|im_end|>")


def test_chat_capital_of_france(smollm2):
    out = smollm2.chat([{"role": "user", "content": "What is the capital of France?"}], max_tokens=40)
    assert "Paris" in out, out
    assert "<|im_start|>" not in out and "<|im_end|>" not in out


def test_chat_uses_gguf_template(smollm2, smollm2_path, smollm2_tokenizer_ref):
    """chat(messages) == greedy continuation of the GGUF chat template rendered independently
    (jinja2) and tokenized by the transformers tokenizer."""
    messages = [{"role": "user", "content": "Name two colors."}]
    text = _render_template(smollm2_path, messages)
    assert text.endswith("<|im_start|>assistant\n"), text
    ids = smollm2_tokenizer_ref(text, add_special_tokens=False)["input_ids"]
    expected = smollm2.tokenizer.decode(smollm2.generate_tokens(ids, max_tokens=24))
    assert smollm2.chat(messages, max_tokens=24) == expected
