"""Grammar-constrained decoding speed against free decoding (issue 34, acceptance 2), one model, one
prompt, one process:

- free: plain greedy generation (chain decode, many tokens per replay).
- all-allowed: the same generation through the constrained path with a grammar that allows any
  text (regex (?s:.*)): the same tokens, so the ratio is the constrained path's own cost (a mask
  per token computed while the device runs the forward pass, one token per submission).
- schema: a JSON schema with long fixed keys, whose forced tokens are fed as one prefill pass with
  the chosen token (tokens/s counts every output token, chosen or forced).
- compile: per schema of tests/data/json_schemas.json, compiling it for the model's vocabulary
  plus the first mask, and (apart) making the Grammar object (p50 / p99 / max).

    python benchmarks/grammar_decode.py [--model GGUF] [--backend cpu|cuda] [-n 256] [-r 5]

Tokens/s: generated tokens over the decode wall time (prefill end to the last token; for the
constrained path this includes computing every mask); the cases run interleaved, median of -r.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import akunu
from akunu import Grammar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from grammar_checks import chosen_count  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "json_schemas.json"
PROMPT = "Once upon a time, in a small village by the sea, there lived"
ORDER_PROMPT = "Write the order of a customer as JSON."
# Long keys the model never has to choose: the grammar forces them.
ORDER = {"type": "object", "additionalProperties": False,
         "required": ["customer_full_name", "shipping_address_first_line", "shipping_address_postal_code",
                      "number_of_items_ordered", "requested_delivery_instructions"],
         "properties": {"customer_full_name": {"type": "string", "maxLength": 40},
                        "shipping_address_first_line": {"type": "string", "maxLength": 60},
                        "shipping_address_postal_code": {"type": "string", "pattern": "^[0-9]{5}$"},
                        "number_of_items_ordered": {"type": "integer", "minimum": 1, "maximum": 99},
                        "requested_delivery_instructions": {"type": "string", "maxLength": 80}}}


def decode_rate(model) -> float:
    s = model.stats
    return s.generated_tokens * 1000.0 / s.decode_ms if s.decode_ms > 0 else 0.0


def run_cases(model, cases, n, reps):
    """Each case (prompt ids, grammar) once per repetition, interleaved, so that a change in the
    machine's load hits every case alike: [(median tokens/s, tokens, chosen)] per case."""
    rates = [[] for _ in cases]
    outputs = [[] for _ in cases]
    for _ in range(reps):
        for i, (prompt_ids, grammar) in enumerate(cases):
            outputs[i] = model.generate_tokens(prompt_ids, max_tokens=n, grammar=grammar)
            rates[i].append(decode_rate(model))
    return [(statistics.median(r), len(out), chosen_count(model, grammar, out) if grammar else len(out))
            for r, out, (_, grammar) in zip(rates, outputs, cases)]


def compile_times(model) -> tuple[list[float], list[float]]:
    """Per schema of the corpus: making the Grammar (checking the schema, converting it; no model
    involved) and compiling it for the model's vocabulary plus computing the first mask (what a
    request with a new schema waits for), in ms."""
    import numpy as np

    schemas = [entry["schema"] for entry in json.loads(CORPUS.read_text())]
    compiler = model._grammars
    compiler.ll_tokenizer  # built once per model, not per schema
    mask = np.zeros(model._engine.token_mask_words, dtype=np.int32)
    make, first_mask = [], []
    for schema in schemas:
        t0 = time.perf_counter()
        grammar = Grammar.json_schema(schema)
        t1 = time.perf_counter()
        matcher = compiler.matcher(grammar)
        matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)
        t2 = time.perf_counter()
        make.append((t1 - t0) * 1000)
        first_mask.append((t2 - t1) * 1000)
    return make, first_mask


def summary(times: list[float]) -> str:
    q = statistics.quantiles(times, n=100)
    return f"p50 {statistics.median(times):.2f} ms, p99 {q[98]:.2f} ms, max {max(times):.2f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct Q4_1)")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("-n", type=int, default=256, help="tokens per generation")
    ap.add_argument("-r", "--reps", type=int, default=5)
    a = ap.parse_args()
    path = a.model or str(akunu.default_model_path())
    model = akunu.Model(path, backend=a.backend, context_length=2048)
    tok = model.tokenizer
    ids = tok.encode(PROMPT, add_special=True)
    chat_ids = tok.encode(model.format_chat([{"role": "user", "content": ORDER_PROMPT}]), add_special=False,
                          parse_special=True)
    print(f"model {Path(path).name}, backend {model.backend} ({model.device_name}), {platform.processor() or ''}"
          f" akunu {akunu.__version__}, -n {a.n}, median of {a.reps}")
    model.generate_tokens(ids, max_tokens=16)  # warm-up: graphs, caches
    model.generate_tokens(ids, max_tokens=16, grammar=Grammar.regex("(?s:.*)"))

    results = run_cases(model, [(ids, None), (ids, Grammar.regex("(?s:.*)")), (chat_ids, None),
                                (chat_ids, Grammar.json_schema(ORDER))], a.n, a.reps)
    (free, free_tokens, _), (every, every_tokens, every_chosen), (free_chat, free_chat_tokens, _), \
        (schema, schema_tokens, schema_chosen) = results
    print("| case | tokens | chosen by the model (rest forced) | tokens/s | vs free |")
    print("|---|---|---|---|---|")
    print(f"| free (prompt: story) | {free_tokens} | {free_tokens} | {free:.1f} | 1.00x |")
    print(f"| every token allowed (same tokens) | {every_tokens} | {every_chosen} | {every:.1f} | {every / free:.2f}x |")
    print(f"| free (prompt: order chat) | {free_chat_tokens} | {free_chat_tokens} | {free_chat:.1f} | 1.00x |")
    print(f"| JSON schema, long fixed keys | {schema_tokens} | {schema_chosen} | {schema:.1f} | "
          f"{schema / free_chat:.2f}x |")
    make, first_mask = compile_times(model)
    print(f"{len(make)} schemas of {CORPUS.name}: compile for the vocabulary + first mask {summary(first_mask)}; "
          f"making the Grammar (schema check, conversion) {summary(make)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
