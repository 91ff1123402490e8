"""Grammar engines for structured output (issue 34): llguidance against xgrammar on the JSON Schema
corpus (tests/data/json_schemas.json), over akunu's tokenizers.

    python benchmarks/grammar_engines.py [--xgrammar-path DIR] [--tokenizers smollm2-gguf,llama-bpe-gguf,llama-bpe-hf]
                                         [--seeds 3] [--reps 3] [--out FILE.md] [--json FILE.json]

xgrammar pulls in torch, transformers and triton, so it is not an akunu dependency: install it into a
folder of its own (`pip install --no-deps --target /tmp/xg xgrammar apache-tvm-ffi`; torch,
transformers, pydantic and numpy come from the environment, triton is only needed for its GPU kernels)
and pass that folder with --xgrammar-path or $AKUNU_XGRAMMAR_PATH. Without it only llguidance runs.

Tokenizers:
- smollm2-gguf: SmolLM2-135M's GGUF vocabulary (49152) through akunu.Tokenizer, the token bytes as
  akunu.grammar_tokenizer builds them, handed to both engines (xgrammar as VocabType.RAW: the bytes
  are already decoded);
- llama-bpe-gguf: llama.cpp's Llama 3 vocab-only GGUF (128256) the same way;
- llama-bpe-hf: the same vocabulary as a Hugging Face fast tokenizer (transformers converts the GGUF;
  no hub), through each engine's own Hugging Face path (llguidance.hf.from_tokenizer,
  xgrammar.TokenizerInfo.from_huggingface).

What is measured, per tokenizer and engine (one process, engines one after the other):
- init: from the tokenizer object to a ready engine (llguidance: grammar_tokenizer /
  from_tokenizer; xgrammar: token bytes + TokenizerInfo + GrammarCompiler);
- compile: per schema, from the schema to a matcher ready for its first mask (llguidance:
  grammar_from_json_schema + LLMatcher; xgrammar: compile_json_schema with its cache off +
  GrammarMatcher), median of --reps; mean / p50 / p99 / max over the corpus; "first mask" is the
  first mask's time after that (llguidance builds its lexer states lazily, xgrammar ahead of time);
- mask: every mask computation along seeded random walks (tests/json_schema_walk.py: the same seeds
  and the same choice rule for both engines, so equal masks give equal walks), into a numpy int32
  bitmask; consume: feeding the chosen token back;
- correctness: walk outputs that fail jsonschema (formats checked), walks that end without an
  end-of-generation token, corpus schemas each engine refuses, and the 18 schemas of
  json_schemas_unsupported.json (features llguidance refuses): how many each engine accepts, and
  how many walk outputs on those break the schema (a feature ignored without a word).

Both engines get akunu's JSON layout: no free whitespace, ", " and ": " separators; JSON Schema's
own semantics for unlisted properties (llguidance's default; xgrammar strict_mode=False). Mask times
move with the machine's load; compare engines within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import numpy as np  # noqa: E402

from json_schema_walk import (LLGUIDANCE_JSON_OPTIONS, LLGuidanceMatcher, Vocabulary,  # noqa: E402
                              known_format_leniency, load_corpus, load_unsupported, validator, walk_with_retry)

TOKENIZERS = ["smollm2-gguf", "llama-bpe-gguf", "llama-bpe-hf"]


# --- tokenizers ------------------------------------------------------------------------------------

class Source:
    """One tokenizer as both engines see it: the akunu tokenizer or the HF one, and the walk's
    vocabulary (token bytes, end-of-generation ids)."""

    def __init__(self, name: str):
        import akunu

        self.name = name
        self.akunu_tokenizer = self.hf_tokenizer = None
        if name == "smollm2-gguf":
            self.akunu_tokenizer = akunu.Tokenizer.from_file(str(akunu.default_model_path()))
        elif name == "llama-bpe-gguf":
            from paths import tokenizer_testdata
            self.akunu_tokenizer = akunu.Tokenizer.from_file(str(tokenizer_testdata() / "ggml-vocab-llama-bpe.gguf"))
        elif name == "llama-bpe-hf":
            from paths import tokenizer_testdata
            from transformers import AutoTokenizer
            self.hf_tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_testdata()), gguf_file="ggml-vocab-llama-bpe.gguf")
        else:
            raise SystemExit(f"unknown tokenizer {name}; known: {', '.join(TOKENIZERS)}")
        if self.akunu_tokenizer is not None:
            from akunu.grammar_tokenizer import VocabularyView, end_of_generation_ids
            self.n_vocab = self.akunu_tokenizer.vocab_size
            self.vocab = Vocabulary(VocabularyView(self.akunu_tokenizer, self.n_vocab).tokens,
                                    end_of_generation_ids(self.akunu_tokenizer))
        else:
            import llguidance.hf
            self.n_vocab = len(self.hf_tokenizer)
            llt = llguidance.hf.from_tokenizer(self.hf_tokenizer)
            tokens = [b"" if llt.is_special_token(i) else llt.decode_bytes([i]) for i in range(self.n_vocab)]
            self.vocab = Vocabulary(tokens, [self.hf_tokenizer.eos_token_id])


# --- engines ---------------------------------------------------------------------------------------

class NativeStderr:
    """Captures what native code writes to file descriptor 2 (xgrammar logs its warnings there, e.g.
    a keyword it ignores) while the block runs."""

    def __enter__(self):
        import tempfile
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", "replace")
        self._file.close()
        return False


class LLGuidance:
    name = "llguidance"

    def __init__(self, src: Source):
        import llguidance
        self.version = llguidance.__version__ if hasattr(llguidance, "__version__") else _dist_version("llguidance")
        t0 = time.perf_counter()
        if src.akunu_tokenizer is not None:
            from akunu.grammar_tokenizer import grammar_tokenizer
            self.llt = grammar_tokenizer(src.akunu_tokenizer, src.n_vocab)
        else:
            import llguidance.hf
            self.llt = llguidance.hf.from_tokenizer(src.hf_tokenizer)
        self.init_s = time.perf_counter() - t0

    def compile(self, schema: dict):
        """(grammar, warnings); raises ValueError if refused."""
        import llguidance
        grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=LLGUIDANCE_JSON_OPTIONS)
        m = LLGuidanceMatcher(self.llt, grammar)  # the matcher build is where llguidance compiles
        return grammar, m.m.get_grammar_warnings()

    def matcher(self, compiled):
        return LLGuidanceMatcher(self.llt, compiled)


class XGrammarMatcher:
    def __init__(self, compiled):
        import xgrammar
        self.m = xgrammar.GrammarMatcher(compiled)
        self._rows = None

    def fill(self, mask: np.ndarray) -> None:
        if self._rows is None or self._rows.base is not mask:
            self._rows = mask.reshape(1, -1)  # xgrammar fills row `index` of a 2-D bitmask
        self.m.fill_next_token_bitmask(self._rows, 0)

    def consume(self, token: int) -> bool:
        return self.m.accept_token(token)


class XGrammar:
    name = "xgrammar"

    def __init__(self, src: Source):
        import xgrammar
        self.version = _dist_version("xgrammar")
        t0 = time.perf_counter()
        if src.akunu_tokenizer is not None:
            from akunu.grammar_tokenizer import VocabularyView, end_of_generation_ids
            tokens = VocabularyView(src.akunu_tokenizer, src.n_vocab).tokens
            info = xgrammar.TokenizerInfo(tokens, xgrammar.VocabType.RAW, vocab_size=src.n_vocab,
                                          stop_token_ids=end_of_generation_ids(src.akunu_tokenizer))
        else:
            info = xgrammar.TokenizerInfo.from_huggingface(src.hf_tokenizer)
        # Cache off: each schema is compiled for real in every repetition.
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=os.cpu_count() or 1, cache_enabled=False)
        self.init_s = time.perf_counter() - t0

    def compile(self, schema: dict):
        """(compiled grammar, warnings); raises if refused."""
        import xgrammar
        with NativeStderr() as err:
            compiled = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(", ", ": "),
                                                         strict_mode=False)
            xgrammar.GrammarMatcher(compiled)
        # "[time] file.cc:line: Warning: text" -> "text"
        warnings = [ln.split("Warning: ", 1)[1] for ln in err.text.splitlines() if "Warning: " in ln]
        return compiled, warnings

    def matcher(self, compiled):
        return XGrammarMatcher(compiled)


def _dist_version(name: str) -> str:
    from importlib.metadata import version
    try:
        return version(name)
    except Exception:
        return "?"


# --- measuring -------------------------------------------------------------------------------------

def output_errors(text: bytes, v) -> tuple[list[str], bool]:
    """(errors, whether every one is a known format leniency: a leap second at any time, Feb 29)."""
    try:
        instance = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"not JSON: {e}"], False
    errors = list(v.iter_errors(instance))
    lenient = all(e.validator == "format" and known_format_leniency(e.instance, e.schema["format"]) for e in errors)
    return [f"{e.json_path}: {e.message}"[:160] for e in errors], bool(errors) and lenient


def snippet(text: bytes) -> str:
    """Output text for the report: control characters escaped, no backticks."""
    s = text.decode("utf-8", "backslashreplace")[:200]
    return "".join(c if c >= " " else f"\\x{ord(c):02x}" for c in s).replace("`", "'")


def run_engine(engine, src: Source, corpus, unsupported, seeds, reps) -> dict:
    compile_s, first_mask_s, mask_s, consume_s = [], [], [], []
    refused, warned, invalid, bad_ends, walks = {}, {}, [], [], 0
    for entry in corpus:
        times, compiled = [], None
        for _ in range(reps):
            t0 = time.perf_counter()
            try:
                compiled, warnings = engine.compile(entry["schema"])
            except Exception as e:  # noqa: BLE001 - a refusal, whatever the engine raises
                refused[entry["name"]] = str(e).splitlines()[0][:160]
                break
            times.append(time.perf_counter() - t0)
        if entry["name"] in refused:
            continue
        if warnings:
            warned[entry["name"]] = sorted(set(warnings))
        compile_s.append(statistics.median(times))
        m = engine.matcher(compiled)
        mask = np.zeros(src.vocab.words, dtype=np.int32)
        t0 = time.perf_counter()
        m.fill(mask)
        first_mask_s.append(time.perf_counter() - t0)
        v = validator(entry["schema"])
        for seed in seeds:
            r = walk_with_retry(lambda: engine.matcher(compiled), src.vocab, seed)
            walks += 1
            mask_s += r.mask_s
            consume_s += r.consume_s
            if r.end != "eos":
                bad_ends.append((entry["name"], seed, r.end))
                continue
            errors, lenient = output_errors(r.text, v)
            if errors:
                invalid.append((entry["name"], seed, errors[0], snippet(r.text), lenient))
    # Features llguidance refuses: does the other engine accept them, and then keep to them?
    unsup_accepted, unsup_invalid = {}, []
    for entry in unsupported:
        try:
            compiled, warnings = engine.compile(entry["schema"])
        except Exception:  # noqa: BLE001
            continue
        unsup_accepted[entry["name"]] = sorted(set(warnings))
        v = validator(entry["schema"])
        for seed in seeds:
            r = walk_with_retry(lambda: engine.matcher(compiled), src.vocab, seed)
            errors = output_errors(r.text, v)[0] if r.end == "eos" else [f"walk ended: {r.end}"]
            if errors:
                unsup_invalid.append((entry["name"], seed, errors[0], snippet(r.text)))
    return {"engine": engine.name, "version": engine.version, "tokenizer": src.name, "n_vocab": src.n_vocab,
            "init_s": engine.init_s, "compile_s": compile_s, "first_mask_s": first_mask_s,
            "mask_s": mask_s, "consume_s": consume_s, "walks": walks, "bad_ends": bad_ends,
            "invalid": invalid, "refused": refused, "warned": warned, "unsupported_accepted": unsup_accepted,
            "unsupported_invalid": unsup_invalid}


# --- report ----------------------------------------------------------------------------------------

def pct(xs, q):
    return float(np.percentile(xs, q)) if xs else float("nan")


def cpu_description() -> str:
    name = family = model = "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")
        info = Path("/proc/cpuinfo").read_text()
        family = next(ln.split(":")[1].strip() for ln in info.splitlines() if ln.startswith("cpu family"))
        model = next(ln.split(":")[1].strip() for ln in info.splitlines() if ln.startswith("model\t"))
    except Exception:  # noqa: BLE001 - description only
        pass
    return f"{name} (family {family}, model {model}), {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def markdown(results: list[dict], command: str, machine: str, n_corpus: int, n_unsup: int) -> str:
    walks_per_schema = len(results[0]["mask_s"]) and results[0]["walks"] // max(1, n_corpus - len(results[0]["refused"]))
    lines = [f"Machine: {machine}.", f"Command: `{command}`",
             f"Corpus: {n_corpus} schemas (tests/data/json_schemas.json), {walks_per_schema} seeded walks each; "
             "mask times over every step of every walk.", ""]
    lines += ["| tokenizer | engine | init s | compile mean ms | p50 | p99 | max | first mask us | mask mean us | p50 | p99 | consume mean us | masks |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        c, fm, m, cs = r["compile_s"], r["first_mask_s"], r["mask_s"], r["consume_s"]
        lines.append(f"| {r['tokenizer']} ({r['n_vocab']}) | {r['engine']} {r['version']} | {r['init_s']:.2f} | "
                     f"{1e3 * np.mean(c):.2f} | {1e3 * pct(c, 50):.2f} | {1e3 * pct(c, 99):.1f} | {1e3 * max(c):.1f} | "
                     f"{1e6 * np.mean(fm):.0f} | {1e6 * np.mean(m):.1f} | {1e6 * pct(m, 50):.1f} | {1e6 * pct(m, 99):.1f} | "
                     f"{1e6 * np.mean(cs):.1f} | {len(m)} |")
    lines += ["", "| tokenizer | engine | walks | invalid outputs | of which leap second / Feb 29 only | walks not ended by EOS | corpus schemas refused | "
                  f"corpus schemas with warnings | unsupported accepted (of {n_unsup}) | silently (no warning) | "
                  "invalid outputs on those (schemas) |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        ua = r["unsupported_accepted"]
        bad_unsup = {name for name, *_ in r["unsupported_invalid"]}
        lenient = sum(1 for *_, known in r["invalid"] if known)
        lines.append(f"| {r['tokenizer']} | {r['engine']} | {r['walks']} | {len(r['invalid'])} | {lenient} | {len(r['bad_ends'])} | "
                     f"{len(r['refused'])} | {len(r['warned'])} | {len(ua)} | {sum(1 for w in ua.values() if not w)} | "
                     f"{len(r['unsupported_invalid'])} ({len(bad_unsup)}) |")
    details = []
    for r in results:
        head = f"{r['engine']} on {r['tokenizer']}"
        for name, msg in r["refused"].items():
            details.append(f"- {head}: refuses `{name}`: {msg}")
        for name, seed, err, text, _ in r["invalid"]:
            details.append(f"- {head}: invalid output, `{name}` seed {seed}: {err} (`{text}`)")
        for name, seed, end in r["bad_ends"]:
            details.append(f"- {head}: walk `{name}` seed {seed} ended: {end}")
        for name, warnings in r["warned"].items():
            details.append(f"- {head}: `{name}` compiles with warnings: {'; '.join(warnings)}")
        for name, warnings in r["unsupported_accepted"].items():
            details.append(f"- {head}: accepts `{name}` (refused by llguidance), "
                           + (f"warning: {'; '.join(warnings)}" if warnings else "without a warning"))
        for name, seed, err, text in r["unsupported_invalid"]:
            details.append(f"- {head}: output breaks `{name}` seed {seed}: {err} (`{text}`)")
    if details:
        lines += ["", "Details:", *details]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--xgrammar-path", default=os.environ.get("AKUNU_XGRAMMAR_PATH"),
                    help="folder xgrammar was installed into with pip --target ($AKUNU_XGRAMMAR_PATH)")
    ap.add_argument("--tokenizers", default=",".join(TOKENIZERS))
    ap.add_argument("--engines", default="llguidance,xgrammar")
    ap.add_argument("--seeds", type=int, default=3, help="random walks per schema")
    ap.add_argument("--reps", type=int, default=3, help="compilations per schema (the median counts)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N corpus schemas (smoke runs)")
    ap.add_argument("--out", type=Path, help="also write the markdown here")
    ap.add_argument("--json", type=Path, help="write every measurement here")
    ap.add_argument("--from-json", type=Path, help="only print the report of an earlier --json file")
    args = ap.parse_args()
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        report = markdown(saved["results"], saved["command"], saved["machine"], saved["n_corpus"], saved["n_unsupported"])
        print(report)
        if args.out:
            args.out.write_text(report)
        return

    engines = args.engines.split(",")
    if "xgrammar" in engines:
        if args.xgrammar_path:
            sys.path.insert(0, args.xgrammar_path)
        try:
            t0 = time.perf_counter()
            import xgrammar  # noqa: F401
            print(f"import xgrammar: {time.perf_counter() - t0:.2f} s (loads torch and transformers)", file=sys.stderr)
        except ImportError as e:
            print(f"xgrammar not importable ({e}); pass --xgrammar-path. Running llguidance only.", file=sys.stderr)
            engines.remove("xgrammar")
    corpus, unsupported = load_corpus(), load_unsupported()
    if args.limit:
        corpus = corpus[: args.limit]
    seeds = list(range(args.seeds))
    results = []
    for tok_name in args.tokenizers.split(","):
        src = Source(tok_name)
        for eng_name in engines:
            engine = {"llguidance": LLGuidance, "xgrammar": XGrammar}[eng_name](src)
            t0 = time.perf_counter()
            results.append(run_engine(engine, src, corpus, unsupported, seeds, args.reps))
            print(f"{tok_name} / {eng_name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    command = "python benchmarks/grammar_engines.py " + " ".join(sys.argv[1:])
    machine = f"{cpu_description()}; Python {platform.python_version()}"
    report = markdown(results, command, machine, len(corpus), len(unsupported))
    print(report)
    if args.out:
        args.out.write_text(report)
    if args.json:
        args.json.write_text(json.dumps({"command": command, "machine": machine, "n_corpus": len(corpus),
                                         "n_unsupported": len(unsupported), "results": results}, indent=1))


if __name__ == "__main__":
    main()
