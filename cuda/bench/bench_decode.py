"""Decode/prefill throughput of the CUDA backend on a random-weight GGUF of a given shape.

    python cuda/bench/bench_decode.py --shape llama-3.2-1b --dtype Q4_0 --vocab-gguf VOCAB.gguf

The GGUF is synthesized with gguf-py: random quant blocks (random nibbles, scales ~N(0.02/8)),
norms of ones, and the tokenizer metadata copied from VOCAB.gguf (the loader needs a real vocab).
Prints tg (chain decode, tokens/s) and pp (prefill, tokens/s) medians, llama-bench style.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

SHAPES = {
    # dim, layers, heads, kv heads, head_dim, ffn, vocab (taken from the vocab file), tied
    "llama-3.2-1b": dict(dim=2048, layers=16, heads=32, kv=8, hd=64, ffn=8192, tied=True, theta=500000.0),
    "llama-3.1-8b": dict(dim=4096, layers=32, heads=32, kv=8, hd=128, ffn=14336, tied=False, theta=500000.0),
    "qwen3-0.6b-ish": dict(dim=1024, layers=28, heads=16, kv=8, hd=128, ffn=3072, tied=True, theta=1000000.0),
    "smollm2-135m": dict(dim=576, layers=30, heads=9, kv=3, hd=64, ffn=1536, tied=True, theta=100000.0),
}


def random_matrix(rng, rows, cols, qtype):
    import gguf
    from gguf import GGMLQuantizationType as QT

    if qtype == QT.F16:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16), None
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = cols // block
    raw = rng.integers(0, 256, size=(rows, n_blocks, nbytes), dtype=np.uint8)
    # Where each format keeps its f16 factors (d; Q4_1 m; the K-quants' d, dmin), set to sane values
    # so that random weights make finite activations (speed does not depend on them).
    d_at = {QT.Q4_K: (0, 2), QT.Q5_K: (0, 2), QT.Q6_K: (208,)}.get(qtype, (0,))
    for at in d_at:
        raw[:, :, at:at + 2] = np.full((rows, n_blocks), 0.02 / 256 if block == 256 else 0.02 / 8,
                                       dtype=np.float16).view(np.uint8).reshape(rows, n_blocks, 2)
    if qtype == QT.Q4_1:
        raw[:, :, 2:4] = np.full((rows, n_blocks), -0.02, dtype=np.float16).view(np.uint8).reshape(rows, n_blocks, 2)
    return raw.reshape(rows, n_blocks * nbytes), qtype


def write_model(path: Path, shape: str, dtype: str, vocab_gguf: Path, v_dtype: str | None = None):
    import gguf
    from gguf import GGMLQuantizationType as QT, GGUFReader, GGUFValueType, GGUFWriter

    s = SHAPES[shape]
    qtype = getattr(QT, dtype)
    rng = np.random.default_rng(0)
    w = GGUFWriter(str(path), "llama")
    w.add_name(f"random-{shape}-{dtype}")
    w.add_context_length(131072)
    w.add_embedding_length(s["dim"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_rope_dimension_count(s["hd"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_key_length(s["hd"])
    w.add_value_length(s["hd"])
    w.add_rope_freq_base(s["theta"])
    w.add_layer_norm_rms_eps(1e-5)
    reader = GGUFReader(str(vocab_gguf))
    vocab = None
    for key, fld in reader.fields.items():
        if key.startswith("tokenizer."):
            vtype = fld.types[0]
            w.add_key_value(key, fld.contents(), vtype, sub_type=fld.types[-1] if vtype == GGUFValueType.ARRAY else None)
            if key == "tokenizer.ggml.tokens":
                vocab = len(fld.contents())
    w.add_vocab_size(vocab)

    def add(name, rows, cols, qt=qtype):
        arr, raw = random_matrix(rng, rows, cols, qt)
        if raw is None:
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=raw)

    d, hd, ffn = s["dim"], s["hd"], s["ffn"]
    add("token_embd.weight", vocab, d)
    if not s["tied"]:
        add("output.weight", vocab, d)
    w.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    for l in range(s["layers"]):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", np.ones(d, dtype=np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(d, dtype=np.float32))
        add(p + "attn_q.weight", s["heads"] * hd, d)
        add(p + "attn_k.weight", s["kv"] * hd, d)
        add(p + "attn_v.weight", s["kv"] * hd, d, getattr(QT, v_dtype) if v_dtype else qtype)
        add(p + "attn_output.weight", d, s["heads"] * hd)
        add(p + "ffn_gate.weight", ffn, d)
        add(p + "ffn_up.weight", ffn, d)
        add(p + "ffn_down.weight", d, ffn)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="llama-3.2-1b", choices=list(SHAPES))
    ap.add_argument("--dtype", default="Q4_0")
    ap.add_argument("--v-dtype", default=None, help="attn_v's dtype, where it differs (as llama.cpp's mixes: "
                    "Q6_K in Q4_K_M files, Q5_K in IQ4_XS ones)")
    ap.add_argument("--vocab-gguf", required=True, type=Path)
    ap.add_argument("--out-dir", default="/tmp", type=Path)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("-d", "--depth", type=int, default=0, help="tokens already in the context when tg starts "
                    "(as llama-bench -d); 0: a 16-token prompt")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--kv-cache-dtype", default="f16", choices=["f16", "q8_0"])
    ap.add_argument("--sampling", default="", help="also time sampled decode against greedy, both through "
                    "generate_tokens, e.g. 'temperature=0.8,top_k=40,top_p=0.95'")
    a = ap.parse_args()

    import akunu

    path = a.out_dir / f"random-{a.shape}-{a.dtype}{'-v' + a.v_dtype if a.v_dtype else ''}.gguf"
    if not path.exists():
        t0 = time.time()
        write_model(path, a.shape, a.dtype, a.vocab_gguf, a.v_dtype)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB) in {time.time() - t0:.1f}s", flush=True)
    t0 = time.time()
    # Room for the depth's context, then the timed test (tg: chain decode; pp: its own prefill).
    ctx = max(4096, max(a.depth, 16) + a.n + a.p + 64)
    m = akunu.Model(str(path), backend=a.backend, context_length=ctx, kv_cache_dtype=a.kv_cache_dtype)
    print(f"loaded on {m.backend} ({m.device_name}) in {time.time() - t0:.1f}s", flush=True)
    engine = m._engine  # the token-level engine: prefill, chain decode, profiling

    prompt = list(np.random.default_rng(1).integers(100, 20000, size=max(a.p, a.depth, 16)))
    prompt = [int(t) for t in prompt]

    def tg_once():
        engine.reset()
        first = engine.prefill(prompt[:max(a.depth, 16)])
        t = time.perf_counter()
        engine.chain_decode(first, a.n)
        return a.n / (time.perf_counter() - t)

    def pp_once():
        engine.reset()
        t = time.perf_counter()
        engine.prefill(prompt[:a.p])
        return a.p / (time.perf_counter() - t)

    tg_once(), pp_once()  # warm-up: graph capture, first-touch
    tg = [tg_once() for _ in range(a.r)]
    pp = [pp_once() for _ in range(a.r)]
    depth = f"@d{a.depth}" if a.depth else ""
    kv = f" kv={a.kv_cache_dtype}" if a.kv_cache_dtype != "f16" else ""
    dtype = a.dtype + (f" v={a.v_dtype}" if a.v_dtype else "")
    print(f"RESULT {a.shape} {dtype}{kv} backend={a.backend} tg{a.n}{depth} {statistics.median(tg):.1f} t/s "
          f"(min {min(tg):.1f} max {max(tg):.1f})  pp{a.p} {statistics.median(pp):.1f} t/s", flush=True)
    if a.sampling:
        kw = {k: (int(v) if k in ("top_k", "repeat_last_n", "seed") else float(v))
              for k, v in (item.split("=") for item in a.sampling.split(","))}
        kw.setdefault("seed", 1)

        def generate_once(**sampling):
            # Decode t/s from the session's stats: steps run / time in chained replays (an
            # end-of-generation token drawn by the random model would end it early: count steps).
            m.generate_tokens(prompt[:16], max_tokens=a.n + 1, **sampling)
            return m.stats.decode_tokens_per_sec, m.stats.decode_steps

        generate_once(), generate_once(**kw)  # warm-up: the sampled table's graphs
        greedy, sampled = [], []
        for _ in range(a.r):  # alternately, so drift hits both
            greedy.append(generate_once())
            sampled.append(generate_once(**kw))
        g = statistics.median(t for t, _ in greedy)
        s_ = statistics.median(t for t, _ in sampled)
        print(f"RESULT-SAMPLED {a.shape} {a.dtype} tg{a.n} greedy {g:.1f} t/s, sampled ({a.sampling}) {s_:.1f} t/s "
              f"= {s_ / g:.3f}x; decode steps {[n for _, n in sampled]}", flush=True)
    if a.profile:
        engine.reset()
        first = engine.prefill(prompt[:max(a.depth, 16)])  # the decode step profiled at the test's depth
        rows = engine.profile_decode_step(first)
        by_kernel = {}
        for label, kernel, ms in rows:
            by_kernel[kernel] = by_kernel.get(kernel, 0.0) + ms
        total = sum(by_kernel.values())
        print(f"profile (eager, one token{depth}): total {total:.3f} ms over {len(rows)} commands")
        for k, v in sorted(by_kernel.items(), key=lambda kv: -kv[1]):
            print(f"  {k:28s} {v:8.3f} ms")


if __name__ == "__main__":
    sys.exit(main())
