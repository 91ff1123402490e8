"""HFTokenizer: akunu.Tokenizer's interface over a Hugging Face tokenizer.json.

A SafeTensors/MLX checkpoint carries its tokenizer as tokenizer.json (run by the `tokenizers`
library) plus tokenizer_config.json / generation_config.json / config.json for the special
tokens. HFTokenizer answers the same calls as the GGUF tokenizer (akunu.Tokenizer), so
Model.generate/stream/chat work unchanged:

    encode(text, add_special=False, parse_special=False) -> list[int]
    decode(ids, skip_special=True) -> str
    decode_stream(ids, skip_special=True) -> list[str]   (concatenation == decode(ids))
    token_to_piece(id) -> bytes, token_text(id) -> str, is_eog(id), is_control(id)
    vocab_size, bos_id, eos_id, add_bos, model, pre, len()
"""

from __future__ import annotations

import json
import os
import threading
from functools import lru_cache
from typing import Iterable, Sequence

from ._core import TokenizerError

# Chat end markers that end a generation when the vocabulary has them as special tokens (the
# texts of llama.cpp's end-of-generation list, as the GGUF tokenizer: src/tokenizer/end_of_generation.cpp).
END_MARKERS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
               "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
               "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
               "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~[")


@lru_cache(maxsize=1)
def _byte_level_decoding() -> dict[str, int]:
    """GPT-2's printable stand-in character for each byte, inverted (char -> byte)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _decoder_kinds(decoder: dict | None) -> set[str]:
    """The decoder types in tokenizer.json's "decoder" (flattening Sequence)."""
    if not decoder:
        return set()
    if decoder.get("type") == "Sequence":
        kinds = set()
        for d in decoder.get("decoders", []):
            kinds |= _decoder_kinds(d)
        return kinds
    kind = decoder.get("type", "")
    if kind == "Replace" and decoder.get("pattern", {}).get("String") == "\u2581" and decoder.get("content") == " ":
        return {"Metaspace"}  # the SentencePiece space marker undone by a Replace
    return {kind}


def _token_string(value) -> str | None:
    """tokenizer_config's bos_token/eos_token: a string or {"content": ...}."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _ids(value) -> list[int]:
    """config's bos/eos_token_id: an int or a list of ints."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _read_json(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise TokenizerError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise TokenizerError(f"{path}: expected a JSON object")
    return data


class HFTokenizer:
    """A tokenizer.json tokenizer with akunu.Tokenizer's methods (see the module docstring)."""

    def __init__(self, tokenizer_json: str, tokenizer_config: dict | None = None, config: dict | None = None,
                 generation_config: dict | None = None):
        try:
            from tokenizers import Tokenizer as _HF
        except ImportError as e:  # pragma: no cover - a dependency
            raise ImportError("loading a Hugging Face checkpoint needs the `tokenizers` package: "
                              "pip install tokenizers") from e
        try:
            with open(tokenizer_json, encoding="utf-8") as f:
                raw = f.read()
            spec = json.loads(raw)
            self._tok = _HF.from_str(raw)
            self._tok_plain = _HF.from_str(raw)  # special-token texts encoded as plain text
        except Exception as e:  # OSError, JSON errors, tokenizers' own parse errors
            raise TokenizerError(f"{tokenizer_json}: cannot load tokenizer ({e})") from e
        self._tok_plain.encode_special_tokens = True
        self.path = tokenizer_json
        self._lock = threading.Lock()  # the tokenizers objects are used from one thread at a time
        tokenizer_config = tokenizer_config or {}
        config = config or {}
        generation_config = generation_config or {}

        vocab = self._tok.get_vocab(with_added_tokens=True)
        if not vocab:
            raise TokenizerError(f"{tokenizer_json}: empty vocabulary")
        self._size = max(vocab.values()) + 1
        self._text = [""] * self._size
        for text, i in vocab.items():
            self._text[i] = text
        added = self._tok.get_added_tokens_decoder()
        self._added = {i: t.content for i, t in added.items()}
        self._control = frozenset(i for i, t in added.items() if t.special)
        self._kinds = _decoder_kinds(spec.get("decoder"))
        self._model = str((spec.get("model") or {}).get("type") or "unknown")
        self._pre = str((spec.get("pre_tokenizer") or {}).get("type") or "default")
        self._pieces: dict[int, bytes] = {}

        def special_id(key: str) -> int:
            text = _token_string(tokenizer_config.get(key))
            if text is not None and self._tok.token_to_id(text) is not None:
                return self._tok.token_to_id(text)
            for source in (generation_config, config):
                for i in _ids(source.get(key + "_id")):
                    if 0 <= i < self._size:
                        return i
            return -1

        self._bos = special_id("bos_token")
        self._eos = special_id("eos_token")
        eog = {self._eos} if self._eos >= 0 else set()
        for source in (generation_config, config):
            eog.update(i for i in _ids(source.get("eos_token_id")) if 0 <= i < self._size)
        for text in END_MARKERS:
            i = self._tok.token_to_id(text)
            if i is not None and i in self._control:
                eog.add(i)
        self._eog = frozenset(eog)
        with_special = self._tok.encode("a", add_special_tokens=True).ids
        without = self._tok.encode("a", add_special_tokens=False).ids
        self._add_bos = self._bos >= 0 and len(with_special) > len(without) and with_special[0] == self._bos

    @classmethod
    def from_dir(cls, path: str | os.PathLike) -> "HFTokenizer":
        """The tokenizer of a checkpoint directory (tokenizer.json + the JSON files beside it)."""
        path = os.fspath(path)
        tj = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(tj):
            raise TokenizerError(f"{path}: no tokenizer.json (akunu reads Hugging Face tokenizers from tokenizer.json)")
        return cls(tj, _read_json(os.path.join(path, "tokenizer_config.json")),
                   _read_json(os.path.join(path, "config.json")),
                   _read_json(os.path.join(path, "generation_config.json")))

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "HFTokenizer":
        """A tokenizer.json file (the JSON files beside it supply special tokens), or a directory."""
        path = os.fspath(path)
        if os.path.isdir(path):
            return cls.from_dir(path)
        d = os.path.dirname(path)
        return cls(path, _read_json(os.path.join(d, "tokenizer_config.json")), _read_json(os.path.join(d, "config.json")),
                   _read_json(os.path.join(d, "generation_config.json")))

    def pad_vocab(self, n: int) -> None:
        """Accept ids up to `n` (the model's embedding rows): checkpoints often pad the embedding
        past tokenizer.json's last id; such ids decode to nothing instead of raising."""
        if n > self._size:
            self._text += [""] * (n - self._size)
            self._size = n

    # --- ids -----------------------------------------------------------------------------

    def _check(self, i) -> int:
        i = int(i)
        if i < 0 or i >= self._size:
            raise ValueError(f"token id {i} is out of range for a vocabulary of {self._size} tokens")
        return i

    def _checked(self, ids: Iterable[int]) -> list[int]:
        return [self._check(i) for i in ids]

    # --- encode / decode -----------------------------------------------------------------

    def encode(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids of `text`. add_special adds BOS/EOS as the tokenizer's post-processor asks;
        parse_special turns special-token texts such as "<|im_start|>" into their ids."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        tok = self._tok if parse_special else self._tok_plain
        with self._lock:
            return list(tok.encode(text, add_special_tokens=add_special).ids)

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        ids = self._checked(ids)
        with self._lock:
            return self._tok.decode(ids, skip_special_tokens=skip_special)

    def decode_stream(self, ids: Sequence[int], skip_special: bool = True) -> list[str]:
        """One string per id (possibly empty) as a streaming generator would produce them, never
        splitting a UTF-8 character; the concatenation equals decode(ids)."""
        ids = self._checked(ids)
        pieces: list[str] = []
        emitted = ""
        for n in range(1, len(ids) + 1):
            text = self.decode(ids[:n], skip_special)
            if text.endswith("\ufffd") or not text.startswith(emitted):
                pieces.append("")  # an incomplete character (or a prefix the decoder revises): wait
                continue
            pieces.append(text[len(emitted):])
            emitted = text
        full = self.decode(ids, skip_special)
        if pieces and full.startswith(emitted) and len(full) > len(emitted):
            pieces[-1] += full[len(emitted):]
        return pieces

    def token_to_piece(self, id: int) -> bytes:
        """Raw bytes of one token as it appears in text (may be part of a UTF-8 character)."""
        i = self._check(id)
        piece = self._pieces.get(i)
        if piece is None:
            piece = self._pieces[i] = self._piece(i)
        return piece

    def _piece(self, i: int) -> bytes:
        text = self._text[i]
        if i in self._added:
            return self._added[i].encode("utf-8")
        if "ByteLevel" in self._kinds:
            table = _byte_level_decoding()
            if all(c in table for c in text):
                return bytes(table[c] for c in text)
            return text.encode("utf-8")
        if "ByteFallback" in self._kinds and len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
            try:
                return bytes([int(text[3:5], 16)])
            except ValueError:
                pass
        if "Metaspace" in self._kinds:
            return text.replace("\u2581", " ").encode("utf-8")
        with self._lock:  # other decoders (WordPiece, ...): what the decoder makes of the lone token
            return self._tok.decode([i], skip_special_tokens=False).encode("utf-8")

    # --- vocabulary facts ----------------------------------------------------------------

    def token_text(self, id: int) -> str:
        """The vocabulary entry as stored (e.g. "▁the" or "Ġthe")."""
        return self._text[self._check(id)]

    def is_eog(self, id: int) -> bool:
        """True for end-of-generation tokens (EOS, generation_config's eos ids, <|im_end|>, ...)."""
        return self._check(id) in self._eog

    def is_control(self, id: int) -> bool:
        """True for special tokens (those decode(skip_special=True) drops)."""
        return self._check(id) in self._control

    @property
    def eog_ids(self) -> list[int]:
        return sorted(self._eog)

    @property
    def vocab_size(self) -> int:
        return self._size

    @property
    def bos_id(self) -> int:
        return self._bos

    @property
    def eos_id(self) -> int:
        return self._eos

    @property
    def add_bos(self) -> bool:
        return self._add_bos

    @property
    def model(self) -> str:
        """tokenizer.json's model type ("BPE", "Unigram", ...)."""
        return self._model

    @property
    def pre(self) -> str:
        """tokenizer.json's pre-tokenizer type ("ByteLevel", "Metaspace", ...; "default" if none)."""
        return self._pre

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"<akunu.HFTokenizer model={self._model} pre={self._pre} vocab_size={self._size}>"


def read_chat_template(path: str | os.PathLike) -> str:
    """The checkpoint's chat template: tokenizer_config.json's chat_template (a string, or a list of
    named templates: "default" wins), else chat_template.jinja / chat_template.json; "" if none."""
    path = os.fspath(path)
    template = _read_json(os.path.join(path, "tokenizer_config.json")).get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next((t for t in named.values() if isinstance(t, str)), None)
    if isinstance(template, str) and template:
        return template
    jinja = os.path.join(path, "chat_template.jinja")
    if os.path.isfile(jinja):
        with open(jinja, encoding="utf-8") as f:
            return f.read()
    template = _read_json(os.path.join(path, "chat_template.json")).get("chat_template")
    return template if isinstance(template, str) else ""
