"""Checks of prompt reuse shared by tests/test_prompt_reuse.py (CPU) and tests/test_cuda.py: a model
that reuses its cache (`served`) against one reset before every request (`fresh`), which prefills
each prompt whole. Every reply must be the fresh model's; where one is not, the failure says where
the tokens part and how far apart the fresh model's logits put the two tokens there (a near tie
points to rounding, a wide gap to a wrong cache)."""
from __future__ import annotations

import numpy as np

import akunu

# A 10-turn chat whose turns refer back to earlier replies.
QUESTIONS = ["What is the capital of France?", "Tell me more about its history.", "What about its food?",
             "Name three famous museums there.", "Which one is the oldest?", "How do I get there from London?",
             "What is the weather like in spring?", "Suggest a three-day itinerary.", "What should I avoid?",
             "Thank you! Summarize our conversation in one sentence."]
# Two conversations served alternately (the prompt cache holds the one not being served).
CONVERSATION_A = ["Write a short poem about the sea.", "Now make it about the mountains.", "Give it a title."]
CONVERSATION_B = ["Explain how a bicycle works, briefly.", "Why do the gears help?", "And the brakes?"]

SEEDED = dict(temperature=0.8, top_p=0.95, repeat_penalty=1.1, seed=1234)


def chat_ids(model, messages) -> list[int]:
    """The prompt chat() runs for `messages`."""
    return model.tokenizer.encode(model.format_chat(messages), add_special=False, parse_special=True)


def common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def reusable(cached, prompt) -> int:
    """What a full-attention model may reuse of `cached` (the positions the engine offers for reuse,
    _engine.cached_tokens[:_engine.reusable_length]): the common prefix, short of the prompt's last token."""
    return min(common_prefix(cached, prompt), len(prompt) - 1)


def reusable_cache(model) -> list[int]:
    """The cached tokens a next prompt may keep (all on the CPU; on CUDA the last prompt's)."""
    return list(model._engine.cached_tokens)[:model._engine.reusable_length]


def divergence(fresh, prompt, got, want) -> str:
    """Where `got` (after `prompt`) parts from `want`, and the fresh model's logits of both tokens there."""
    k = common_prefix(got, want)
    if k >= min(len(got), len(want)):
        return f"one output is a prefix of the other ({len(got)} vs {len(want)} tokens)"
    logits = np.asarray(fresh.logits(list(prompt) + list(want[:k]))[-1])
    return (f"output token {k}: reused cache chose {got[k]} (fresh logit {logits[got[k]]:.5f}), fresh model "
            f"{want[k]} (logit {logits[want[k]]:.5f}); gap {abs(logits[got[k]] - logits[want[k]]):.5f}")


def output_after(model, prompt) -> list[int]:
    """The tokens the cache holds after `prompt`: the output fed back (all but the last token)."""
    cached = list(model._engine.cached_tokens)
    assert cached[:len(prompt)] == list(prompt), "the cache must hold the prompt it ran"
    return cached[len(prompt):]


def fresh_chat(fresh, messages, **settings):
    fresh.reset()
    reply = fresh.chat(messages, **settings)
    assert fresh.stats.cached_tokens == 0
    return reply


def assert_same_reply(served, fresh, messages, reply, expected, ids):
    if reply != expected:
        got = output_after(served, ids)
        fresh_chat(fresh, messages)  # refill the fresh model's cache to read its output
        raise AssertionError(f"turn {len(messages) // 2 + 1}: reply differs from a fresh model's: "
                             f"{divergence(fresh, ids, got, output_after(fresh, ids))}\n"
                             f"reused: {reply!r}\nfresh:  {expected!r}")


def run_chat(served, fresh, questions, max_tokens=64, **settings) -> list[tuple[int, int]]:
    """A chat, each turn served.chat() with the history and the previous replies: each reply must
    equal the fresh model's, stats.cached_tokens the prefix the prompt shares with the cache, and
    from the second turn the cache must serve the whole previous prompt. Returns (prompt_tokens,
    cached_tokens) per turn."""
    served.reset()
    messages, turns, previous = [], [], []
    for q in questions:
        messages.append({"role": "user", "content": q})
        ids = chat_ids(served, messages)
        cached_before = reusable_cache(served)
        reply = served.chat(messages, max_tokens=max_tokens, **settings)
        stats = served.stats
        assert stats.prompt_tokens == len(ids)
        assert stats.cached_tokens == reusable(cached_before, ids), (stats, len(cached_before))
        assert stats.cached_tokens >= len(previous), "the previous prompt must be reused whole"
        output_after(served, ids)
        assert_same_reply(served, fresh, messages, reply, fresh_chat(fresh, messages, max_tokens=max_tokens,
                                                                     **settings), ids)
        turns.append((stats.prompt_tokens, stats.cached_tokens))
        messages.append({"role": "assistant", "content": reply})
        previous = ids
    return turns


def run_interleaved(served, fresh, max_tokens=48, **settings) -> None:
    """Conversations A and B take turns on one model: from their second turn on, each is served from
    the prompt cache (its previous prompt reused whole), and every reply equals a fresh model's."""
    served.reset()
    histories = {"A": [], "B": []}
    previous = {"A": [], "B": []}
    for turn in range(len(CONVERSATION_A)):
        for name, questions in (("A", CONVERSATION_A), ("B", CONVERSATION_B)):
            messages = histories[name]
            messages.append({"role": "user", "content": questions[turn]})
            ids = chat_ids(served, messages)
            reply = served.chat(messages, max_tokens=max_tokens, **settings)
            if turn > 0:
                assert served.stats.cached_tokens >= len(previous[name]), \
                    f"conversation {name}, turn {turn + 1}: not served from the prompt cache ({served.stats})"
            if turn > 0 or name == "B":
                assert served._engine.prompt_cache_entries == 1, "the other conversation is set aside"
            assert_same_reply(served, fresh, messages, reply,
                              fresh_chat(fresh, messages, max_tokens=max_tokens, **settings), ids)
            messages.append({"role": "assistant", "content": reply})
            previous[name] = ids


def greedy_config(max_tokens=1):
    return akunu.SamplingParams(max_tokens=max_tokens).to_core()


def rollback_logits(served, prompt):
    """The logits of the last prompt token, run by a session on `served` (reusing its cache)."""
    served._engine._begin(prompt, greedy_config())
    return np.asarray(served._engine._last_logits()).copy()


def assert_rollback_logits(served, fresh, build, new_tokens, points, atol, rtol=0.0) -> float:
    """For each rollback point p into the cache build(served) fills: a prompt of the first p cached
    tokens and `new_tokens` reuses exactly p positions, and the logits of its last token are a fresh
    model's within atol. Returns the largest difference."""
    worst = 0.0
    for p in points:
        build(served)
        cached = list(served._engine.cached_tokens)
        keepable = served._engine.reusable_length
        assert p < len(cached)
        prompt = cached[:p] + list(new_tokens)
        got = rollback_logits(served, prompt)
        assert served.stats.cached_tokens == min(p, keepable)
        want = np.asarray(fresh.logits(prompt)[-1])
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"rolled back to {p} of {len(cached)}")
        worst = max(worst, float(np.abs(got - want).max()))
    return worst
