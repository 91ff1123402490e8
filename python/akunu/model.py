"""akunu.Model: the text-level API over the native core (generate, stream, chat)."""

from __future__ import annotations

import codecs
import os
import threading
from typing import Iterable, Iterator, Sequence

from . import _core
from .chat_template import render_chat
from .stop import StopMatcher

_BACKENDS = ("auto", "cpu", "cuda", "metal")
KV_CACHE_DTYPES = ("f16", "q8_0")


class Model(_core.Model):
    """A model ready to generate text.

    Model(path, backend="auto", context_length=None, threads=None, kv_cache_dtype="f16")

    - path: a GGUF file, or a Hugging Face checkpoint directory (config.json, *.safetensors,
      tokenizer.json; MLX-quantized checkpoints too). Model.from_pretrained(repo_id) downloads one.

    - backend: "auto" (the best available), "cpu", "cuda" or "metal".
    - context_length: tokens the KV cache holds (default: the model's, capped at 4096).
    - threads: CPU worker threads (default: one per hardware thread).
    - kv_cache_dtype: "f16" (default) or "q8_0": keys and values as 8-bit blocks of 32 with an fp16
      scale (llama.cpp's Q8_0), about half the cache memory; needs head_dim a multiple of 32.
    """

    def __init__(self, path: str | os.PathLike, backend: str = "auto", context_length: int | None = None,
                 threads: int | None = None, kv_cache_dtype: str = "f16"):
        path = os.fspath(path)
        if not isinstance(backend, str) or backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
        if context_length is not None and (not isinstance(context_length, int) or context_length <= 0):
            raise ValueError(f"context_length must be a positive integer, got {context_length!r}")
        if threads is not None and (not isinstance(threads, int) or threads <= 0):
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        if not isinstance(kv_cache_dtype, str) or kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype must be one of {KV_CACHE_DTYPES}, got {kv_cache_dtype!r}")
        if not os.path.exists(path):
            raise FileNotFoundError(f"model file not found: {path}")
        if os.path.isdir(path):  # a Hugging Face checkpoint: its tokenizer runs in Python
            from .hf_checkpoint import read_checkpoint

            if not os.path.isfile(os.path.join(path, "config.json")):
                raise IsADirectoryError(f"{path} is a directory without config.json: expected a GGUF file or a "
                                        "Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json)")

            loaded = read_checkpoint(path)
            super().__init__(loaded.checkpoint, backend, context_length or 0, threads or 0, kv_cache_dtype)
            self._hf_tokenizer = loaded.tokenizer
            self._hf_chat_template = loaded.chat_template
        else:
            super().__init__(path, backend, context_length or 0, threads or 0, kv_cache_dtype)
            self._hf_tokenizer = None
        self.path = path
        # One generation session at a time per model: generate()/chat() hold this lock for their
        # whole run, so threads sharing a model take turns; a stream notices if it was superseded.
        self._session_lock = threading.RLock()
        self._session = None

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: str | None = None, *, revision: str | None = None,
                        cache_dir: str | os.PathLike | None = None, local_files_only: bool | None = None,
                        token: str | bool | None = None, **load_kwargs) -> "Model":
        """Load a model from the Hugging Face Hub (or its local cache when offline).

        GGUF repositories: `filename` picks the file; without it the repository's only .gguf, or the
        first of akunu.hub.DEFAULT_GGUF_PREFERENCE (Q4_1, Q4_0, Q8_0, F16, ...) when there are
        several (ValueError listing the files when none fits).
        SafeTensors/MLX repositories: config, tokenizer and weights are downloaded.
        Works offline from the cache with HF_HUB_OFFLINE=1 or local_files_only=True.
        load_kwargs go to Model(): backend, context_length, threads, kv_cache_dtype.
        """
        from .hub import resolve_pretrained

        path = resolve_pretrained(repo_id, filename, revision=revision, cache_dir=cache_dir,
                                  local_files_only=local_files_only, token=token)
        return cls(path, **load_kwargs)

    @property
    def tokenizer(self):
        """The model's tokenizer: the GGUF's (akunu.Tokenizer) or tokenizer.json's (akunu.HFTokenizer)."""
        hf = self.__dict__.get("_hf_tokenizer")
        return hf if hf is not None else _core.Model.tokenizer.__get__(self)

    @property
    def chat_template(self) -> str:
        """The chat template (Jinja2) the model ships with, "" if none."""
        if self.__dict__.get("_hf_tokenizer") is not None:
            return self._hf_chat_template
        return _core.Model.chat_template.__get__(self)

    def __repr__(self) -> str:
        c = self.config
        return (f"Model({os.path.basename(self.path)!r}, architecture={c['architecture']!r}, "
                f"layers={c['n_layers']}, dim={c['dim']}, backend={self.backend!r}, context_length={self.context_length})")

    # --- text generation -----------------------------------------------------------------

    def generate(self, prompt: str | Sequence[int], max_tokens: int = 128, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, min_p: float = 0.0, repeat_penalty: float = 1.0, seed: int | None = None,
                 stop: str | Iterable[str] | None = None) -> str:
        """Complete `prompt` (text, or token ids) and return the generated text.

        temperature 0 is greedy decoding; otherwise tokens are sampled with top_k / top_p / min_p /
        repeat_penalty by a Gumbel-max draw, reproducibly for a given seed (the same tokens on every
        backend, up to the backends' rounding of the logits). Both are chained on the device, many
        tokens per replay of the dispatch table. Generation ends
        at an end-of-generation token, after max_tokens, or before the first `stop` string.
        """
        with self._session_lock:
            return "".join(self.stream(prompt, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed,
                                       stop))

    def stream(self, prompt: str | Sequence[int], max_tokens: int = 128, temperature: float = 0.0, top_k: int = 0,
               top_p: float = 1.0, min_p: float = 0.0, repeat_penalty: float = 1.0, seed: int | None = None,
               stop: str | Iterable[str] | None = None) -> Iterator[str]:
        """Like generate(), but yields the text piece by piece as it is produced."""
        matcher = StopMatcher(stop)
        ids = self._prompt_ids(prompt)
        session = self._begin_checked(ids, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed)
        return self._stream_text(matcher, session)

    def generate_tokens(self, prompt: str | Sequence[int], max_tokens: int = 128, temperature: float = 0.0,
                        top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0, repeat_penalty: float = 1.0,
                        seed: int | None = None) -> list[int]:
        """Generate and return token ids (end-of-generation tokens are not included)."""
        ids = self._prompt_ids(prompt)
        with self._session_lock:
            session = self._begin_checked(ids, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed)
            out: list[int] = []
            while True:
                chunk = self._next_in(session)
                if not chunk:
                    return out
                out.extend(chunk)

    def chat(self, messages: Sequence[dict], max_tokens: int = 256, temperature: float = 0.0, top_k: int = 0,
             top_p: float = 1.0, min_p: float = 0.0, repeat_penalty: float = 1.0, seed: int | None = None,
             stop: str | Iterable[str] | None = None, stream: bool = False):
        """Answer a conversation ([{"role": "user", "content": ...}, ...]) using the model's chat template.

        Returns the assistant's reply, or an iterator of text pieces with stream=True.
        """
        ids = self.tokenizer.encode(self.format_chat(messages), add_special=False, parse_special=True)
        if stream:
            return self.stream(ids, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed, stop)
        return self.generate(ids, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed, stop)

    def format_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """The prompt text that chat() feeds the model for `messages`."""
        tok = self.tokenizer
        bos = tok.token_text(tok.bos_id) if tok.bos_id >= 0 else ""
        eos = tok.token_text(tok.eos_id) if tok.eos_id >= 0 else ""
        return render_chat(self.chat_template or None, messages, bos, eos, add_generation_prompt)

    # --- helpers -------------------------------------------------------------------------

    def _prompt_ids(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt, add_special=True, parse_special=True)
            if not ids:
                raise ValueError("the prompt is empty")
            return ids
        if isinstance(prompt, (bytes, bytearray)):
            raise ValueError("prompt must be str or a sequence of token ids, not bytes")
        ids = [int(t) for t in prompt]
        if not ids:
            raise ValueError("the prompt is empty")
        return ids

    def _begin_checked(self, ids, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed):
        if not isinstance(max_tokens, int) or max_tokens < 0:
            raise ValueError(f"max_tokens must be a non-negative integer, got {max_tokens!r}")
        if not isinstance(top_k, int) or top_k < 0:
            raise ValueError(f"top_k must be a non-negative integer, got {top_k!r}")
        if seed is not None and (not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
        with self._session_lock:
            self._begin(ids, max_tokens, float(temperature), top_k, float(top_p), float(min_p), float(repeat_penalty),
                        seed)
            self._session = session = object()
        return session

    def _next_in(self, session) -> list[int]:
        """The next tokens of `session`, which must still be the model's current one."""
        with self._session_lock:
            if self._session is not session:
                raise RuntimeError("this generation was superseded by another generate/stream/chat call on the "
                                   "same model; finish or discard one stream before starting the next")
            return self._next_tokens()

    def _stream_text(self, matcher: StopMatcher, session) -> Iterator[str]:
        tok = self.tokenizer
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            chunk = self._next_in(session)
            if not chunk:
                break
            raw = b"".join(b"" if tok.is_control(t) else tok.token_to_piece(t) for t in chunk)
            text, stopped = matcher.feed(utf8.decode(raw))
            if text:
                yield text
            if stopped:
                return
        text, _ = matcher.feed(utf8.decode(b"", final=True))
        rest = text + matcher.flush()
        if rest:
            yield rest
