"""The vocabulary as the grammar engine (llguidance) sees it: every token id's bytes, which ids are
special, which end a generation, and a tokenize function for the text a grammar forces.

Works for both tokenizers a Model can have: akunu.Tokenizer (GGUF vocabularies, tokenized by the
engine) and akunu.HFTokenizer (tokenizer.json checkpoints). Building one takes ~0.2 s for a 50k
vocabulary and ~0.6 s for 128k; grammar.py builds it once per model."""

from __future__ import annotations

import llguidance

# llguidance's marker for special tokens: their text is prefixed with 0xFF, a byte no UTF-8 text
# contains, so a grammar can name them (<|im_end|>) but plain text never produces them.
SPECIAL_PREFIX = b"\xff"


class VocabularyView:
    """What llguidance.TokenizerWrapper reads: tokens, eos/bos ids, special ids, and a call that
    tokenizes bytes."""

    def __init__(self, tokenizer, n_vocab: int):
        self._tokenizer = tokenizer
        tokens: list[bytes] = []
        special: list[int] = []
        for i in range(tokenizer.vocab_size):
            if tokenizer.is_control(i):
                tokens.append(SPECIAL_PREFIX + tokenizer.token_text(i).encode("utf-8"))
                special.append(i)
            else:
                tokens.append(tokenizer.token_to_piece(i))
        # The model's output rows past the tokenizer's vocabulary (padding) are tokens with no bytes:
        # a grammar never allows them.
        tokens.extend(b"" for _ in range(n_vocab - len(tokens)))
        self.tokens = tokens
        self.special_token_ids = special
        self.eos_token_id = tokenizer.eos_id
        self.bos_token_id = tokenizer.bos_id if tokenizer.bos_id >= 0 else None
        # Plain (non-special) tokens by their bytes, for the greedy fallback in __call__.
        self._by_bytes: dict[bytes, int] = {}
        special_set = set(special)
        for i, piece in enumerate(tokens):
            if piece and i not in special_set:
                self._by_bytes.setdefault(piece, i)
        self._longest = max(map(len, self._by_bytes))

    def __call__(self, data: bytes) -> list[int]:
        """Token ids whose bytes are exactly `data`: the model's tokenizer's own (no BOS, special
        token text not parsed) where they are, else the longest tokens first. The fallback covers
        text that is not UTF-8 on its own (a grammar may force part of a character) and
        SentencePiece tokenizers, which write a space before the text."""
        try:
            ids = self._tokenizer.encode(data.decode("utf-8"), add_special=False, parse_special=False)
            if b"".join(self.tokens[i] for i in ids) == data:
                return ids
        except UnicodeDecodeError:
            pass
        return self._longest_first(data)

    def _longest_first(self, data: bytes) -> list[int]:
        out, at = [], 0
        while at < len(data):
            for length in range(min(self._longest, len(data) - at), 0, -1):
                token = self._by_bytes.get(data[at:at + length])
                if token is not None:
                    out.append(token)
                    at += length
                    break
            else:
                raise ValueError(f"the vocabulary has no token for byte 0x{data[at]:02x}")
        return out


def end_of_generation_ids(tokenizer) -> list[int]:
    """Every id that ends a generation (EOS, end-of-turn tokens), EOS first."""
    ids = [tokenizer.eos_id] if tokenizer.eos_id >= 0 else []
    ids += [i for i in range(tokenizer.vocab_size) if i not in ids and tokenizer.is_eog(i)]
    return ids


def grammar_tokenizer(tokenizer, n_vocab: int) -> llguidance.LLTokenizer:
    """The llguidance tokenizer for `tokenizer` (akunu.Tokenizer or akunu.HFTokenizer) over a model
    with `n_vocab` output rows (>= the tokenizer's vocabulary). Its end-of-generation tokens are the
    model's, so a finished grammar lets the model stop with any of them."""
    if n_vocab < tokenizer.vocab_size:
        raise ValueError(f"the model has {n_vocab} output rows, fewer than the tokenizer's {tokenizer.vocab_size} tokens")
    view = VocabularyView(tokenizer, n_vocab)
    eog = end_of_generation_ids(tokenizer)
    if not eog:
        raise ValueError("the tokenizer has no end-of-generation token, so a grammar could never let the model stop")
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(view), n_vocab=n_vocab, eos_token=eog)
