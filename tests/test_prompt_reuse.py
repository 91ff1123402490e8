"""Prompt reuse (docs/adr/0018-prompt-reuse.md): a session keeps the cached prefix its prompt shares
with the KV cache, or with a conversation saved in the prompt cache, and prefills only the rest.

The reference is always a model that prefills every prompt whole (reset before each request): each
reply, greedy or sampled, must be identical to its reply, and logits after a rollback equal its
logits. On the CPU they are bit for bit: a position's K/V rows come out the same from a decode step
as from a prefill pass (test_decode_written_rows_equal_prefill_rows*, SmolLM2 and every tiny model),
so a cache built partly by decoding serves the next turn exactly as a fresh prefill would.
"""
from __future__ import annotations

import numpy as np
import pytest

import gguf_kquants as kq
import gguf_writer as gw
import prompt_reuse_checks as pr
import tiny_models as tm
from test_grammar import PERSON
from test_kv_cache_window import CONTEXT, RING_EXTRA_ROWS, WINDOWED, _long_ids


@pytest.fixture(scope="module")
def served(akunu_mod, smollm2_path):
    """SmolLM2 reusing its cache (default prompt cache)."""
    return akunu_mod.Model(str(smollm2_path))


@pytest.fixture(scope="module")
def fresh(akunu_mod, smollm2_path):
    """SmolLM2 without a prompt cache, reset before each reference request."""
    return akunu_mod.Model(str(smollm2_path), prompt_cache_bytes=0)


@pytest.fixture(scope="module")
def q8_pair(akunu_mod, smollm2_path):
    return (akunu_mod.Model(str(smollm2_path), kv_cache_dtype="q8_0"),
            akunu_mod.Model(str(smollm2_path), kv_cache_dtype="q8_0", prompt_cache_bytes=0))


# --- the cache's record of its tokens --------------------------------------------------------

def test_cache_records_every_token_it_ran(served):
    """prefill, decode_step, chain_decode (each chain feeds its input and all its outputs but the
    last), profile_decode_step and logits() leave the cache holding exactly the tokens they ran."""
    e = served._engine
    ids = served.tokenizer.encode("The quick brown fox jumps over")
    served.reset()
    first = e.prefill(ids)
    assert list(e.cached_tokens) == ids and e.position == len(ids)
    chain = list(e.chain_decode(first, 20))
    assert list(e.cached_tokens) == ids + [first] + chain[:-1]
    nxt = e.decode_step(chain[-1])
    e.profile_decode_step(nxt)
    assert list(e.cached_tokens) == ids + [first] + chain + [nxt]
    assert e.position == len(e.cached_tokens)
    served.logits(ids[:5])
    assert list(e.cached_tokens) == ids[:5]
    e.reset()
    assert list(e.cached_tokens) == [] and e.position == 0


def test_generation_records_its_output(served):
    """A session's cache holds the prompt, then the output fed back: the chain runs in chunks, so it
    may hold tokens past the end of the reply (after an end-of-generation token)."""
    ids = served.tokenizer.encode("Once upon a time")
    for settings in ({}, pr.SEEDED):
        out = served.generate_tokens(ids, max_tokens=30, **settings)
        fed = pr.output_after(served, ids)
        n = min(len(out), len(fed))
        assert fed[:n] == out[:n] and len(fed) >= len(out) - 1


# --- chats against a fresh model ---------------------------------------------------------------

@pytest.mark.parametrize("settings", [{}, pr.SEEDED], ids=["greedy", "seeded"])
def test_chat_turns_equal_a_fresh_model(served, fresh, settings):
    """10 turns, each with the previous replies: identical to a fresh model's replies, and turn N
    prefills only what turn N - 1 did not leave in the cache."""
    turns = pr.run_chat(served, fresh, pr.QUESTIONS, **settings)
    assert turns[0][1] == 0
    for prompt_tokens, cached in turns[1:]:
        assert prompt_tokens - cached < 60, turns  # the new question and the template around it


def test_cached_tokens_count_the_common_prefix(served):
    """cached_tokens is the prefix the prompt shares with the cache, short of the prompt's last token."""
    tok = served.tokenizer
    a = tok.encode("The history of the printing press begins in the fifteenth century with")
    b = a[:8] + tok.encode(" a different story altogether", add_special=False)
    served.reset()
    served.generate_tokens(a, max_tokens=6)
    assert served.stats.cached_tokens == 0
    cases = [b,                              # shares 8 tokens
             b,                              # the same prompt again: all but its last token
             b[:5],                          # a prefix of the cache: all but its last token
             b[:1],                          # one token: nothing to reuse
             b + tok.encode(" and more", add_special=False)]  # extends the prompt and part of the output
    for prompt in cases:
        cached = list(served._engine.cached_tokens)
        served.generate_tokens(prompt, max_tokens=6)
        assert served.stats.cached_tokens == pr.reusable(cached, prompt), (prompt, cached)
        assert served.stats.prompt_tokens == len(prompt)
    assert pr.reusable(a, b) == 8


def test_stats_of_a_reused_prompt(served):
    ids = served.tokenizer.encode("Tell me about the moon and the tides it causes in the oceans")
    served.generate_tokens(ids, max_tokens=4)
    served.generate_tokens(ids, max_tokens=4)
    s = served.stats
    assert s.cached_tokens == len(ids) - 1 and s.prompt_tokens == len(ids)
    assert s.prefill_tokens_per_sec == pytest.approx(1 / (s.prefill_ms / 1e3), rel=1e-6)
    assert "cached_tokens=" in repr(s)


# --- numerics ----------------------------------------------------------------------------------

def test_decode_written_rows_equal_prefill_rows(served, fresh, q8_pair):
    """The CPU writes a position's K/V rows bit for bit alike from a decode step and from a prefill
    pass (the same row kernels; the int16 activations' integer dot products do not depend on the
    rows around them): a cache built by 40 decode steps, then one more token, gives exactly the
    logits of a fresh prefill of the whole sequence (F16 and Q8_0 caches, greedy and sampled decode)."""
    for model, reference in ((served, fresh), q8_pair):
        ids = model.tokenizer.encode("In a distant galaxy, a small robot")
        for settings in ({}, pr.SEEDED):
            model.reset()
            model.generate_tokens(ids, max_tokens=40, **settings)
            cached = list(model._engine.cached_tokens)
            assert len(cached) > len(ids) + 30
            prompt = cached + [ids[1]]
            got = pr.rollback_logits(model, prompt)
            assert model.stats.cached_tokens == len(cached)
            want = np.asarray(reference.logits(prompt)[-1])
            assert np.array_equal(got, want), f"max difference {np.abs(got - want).max()}"


# Every tiny model: the Llama dtypes, the other architectures, the K-quants and mixed files.
TINY_MODELS = {**{n: ("spec", s) for n, s in tm.LLAMA_SPECS.items()},
               **{n: ("spec", s) for n, s in tm.ARCH_SPECS.items()},
               **{n: ("kquant", c) for n, c in kq.CASES.items()}}


@pytest.mark.parametrize("name", list(TINY_MODELS))
def test_decode_written_rows_equal_prefill_rows_every_model(name, akunu_mod, gguf_dir, varied_ids):
    """As above for every tiny model, with each KV cache dtype its head_dim allows: the logits of a
    token run after 40 decode-written positions (greedy, then sampled) are a fresh prefill's, bit
    for bit."""
    kind, spec = TINY_MODELS[name]
    path = gw.build_gguf(spec, gguf_dir)[0] if kind == "spec" else kq.build_case_gguf(spec, gguf_dir)[0]
    dtypes = ["f16"] + (["q8_0"] if akunu_mod.Model(str(path)).config["head_dim"] % 32 == 0 else [])
    for kv_cache_dtype in dtypes:
        model, reference = (akunu_mod.Model(str(path), backend="cpu", kv_cache_dtype=kv_cache_dtype,
                                            prompt_cache_bytes=size) for size in (None, 0))
        for settings in ({}, pr.SEEDED):
            model.reset()
            model.generate_tokens(varied_ids[:60], max_tokens=40, **settings)
            prompt = list(model._engine.cached_tokens) + [varied_ids[61]]
            got = pr.rollback_logits(model, prompt)
            assert model.stats.cached_tokens == len(prompt) - 1
            want = np.asarray(reference.logits(prompt)[-1])
            assert np.array_equal(got, want), f"{kv_cache_dtype}, {settings}: max difference {np.abs(got - want).max()}"


def test_logits_after_rollback_equal_fresh(served, fresh):
    """Rolled back into the prompt, into the decoded output, and to one token: the next logits are a
    fresh model's (within 1e-4; on the CPU in fact exactly)."""
    ids = pr.chat_ids(served, [{"role": "user", "content": "Write a long story about the sea."}])

    def build(model):
        model.reset()
        model.generate_tokens(ids, max_tokens=24)

    new = served.tokenizer.encode(" Actually, never mind.", add_special=False)
    worst = pr.assert_rollback_logits(served, fresh, build, new, [1, len(ids) // 2, len(ids), len(ids) + 10], 1e-4)
    assert worst == 0.0


# --- grammar-constrained turns -----------------------------------------------------------------

def test_constrained_turn_then_plain_turn(served, fresh, akunu_mod):
    """A JSON turn (the constrained session's feed() records its tokens too), then a plain turn that
    reuses it, then another JSON turn: all identical to a fresh model's."""
    grammar = akunu_mod.Grammar.json_schema(PERSON)
    served.reset()
    messages = []
    turns = [("Describe a fictional person as JSON with name, age and hobbies.", dict(grammar=grammar)),
             ("Write one sentence about that person.", {}),
             ("Now another person, as JSON.", dict(grammar=grammar, **pr.SEEDED))]
    for i, (question, settings) in enumerate(turns):
        messages.append({"role": "user", "content": question})
        ids = pr.chat_ids(served, messages)
        cached_before = list(served._engine.cached_tokens)
        reply = served.chat(messages, max_tokens=80, **settings)
        assert served.stats.cached_tokens == pr.reusable(cached_before, ids)
        if i > 0:
            assert served.stats.cached_tokens > len(ids) // 2
        pr.assert_same_reply(served, fresh, messages, reply,
                             pr.fresh_chat(fresh, messages, max_tokens=80, **settings), ids)
        messages.append({"role": "assistant", "content": reply})


# --- the prompt cache ----------------------------------------------------------------------------

def test_interleaved_conversations_from_the_prompt_cache(served, fresh):
    pr.run_interleaved(served, fresh)
    pr.run_interleaved(served, fresh, **pr.SEEDED)


def test_prompt_cache_off(akunu_mod, smollm2_path):
    """prompt_cache_bytes=0: nothing is saved; another conversation reuses only the shared start."""
    model = akunu_mod.Model(str(smollm2_path), prompt_cache_bytes=0)
    assert model.prompt_cache_bytes == 0
    a = [{"role": "user", "content": pr.CONVERSATION_A[0]}]
    b = [{"role": "user", "content": pr.CONVERSATION_B[0]}]
    reply = model.chat(a, max_tokens=48)
    model.chat(b, max_tokens=48)
    a += [{"role": "assistant", "content": reply}, {"role": "user", "content": pr.CONVERSATION_A[1]}]
    model.chat(a, max_tokens=8)
    shared = pr.common_prefix(pr.chat_ids(model, a), pr.chat_ids(model, b))
    assert model.stats.cached_tokens == shared  # the system prompt and the user turn's opening
    assert model._engine.prompt_cache_entries == 0 and model._engine.prompt_cache_used_bytes == 0


def test_prompt_cache_is_bounded_and_least_recent_goes_first(akunu_mod, smollm2_path):
    """A budget of two conversations of ~100 positions: a third evicts the oldest, the newer ones are
    still served."""
    per_position = 30 * 2 * 3 * 64 * 2 + 4  # SmolLM2: 30 layers, K and V, 3 KV heads of 64 f16; the token id
    model = akunu_mod.Model(str(smollm2_path), prompt_cache_bytes=260 * per_position)
    default = akunu_mod.Model(str(smollm2_path))
    assert default.prompt_cache_bytes == default.kv_cache_bytes + 4 * default.context_length
    conversations = [[{"role": "user", "content": f"Write a long story about {topic}."}]
                     for topic in ("the sea", "the mountains", "the desert", "the forest")]
    for messages in conversations:
        reply = model.chat(messages, max_tokens=64)
        assert model.stats.generated_tokens == 64, "each conversation must fill ~100 positions"
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "Go on."}]
        assert model._engine.prompt_cache_used_bytes <= model.prompt_cache_bytes
    assert model._engine.prompt_cache_entries == 2  # the second and the third (the fourth is live)
    model.chat(conversations[0], max_tokens=4)
    assert model.stats.cached_tokens < 40  # evicted: only the system prompt is shared
    model.chat(conversations[2], max_tokens=4)
    assert model.stats.cached_tokens > 90  # still saved


def test_reset_empties_the_cache_and_the_prompt_cache(served):
    served.reset()
    a = [{"role": "user", "content": pr.CONVERSATION_A[0]}]
    served.chat(a, max_tokens=48)
    served.chat([{"role": "user", "content": pr.CONVERSATION_B[0]}], max_tokens=8)
    assert served._engine.prompt_cache_entries == 1 and served._engine.position > 0
    served.reset()
    assert served._engine.prompt_cache_entries == 0 and served._engine.prompt_cache_used_bytes == 0
    assert served._engine.position == 0 and list(served._engine.cached_tokens) == []
    served.chat(a, max_tokens=4)
    assert served.stats.cached_tokens == 0


def test_reset_supersedes_a_running_stream(served):
    stream = served.stream("Count from one to fifty:", max_tokens=40)
    next(stream)
    served.reset()
    with pytest.raises(RuntimeError, match="superseded"):
        list(stream)


@pytest.mark.parametrize("bad", [-1, 1.5, "1GB", True])
def test_prompt_cache_bytes_is_checked(akunu_mod, smollm2_path, bad):
    with pytest.raises(ValueError, match="prompt_cache_bytes"):
        akunu_mod.Model(str(smollm2_path), prompt_cache_bytes=bad)


# --- the Q8_0 KV cache ---------------------------------------------------------------------------

def test_q8_0_cache_chat_and_prompt_cache(q8_pair):
    served, fresh = q8_pair
    pr.run_chat(served, fresh, pr.QUESTIONS[:4])
    pr.run_interleaved(served, fresh)


# --- sliding-window rings ------------------------------------------------------------------------

# mistral: every layer a ring (window 48); gemma2: every other layer (window 32), with a Q8_0 cache too.
RING_MODELS = {"mistral": ("mistral", "f16"), "gemma2": ("gemma2", "f16"), "gemma2_q8": ("gemma2_q8_cache", "q8_0")}


@pytest.mark.parametrize("name", list(RING_MODELS))
def test_sliding_window_rollback_within_and_past_the_ring(name, akunu_mod, gguf_dir, varied_ids):
    """1300 cached positions wrap a ring of window + 512 rows. Position p reads keys from
    p - window + 1 on, and the ring holds positions from cached - ring on: a rollback to p is kept
    exactly while p - window + 1 >= cached - ring, else the session starts from an empty cache.
    Either way the output is a fresh model's; and a prompt continuing the whole 1300 positions
    later is served from the prompt cache (the wrapped ring saved and restored)."""
    spec, kv_cache_dtype = RING_MODELS[name]
    path, _ = gw.build_gguf(WINDOWED[spec], gguf_dir)
    served, fresh = (akunu_mod.Model(str(path), backend="cpu", context_length=CONTEXT, kv_cache_dtype=kv_cache_dtype,
                                     prompt_cache_bytes=size) for size in (None, 0))
    window = served.config["sliding_window"]
    ring = window + RING_EXTRA_ROWS
    ids = _long_ids(varied_ids, 1300)

    def fill():
        served.reset()
        served.generate_tokens(ids, max_tokens=8)
        return list(served._engine.cached_tokens)

    def check(prompt, expect_cached, prepare):
        """The prompt's last logits (exactly a fresh model's), then its output, each from the cache
        prepare() leaves."""
        prepare()
        logits = pr.rollback_logits(served, prompt)
        assert served.stats.cached_tokens == expect_cached, (len(prompt), served.stats)
        want = np.asarray(fresh.logits(prompt)[-1])
        assert np.array_equal(logits, want), f"max difference {np.abs(logits - want).max()}"
        prepare()
        got = served.generate_tokens(prompt, max_tokens=12)
        assert served.stats.cached_tokens == expect_cached
        fresh.reset()
        want = fresh.generate_tokens(prompt, max_tokens=12)
        assert got == want, pr.divergence(fresh, prompt, got, want)

    cached = fill()
    n = len(cached)
    oldest_kept = n - ring  # positions before it are overwritten in the ring
    boundary = oldest_kept + window - 1  # the smallest p with p - window + 1 >= oldest_kept
    for p, expect in [(n - 1, n - 1), (boundary + 1, boundary + 1), (boundary, boundary), (boundary - 1, 0),
                      (700, 0)]:
        other = next(t for t in varied_ids if t != cached[p])
        check(cached[:p] + [other] + varied_ids[:6], expect, fill)

    # The 1300-position conversation set aside by an unrelated prompt, then continued.
    def set_aside():
        fill()
        served.generate_tokens(varied_ids[40:80], max_tokens=4)
        assert served.stats.cached_tokens == 0 and served._engine.prompt_cache_entries == 1

    check(cached + varied_ids[:5], n, set_aside)


def test_window_rollback_condition_ignores_full_layers(akunu_mod, gguf_dir, varied_ids):
    """A context shorter than window + 512 keeps every layer whole (no ring): any rollback is kept."""
    path, _ = gw.build_gguf(WINDOWED["mistral"], gguf_dir)
    served = akunu_mod.Model(str(path), backend="cpu", context_length=256)
    fresh = akunu_mod.Model(str(path), backend="cpu", context_length=256, prompt_cache_bytes=0)
    ids = _long_ids(varied_ids, 200)
    served.generate_tokens(ids, max_tokens=8)
    prompt = ids[:5] + [t for t in varied_ids if t != ids[5]][:3]
    got = served.generate_tokens(prompt, max_tokens=8)
    assert served.stats.cached_tokens == 5
    fresh.reset()
    assert got == fresh.generate_tokens(prompt, max_tokens=8)


def test_tiny_model_chat_of_token_prompts(akunu_mod, tiny_gguf, varied_ids):
    """Token-level turns on a random-weight model (prompt = all earlier turns and their outputs):
    each turn's output is a fresh model's, and each turn reuses what the earlier ones ran."""
    path, _ = tiny_gguf("q4_0_untied_llama3")
    served = akunu_mod.Model(str(path))
    fresh = akunu_mod.Model(str(path), prompt_cache_bytes=0)
    history = []
    for turn in range(6):
        prompt = history + varied_ids[turn * 10:turn * 10 + 10]
        got = served.generate_tokens(prompt, max_tokens=20, **(pr.SEEDED if turn % 2 else {}))
        if turn:  # all but the last output token, which no pass ran
            assert served.stats.cached_tokens >= len(history) - 1
        fresh.reset()
        want = fresh.generate_tokens(prompt, max_tokens=20, **(pr.SEEDED if turn % 2 else {}))
        assert got == want, pr.divergence(fresh, prompt, got, want)
        history = prompt + got



def test_cpu_reuses_generated_positions_too(smollm2):
    """On the CPU a decode step writes K/V bit for bit as a prefill does (above), so every cached
    position is offered for reuse, the reply's included (CUDA offers only the prompt's)."""
    smollm2.reset()
    ids = pr.chat_ids(smollm2, [{"role": "user", "content": "Hello!"}])
    smollm2.generate_tokens(ids, max_tokens=12)
    assert smollm2._engine.reusable_length == len(smollm2._engine.cached_tokens) > len(ids)
