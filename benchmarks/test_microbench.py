"""Microbenchmarks of the hot CPU kernels, timed through the real engine path.

    python -m pytest benchmarks/test_microbench.py --benchmark-only

Each kernel runs as a one-command dispatch table on its own CpuDevice (akunu._testing.bench_*_setup, in
src/python/bind_testing_bench.cpp): built with CmdBuilder exactly as the table builder builds it (for quantized
weights the activation-quantization command included) and replayed with encode_dispatch_table.

* GEMV (M = 1) per weight dtype on a 16384 x 4096 matrix (F16: 128 MiB, Q8_0: 68 MiB, Q4_0: 36 MiB, Q4_1:
  40 MiB, Q4_K: 36 MiB, Q6_K: 52 MiB; Q2_K and Q3_K with 32768 rows: 42 / 55 MiB; all larger than this
  machine's 32 MiB L3), in GB/s of weight bytes read per second, and as a
  percentage of the machine's memory copy bandwidth measured with numpy (same thread count, 256 MiB
  buffers) in pairs: PAIRED_ROUNDS times one GEMV, then one copy right after it; the percentage is the
  median of the pairs' ratios (this VM's memory bandwidth drifts by tens of percent within a minute, so
  a copy measured once per run made the percentage swing from 66 % to 122 % between runs). Copy
  bandwidth is reported in two conventions:
    - "copy"      bytes copied per second (each byte is read once and written once);
    - "copy r+w"  read + write traffic per second = 2 x copy (STREAM's convention).
  The headline percentage (`pct_of_copy_bw`) divides the GEMV's weight-read rate by the **copy r+w**
  figure, i.e. it compares memory traffic with memory traffic; the percentage against bytes copied/s is
  printed and stored too (`pct_of_copy_bytes`), and it is twice as large. The run's best copy (best
  of 7) heads the summary.
* Decode attention over a 4096-position F16 KV cache (Llama-3.1-8B heads: 32 q heads, 8 kv heads, head_dim
  128), in GB/s of KV cache read.
* RMSNorm of one row (decode) and of 512 rows (prefill) of dim 4096.

Assertions are about correctness only (each kernel's output against numpy); speed goes into the benchmark's
extra_info and into the summary printed at the end (benchmarks/conftest.py). Threads: $AKUNU_BENCH_THREADS,
else all cores.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from akunu import _testing

THREADS = int(os.environ.get("AKUNU_BENCH_THREADS", "0")) or (os.cpu_count() or 1)
GEMV_N, GEMV_K = 16384, 4096
PAIRED_ROUNDS = 15  # GEMV + copy pairs behind the percentage of copy bandwidth
SUMMARY: list[str] = []  # printed by conftest.py's pytest_terminal_summary


def _llc_bytes() -> int:
    try:
        return os.sysconf("SC_LEVEL3_CACHE_SIZE") or 0
    except (ValueError, OSError):
        return 0


class CopyTimer:
    """numpy memory copy with THREADS threads over 256 MiB buffers; each call times one copy."""

    N_BYTES = 256 << 20

    def __init__(self):
        self.src = np.ones(self.N_BYTES // 8, dtype=np.float64)
        self.dst = np.empty_like(self.src)
        parts = np.array_split(np.arange(self.src.size), THREADS)
        self.bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts if p.size]
        self.pool = ThreadPoolExecutor(THREADS)
        self.seconds()  # page in

    def _copy(self, b):
        np.copyto(self.dst[b[0]:b[1]], self.src[b[0]:b[1]])  # numpy releases the GIL for plain copies

    def seconds(self) -> float:
        t0 = time.perf_counter()
        list(self.pool.map(self._copy, self.bounds))
        return time.perf_counter() - t0

    def rw_GBps(self) -> float:
        """Read + write traffic per second of one copy (2 x bytes copied, STREAM's convention)."""
        return 2 * self.N_BYTES / self.seconds() / 1e9


@pytest.fixture(scope="session")
def copy_timer() -> CopyTimer:
    timer = CopyTimer()
    yield timer
    timer.pool.shutdown()


@pytest.fixture(scope="session")
def copy_bandwidth(copy_timer) -> dict:
    """The session's best copy bandwidth (best of 7), for the summary."""
    rw = max(copy_timer.rw_GBps() for _ in range(7))
    bw = {"copy_GBps": rw / 2, "copy_rw_GBps": rw, "threads": THREADS}
    SUMMARY.append(f"memory copy bandwidth ({THREADS} threads, numpy, 256 MiB): {bw['copy_GBps']:.2f} GB/s copied "
                   f"= {bw['copy_rw_GBps']:.2f} GB/s read+write traffic (best of 7)")
    return bw


def _time(benchmark, kb, iters: int, rounds: int) -> dict:
    """pytest-benchmark times kb.run(iters) calls; returns seconds per replay (median and best)."""
    benchmark.pedantic(kb.run, args=(iters, False), rounds=rounds, iterations=1, warmup_rounds=1)
    st = benchmark.stats.stats
    return {"median_s": st.median / iters, "min_s": st.min / iters}


def _floats(kb, name) -> np.ndarray:
    return np.frombuffer(kb.buffer(name), dtype=np.float32)


def _halves(kb, name) -> np.ndarray:
    return np.frombuffer(kb.buffer(name), dtype=np.float16).astype(np.float32)


# --- GEMV ---------------------------------------------------------------------------------------


# Q2_K / Q3_K (2.6 / 3.4 bits per weight) take twice the rows, to stay larger than a 32 MiB L3.
GEMV_ROWS_FACTOR = {"Q2_K": 2, "Q3_K": 2}
GEMV_DTYPES = ["F16", "Q8_0", "Q4_0", "Q4_1",
               "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"]  # (group-scaled: random blocks)


@pytest.mark.parametrize("dtype", GEMV_DTYPES)
def test_gemv(benchmark, copy_bandwidth, copy_timer, dtype):
    n_rows = GEMV_N * GEMV_ROWS_FACTOR.get(dtype, 1)
    kb = _testing.bench_gemm_setup(dtype, n_rows, GEMV_K, 1, THREADS, 1)
    weight_bytes = kb.bytes_read
    llc = _llc_bytes()
    assert llc == 0 or weight_bytes > llc, "the matrix must not fit the last-level cache"

    # Correctness: the engine's output against numpy on the dequantized weights.
    kb.run(1)
    y = _floats(kb, "y")
    w = np.asarray(_testing.dequantize(dtype, kb.buffer("w"), n_rows * GEMV_K)).reshape(n_rows, GEMV_K)
    x = _floats(kb, "x")
    ref = w.astype(np.float64) @ x.astype(np.float64)
    err = np.abs(y - ref).max() / np.abs(ref).max()
    del w
    assert err < 2e-3, f"{dtype} GEMV disagrees with numpy: max relative error {err:.2e}"

    t = _time(benchmark, kb, iters=1, rounds=30)
    gbps = weight_bytes / t["median_s"] / 1e9
    # This VM's memory bandwidth drifts by tens of percent within a minute, so the percentage pairs
    # each GEMV with a copy timed right after it and takes the median of the rounds' ratios.
    ratios = []
    for _ in range(PAIRED_ROUNDS):
        t0 = time.perf_counter()
        kb.run(1, False)
        gemv_gbps = weight_bytes / (time.perf_counter() - t0) / 1e9
        ratios.append(gemv_gbps / copy_timer.rw_GBps())
    pct = 100 * statistics.median(ratios)
    benchmark.extra_info.update({
        "kernels": list(kb.kernels), "threads": THREADS, "shape": [n_rows, GEMV_K], "weight_bytes": weight_bytes,
        "seconds_per_gemv_median": t["median_s"], "seconds_per_gemv_min": t["min_s"],
        "GBps_weights": gbps, "GBps_weights_best": weight_bytes / t["min_s"] / 1e9,
        "copy_GBps_best": copy_bandwidth["copy_GBps"], "copy_rw_GBps_best": copy_bandwidth["copy_rw_GBps"],
        "pct_of_copy_bw": pct, "pct_of_copy_bytes": 2 * pct,
        "pct_basis": f"median over {PAIRED_ROUNDS} rounds of (GEMV weight bytes/s) / (copy read+write traffic/s), "
                     "the copy timed right after the GEMV",
    })
    SUMMARY.append(f"GEMV {dtype:<6} {n_rows}x{GEMV_K} ({weight_bytes / 2**20:.0f} MiB): {t['median_s'] * 1e3:7.2f} ms = "
                   f"{gbps:6.2f} GB/s of weights; paired with copies: {pct:5.1f}% of copy r+w bandwidth "
                   f"({2 * pct:5.1f}% of bytes-copied/s)  [{' + '.join(kb.kernels)}]")


# --- attention ------------------------------------------------------------------------------------


def _attention_ref(kb, n_heads, n_kv, hd, kv_len):
    qkv = _floats(kb, "qkv")
    q = qkv[: n_heads * hd].reshape(n_heads, hd)
    k = _halves(kb, "k_cache").reshape(n_kv, kv_len, hd)
    v = _halves(kb, "v_cache").reshape(n_kv, kv_len, hd)
    out = np.empty((n_heads, hd))
    g = n_heads // n_kv
    for h in range(n_heads):
        s = k[h // g] @ q[h] / math.sqrt(hd)
        p = np.exp(s - s.max())
        out[h] = (p / p.sum()) @ v[h // g]
    return out.reshape(-1)


def test_attention_decode(benchmark):
    n_heads, n_kv, hd, kv_len = 32, 8, 128, 4096
    kb = _testing.bench_attention_setup(n_heads, n_kv, hd, kv_len, THREADS, 2)
    kb.run(1)
    ref = _attention_ref(kb, n_heads, n_kv, hd, kv_len)
    out = _floats(kb, "out")
    assert np.abs(out - ref).max() < 1e-3 * max(1.0, np.abs(ref).max()), "attention disagrees with numpy"

    t = _time(benchmark, kb, iters=4, rounds=20)
    gbps = kb.bytes_read / t["median_s"] / 1e9
    benchmark.extra_info.update({"threads": THREADS, "n_heads": n_heads, "n_kv_heads": n_kv, "head_dim": hd,
                                 "kv_len": kv_len, "kv_bytes": kb.bytes_read, "seconds_median": t["median_s"],
                                 "GBps_kv": gbps, "kernels": list(kb.kernels)})
    SUMMARY.append(f"attention decode {n_heads}/{n_kv} heads x {hd}, {kv_len} positions ({kb.bytes_read / 2**20:.0f} MiB "
                   f"F16 KV): {t['median_s'] * 1e3:7.3f} ms = {gbps:6.2f} GB/s of KV")


# --- RMSNorm --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [1, 512])
def test_rmsnorm(benchmark, rows):
    dim = 4096
    kb = _testing.bench_rmsnorm_setup(dim, rows, THREADS, 3)
    kb.run(1)
    x = _floats(kb, "x").reshape(rows, dim).astype(np.float64)
    w = _floats(kb, "weight").astype(np.float64)
    ref = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * w
    assert np.abs(_floats(kb, "out").reshape(rows, dim) - ref).max() < 1e-4 * np.abs(ref).max()

    iters = 200 if rows == 1 else 4
    t = _time(benchmark, kb, iters=iters, rounds=20)
    gbps = kb.bytes_read / t["median_s"] / 1e9
    benchmark.extra_info.update({"threads": THREADS, "dim": dim, "rows": rows, "seconds_median": t["median_s"],
                                 "GBps_x": gbps})
    SUMMARY.append(f"rmsnorm {rows}x{dim}: {t['median_s'] * 1e6:9.2f} us per replay ({gbps:6.2f} GB/s of x)")
