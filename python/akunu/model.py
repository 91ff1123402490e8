"""akunu.Model: the text-level API (generate, stream, chat) over the native engine, a _core.Model
it holds (token-level: prefill, chain decode, generation sessions)."""

from __future__ import annotations

import codecs
import dataclasses
import itertools
import os
import threading
import warnings
from typing import Iterator, Sequence

from . import _core
from .chat_template import check_template, render_chat
from .chat_templates import FAMILY_TEMPLATES, detect_family
from .constrained import constrained_tokens
from .grammar import GrammarCompiler
from .sampling import SamplingParams, sampling_from_arguments
from .stop import StopMatcher

KV_CACHE_DTYPES = ("f16", "q8_0")
DEFAULT_MAX_TOKENS = 128  # generate, stream and generate_tokens when max_tokens is not given
CHAT_MAX_TOKENS = 256     # chat's


MAX_CONTEXT_LENGTH = 2**31 - 1  # positions are 32-bit signed integers in the engine


class ContextLengthWarning(UserWarning):
    """Model(..., context_length=N) with N beyond the context the model was trained on: allowed,
    since it was asked for, but its output past the trained length is usually poor."""


def _check_load_arguments(backend, context_length, threads, kv_cache_dtype, prompt_cache_bytes) -> None:
    """The checks Model() and Model.plan_memory() make before the engine sees the arguments."""
    if not isinstance(backend, str):  # the name itself is checked by the engine (create_device)
        raise ValueError(f"backend must be a string: 'auto' or one of {_core.built_backends()}, got {backend!r}")
    if context_length is not None and (isinstance(context_length, bool) or not isinstance(context_length, int) or
                                       not 0 < context_length <= MAX_CONTEXT_LENGTH):
        raise ValueError(f"context_length must be a positive integer up to {MAX_CONTEXT_LENGTH}, got {context_length!r}")
    if threads is not None and (not isinstance(threads, int) or threads <= 0):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    if not isinstance(kv_cache_dtype, str) or kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"kv_cache_dtype must be one of {KV_CACHE_DTYPES}, got {kv_cache_dtype!r}")
    if prompt_cache_bytes is not None and (isinstance(prompt_cache_bytes, bool) or
                                           not isinstance(prompt_cache_bytes, int) or prompt_cache_bytes < 0):
        raise ValueError(f"prompt_cache_bytes must be a non-negative integer, got {prompt_cache_bytes!r}")


def _check_model_path(path: str) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(f"model file not found: {path}")
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise IsADirectoryError(f"{path} is a directory without config.json: expected a GGUF file or a "
                                "Hugging Face checkpoint directory (config.json, *.safetensors, tokenizer.json)")


def _engine_attribute(name: str) -> property:
    """A read-only attribute of the engine, published on Model with the engine's docstring."""
    return property(lambda self: getattr(self._engine, name), doc=getattr(_core.Model, name).__doc__)


class Model:
    """A model ready to generate text.

    Model(path, backend="auto", context_length=None, threads=None, kv_cache_dtype="f16", chat_template=None,
          prompt_cache_bytes=None)

    - path: a GGUF file, or a Hugging Face checkpoint directory (config.json, *.safetensors,
      tokenizer.json; MLX-quantized checkpoints too). Model.from_pretrained(repo_id) downloads one.

    - backend: "auto" (the best available) or one of akunu.built_backends(): "cpu", "cuda" in
      builds made with nvcc, "metal" in builds made on macOS. "cuda" or "metal" in a build without
      it raises UnsupportedError; any other name raises ValueError listing them.
    - context_length: tokens the KV cache holds (default: the model's trained context, capped at
      4096). Beyond the trained context it is allowed, with a ContextLengthWarning.
    - threads: CPU worker threads (default: one per hardware thread).
    - kv_cache_dtype: "f16" (default) or "q8_0": keys and values as 8-bit blocks of 32 with an fp16
      scale (llama.cpp's Q8_0; keys in a Hadamard basis, which halves the rounding error of the
      scores), about half the cache memory; needs head_dim a multiple of 32.
    - chat_template: a Jinja2 chat template for chat() / format_chat() in place of the model's
      (ValueError if it does not render a conversation). Without it: the GGUF's
      tokenizer.chat_template or the checkpoint's, else the built-in template of the model's
      family (akunu.chat_templates: Gemma, Llama 3, Llama 2, Mistral, Phi-3, ChatML), picked from
      the vocabulary's special tokens and the architecture; chat_format says which.
    - prompt_cache_bytes: host memory for the KV caches of recent conversations (default: a full
      context's worth, kv_cache_bytes plus 4 bytes of token id per position, at most the host memory
      the memory plan leaves free; 0 turns it off). See prompt reuse below.

    Memory: before anything is allocated the load works out what the model will hold (weights as
    the backend lays them out, the KV cache, scratch: memory_plan) and compares it with what the
    device has free; a model that does not fit raises akunu.OutOfMemoryError (a MemoryError) naming
    the numbers and the largest context_length that fits. Model.plan_memory(path, ...) makes the
    same plan without loading (docs/adr/0021-memory-plan.md).

    Prompt reuse: generate, stream, chat and generate_tokens keep the part of the KV cache that the
    new prompt shares with what it holds (the last prompt and its reply) and prefill only the rest,
    so turn N of a chat costs only its new tokens; stats.cached_tokens says how many were reused.
    When a prompt has little in common with the cached conversation (another conversation), that
    conversation is first copied to host memory, and a later prompt continuing it is served from
    there: the prompt cache, least recently used first out past prompt_cache_bytes. The output is
    that of a fresh model given the same prompt (docs/adr/0018-prompt-reuse.md). reset() empties
    both.
    """

    def __init__(self, path: str | os.PathLike, backend: str = "auto", context_length: int | None = None,
                 threads: int | None = None, kv_cache_dtype: str = "f16", chat_template: str | None = None,
                 prompt_cache_bytes: int | None = None):
        path = os.fspath(path)
        _check_load_arguments(backend, context_length, threads, kv_cache_dtype, prompt_cache_bytes)
        if chat_template is not None:
            check_template(chat_template)
        _check_model_path(path)
        self._chat_override = chat_template
        self._hf_tokenizer = None
        engine_arguments = (backend, context_length or 0, threads or 0, kv_cache_dtype,
                            -1 if prompt_cache_bytes is None else prompt_cache_bytes)
        if os.path.isdir(path):  # a Hugging Face checkpoint: its tokenizer runs in Python
            from .hf_checkpoint import read_checkpoint

            loaded = read_checkpoint(path)
            self._engine = _core.Model(loaded.checkpoint, *engine_arguments)
            self._hf_tokenizer = loaded.tokenizer
            self._hf_chat_template = loaded.chat_template
        else:
            self._engine = _core.Model(path, *engine_arguments)
        trained = self._engine.config["trained_context_length"]
        if context_length is not None and context_length > trained:
            warnings.warn(f"context_length={context_length} is beyond the {trained} tokens {os.path.basename(path)} "
                          "was trained on: positions past them are usually generated poorly", ContextLengthWarning,
                          stacklevel=2)
        self.path = path
        # One generation session at a time per model: generate()/chat() hold this lock for their
        # whole run, so threads sharing a model take turns; a stream notices if it was superseded.
        self._session_lock = threading.RLock()
        self._session = None
        self._grammar_compiler = None

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
        load_kwargs go to Model(): backend, context_length, threads, kv_cache_dtype, chat_template,
        prompt_cache_bytes.
        """
        from .hub import resolve_pretrained

        path = resolve_pretrained(repo_id, filename, revision=revision, cache_dir=cache_dir,
                                  local_files_only=local_files_only, token=token)
        return cls(path, **load_kwargs)

    @staticmethod
    def plan_memory(path: str | os.PathLike, backend: str = "auto", context_length: int | None = None,
                    threads: int | None = None, kv_cache_dtype: str = "f16",
                    prompt_cache_bytes: int | None = None) -> dict:
        """The memory plan Model(path, ...) with these arguments would make, without loading: the
        dict memory_plan shows, "fits" saying whether the load would go ahead. Opens the device and
        maps the file (a Hugging Face checkpoint is read, MLX weights converted) but allocates no
        weights, KV cache or scratch."""
        path = os.fspath(path)
        _check_load_arguments(backend, context_length, threads, kv_cache_dtype, prompt_cache_bytes)
        _check_model_path(path)
        source = path
        if os.path.isdir(path):
            from .hf_checkpoint import read_checkpoint

            source = read_checkpoint(path).checkpoint
        return _core.plan_memory(source, backend, context_length or 0, threads or 0, kv_cache_dtype,
                                 -1 if prompt_cache_bytes is None else prompt_cache_bytes)

    # --- what was loaded ---------------------------------------------------------------

    config = _engine_attribute("config")
    backend = _engine_attribute("backend")
    device_name = _engine_attribute("device_name")
    context_length = _engine_attribute("context_length")
    format = _engine_attribute("format")
    tensors = _engine_attribute("tensors")
    dispatch_table = _engine_attribute("dispatch_table")
    kv_cache_dtype = _engine_attribute("kv_cache_dtype")
    kv_cache_bytes = _engine_attribute("kv_cache_bytes")
    memory_plan = _engine_attribute("memory_plan")
    stats = _engine_attribute("stats")
    prompt_cache_bytes = _engine_attribute("prompt_cache_bytes")
    finish_reason = _engine_attribute("finish_reason")

    @property
    def tokenizer(self):
        """The model's tokenizer: the GGUF's (akunu.Tokenizer) or tokenizer.json's (akunu.HFTokenizer)."""
        return self._hf_tokenizer if self._hf_tokenizer is not None else self._engine.tokenizer

    @property
    def chat_template(self) -> str:
        """The chat template (Jinja2) the model ships with, or the chat_template= override; "" if
        neither (chat() then uses its family's: effective_chat_template)."""
        if self._chat_override is not None:
            return self._chat_override
        return self._hf_chat_template if self._hf_tokenizer is not None else self._engine.chat_template

    @property
    def chat_format(self) -> str:
        """Where chat()'s template comes from: "override" (chat_template=), "model" (the GGUF's or
        checkpoint's), or the name of the family template used for a model without one
        (akunu.chat_templates.FAMILY_TEMPLATES: "gemma", "llama3", "chatml", ...)."""
        if self._chat_override is not None:
            return "override"
        if self.chat_template:
            return "model"
        tok = self.tokenizer

        def has_token(text: str) -> bool:
            ids = tok.encode(text, add_special=False, parse_special=True)
            return len(ids) == 1 and tok.token_text(ids[0]) == text

        return detect_family(self.config["architecture"], has_token, tok.model)

    @property
    def effective_chat_template(self) -> str:
        """The template chat() and format_chat() render (see chat_format)."""
        fmt = self.chat_format
        return self.chat_template if fmt in ("override", "model") else FAMILY_TEMPLATES[fmt]

    def logits(self, tokens: Sequence[int], first: int = 0):
        """Teacher-forced logits for the positions first, first+1, ... of `tokens`: a float32 numpy
        array [len(tokens) - first, vocab_size] (row i predicts the token after tokens[first + i]).
        The rows before `first` are only prefilled, or kept where the KV cache holds them already
        (as a generation's prompt is, docs/adr/0018-prompt-reuse.md)."""
        return self._engine.logits(tokens, first)

    def reset(self) -> None:
        """Forget every cached prompt: empties the KV cache and the prompt cache, so the next
        generation prefills its whole prompt. A stream still running is superseded."""
        with self._session_lock:
            self._session = None
            self._engine.reset()

    def close(self) -> None:
        """Free the model's memory now (otherwise when the Model is garbage-collected)."""
        self._engine.close()

    def __repr__(self) -> str:
        c = self.config
        return (f"Model({os.path.basename(self.path)!r}, architecture={c['architecture']!r}, "
                f"layers={c['n_layers']}, dim={c['dim']}, backend={self.backend!r}, context_length={self.context_length})")

    # --- text generation -----------------------------------------------------------------

    def generate(self, prompt: str | Sequence[int], sampling: SamplingParams | None = None, **settings) -> str:
        """Complete `prompt` (text, or token ids) and return the generated text.

        How: `sampling`, an akunu.SamplingParams, or its fields as keywords, not both:
        generate(p, max_tokens=32, temperature=0.7, seed=1) is
        generate(p, SamplingParams(max_tokens=32, temperature=0.7, seed=1)).
        temperature 0 (the default) is greedy decoding (of the penalized logits when a penalty is
        set); otherwise tokens are sampled with the penalties (repeat_penalty, frequency_penalty,
        presence_penalty) and top_k / top_p / min_p by a Gumbel-max draw, reproducibly for a given
        seed (the same tokens on every backend, up to the backends' rounding of the logits). Both
        are chained on the device, many tokens per replay of the dispatch table. Generation ends at
        an end-of-generation token, after max_tokens (default 128), or before the first `stop`
        string.
        With grammar= (an akunu.Grammar), the text follows the grammar and ends when it is
        complete; finish_reason then says "stop", or "length" if max_tokens came first.
        """
        params = sampling_from_arguments("generate", sampling, settings)
        with self._session_lock:
            return "".join(self.stream(prompt, params))

    def stream(self, prompt: str | Sequence[int], sampling: SamplingParams | None = None,
               **settings) -> Iterator[str]:
        """Like generate(), but yields the text piece by piece as it is produced."""
        params = sampling_from_arguments("stream", sampling, settings)
        return (text for text, _ in self._pieces(self._prompt_ids(prompt), params, DEFAULT_MAX_TOKENS) if text)

    def generate_tokens(self, prompt: str | Sequence[int], sampling: SamplingParams | None = None,
                        **settings) -> list[int]:
        """Generate and return token ids (end-of-generation tokens are not included). Settings as
        generate()'s, except stop strings, which apply to text."""
        params = sampling_from_arguments("generate_tokens", sampling, settings)
        if params.stop:
            raise ValueError("generate_tokens() returns token ids and takes no stop strings; generate() and stream() "
                             "apply them to the text")
        ids = self._prompt_ids(prompt)
        with self._session_lock:
            return [t for chunk in self._token_chunks(ids, params, DEFAULT_MAX_TOKENS) for t in chunk]

    def chat(self, messages: Sequence[dict], sampling: SamplingParams | None = None, *, stream: bool = False,
             **settings):
        """Answer a conversation ([{"role": "user", "content": ...}, ...]) using the model's chat template.

        Settings as generate()'s (max_tokens defaults to 256 here). Returns the assistant's reply,
        or an iterator of text pieces with stream=True.
        """
        params = sampling_from_arguments("chat", sampling, settings)
        if params.max_tokens is None:
            params = dataclasses.replace(params, max_tokens=CHAT_MAX_TOKENS)
        ids = self.tokenizer.encode(self.format_chat(messages), add_special=False, parse_special=True)
        return self.stream(ids, params) if stream else self.generate(ids, params)

    def format_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True,
                    tools: list[dict] | None = None) -> str:
        """The prompt text that chat() feeds the model for `messages`. `tools` goes to the template
        as its `tools` variable (akunu.tool_calls uses it for templates that render tools)."""
        tok = self.tokenizer
        bos = tok.token_text(tok.bos_id) if tok.bos_id >= 0 else ""
        eos = tok.token_text(tok.eos_id) if tok.eos_id >= 0 else ""
        fmt = self.chat_format
        if fmt in ("override", "model"):
            return render_chat(self.chat_template, messages, bos, eos, add_generation_prompt, tools)
        # The built-in templates begin with bos_token: BOS only where the tokenizer adds one, as
        # llama.cpp's tokenization of its formatted chat does.
        return render_chat(FAMILY_TEMPLATES[fmt], messages, bos if tok.add_bos else "", eos, add_generation_prompt,
                           tools)

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

    @property
    def _grammars(self) -> GrammarCompiler:
        """This model's grammar engine (its vocabulary and compiled grammars), made on first use."""
        if self._grammar_compiler is None:
            self._grammar_compiler = GrammarCompiler(self.tokenizer, self.config["vocab_size"])
        return self._grammar_compiler

    def _token_chunks(self, ids: list[int], params: SamplingParams, default_max_tokens: int) -> Iterator[list[int]]:
        """Starts a generation session for `ids` now (the prompt's prefill happens here, so errors
        are raised by the call) and returns an iterator over its tokens, a chunk at a time. The
        session is the model's current one until the next call starts another; reading a
        superseded one raises RuntimeError."""
        config = params.to_core(default_max_tokens)
        with self._session_lock:
            self._session = session = object()
            if params.grammar is None:
                self._engine._begin(ids, config)
                next_chunk = self._engine._next_tokens
            else:
                matcher = self._grammars.matcher(params.grammar)
                steps = constrained_tokens(self._engine, self.tokenizer, matcher, ids, config,
                                           is_current=lambda: self._session is session)
                first = next(steps, None)  # begins the session
                pieces = itertools.chain([first] if first else [], steps)

                def next_chunk() -> list[int]:
                    return next(pieces, [])
        return self._chunks_of(session, next_chunk)

    def _chunks_of(self, session, next_chunk) -> Iterator[list[int]]:
        while True:
            with self._session_lock:
                if self._session is not session:
                    raise RuntimeError("this generation was superseded by another generate/stream/chat call on the "
                                       "same model; finish or discard one stream before starting the next")
                chunk = next_chunk()
            if not chunk:
                return
            yield chunk

    def _pieces(self, ids: list[int], params: SamplingParams, default_max_tokens: int) -> Iterator[tuple[str, list[int]]]:
        """The generation of `ids` as (text, tokens) pieces: the text that may be shown so far
        (held back while it could be the start of a stop string) and the tokens consumed since the
        previous piece. Tokens after the one that completes a stop string are not consumed (the
        server's usage counts these pieces' tokens). The session starts now, as _token_chunks'."""
        matcher = StopMatcher(params.stop)
        chunks = self._token_chunks(ids, params, default_max_tokens)
        return self._text_pieces(matcher, chunks)

    def _text_pieces(self, matcher: StopMatcher, chunks: Iterator[list[int]]) -> Iterator[tuple[str, list[int]]]:
        tok = self.tokenizer
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for chunk in chunks:
            if not matcher.stops:  # nothing to cut: the chunk's text at once
                raw = b"".join(b"" if tok.is_control(t) else tok.token_to_piece(t) for t in chunk)
                yield utf8.decode(raw), chunk
                continue
            texts = []
            for i, t in enumerate(chunk):
                raw = b"" if tok.is_control(t) else tok.token_to_piece(t)
                text, stopped = matcher.feed(utf8.decode(raw))
                texts.append(text)
                if stopped:
                    yield "".join(texts), chunk[:i + 1]
                    return
            yield "".join(texts), chunk
        text, _ = matcher.feed(utf8.decode(b"", final=True))
        yield text + matcher.flush(), []
