"""akunu against llama.cpp, measured in the same run: pp512 and tg128 tokens/s, llama-bench style.

    python benchmarks/compare.py                       # the default model set, 2 threads here, 3 repetitions
    python benchmarks/compare.py --depth 0,4096        # also with 4096 tokens already in the context

For each model both engines load the same GGUF file, each in its own worker process (so neither engine's
threads, allocator or GIL touch the other's measurements), with the same thread count and context size.
After one warm-up of each test, the repetitions run interleaved: akunu pp, llama.cpp pp, akunu tg,
llama.cpp tg, and again (with a short pause between runs so the other engine's spinning threads have gone
to sleep).

  pp<N>  time to process an N-token prompt of random token ids (the same ids for both engines) from an
         empty KV cache, in one call (llama.cpp: llama_decode of llama_batch_get_one with n_batch = n_ubatch
         = 512; akunu: the engine's prefill, i.e. akunu.bench.measure_pp).
  tg<N>  N tokens generated one at a time after a 1-token context. llama.cpp: N single-token llama_decode
         calls with no sampling, as llama-bench; akunu: greedy chain decode (akunu.bench.measure_tg), which
         includes the argmax llama.cpp does not do.
  @ d<D> (--depth) the same tests with D random tokens already in the KV cache (prefilled untimed, the same
         ids for both engines), as llama-bench's -d.

llama.cpp runs through llama-cpp-python's low-level C API (no Python-level sampling, no detokenizing),
flash attention on (llama-bench -fa 1), all layers offloaded with --backend cuda.
Results: a markdown table, a JSON file and a PNG chart in --out (default: benchmarks/results/latest.*).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import models as bench_models  # noqa: E402

# The weight formats people download (llama.cpp's normal mixes), sized for a 2-core CPU: SmolLM2 real (the shipped
# Q4_1 and a Q4_K_M requantized from it), the Llama-3.2-1B shape in the legacy and the K-quant types.
DEFAULT_MODELS = ("smollm2-135m:Q4_1,smollm2-135m:Q4_K_M,"
                  "llama-3.2-1b:Q4_0,llama-3.2-1b:Q8_0,llama-3.2-1b:Q4_K_M,llama-3.2-1b:Q6_K")
PAUSE_S = 0.2  # between runs: lets the idle engine's worker threads stop spinning


def test_name(kind: str, n: int, depth: int) -> str:
    # Exactly akunu.bench.test_name (llama-bench's names): pp512, tg128, pp512 @ d4096.
    return f"{kind}{n}" + (f" @ d{depth}" if depth else "")


def prompt_tokens(n_vocab: int, n: int, seed: int) -> list[int]:
    # Exactly akunu.bench._prompt_tokens, so both engines see the same ids.
    rng = random.Random(seed)
    return [rng.randrange(n_vocab) for _ in range(n)]


# --- workers (one process per engine and model) ---------------------------------------------


class AkunuEngine:
    def __init__(self, path: str, threads: int, ctx: int, backend: str):
        import akunu
        from akunu import bench

        self.bench = bench
        self.model = akunu.Model(path, backend=backend, context_length=ctx, threads=threads)
        self.info = {"engine": "akunu", "version": akunu.__version__, "device": self.model.device_name,
                     "backend": self.model.backend, "n_vocab": self.model.config["vocab_size"]}

    def pp(self, n: int, seed: int, depth: int) -> float:
        return self.bench.measure_pp(self.model, n, seed, depth)

    def tg(self, n: int, depth: int) -> float:
        return self.bench.measure_tg(self.model, n, depth)

    def close(self):
        self.model.close()


class LlamaCppEngine:
    def __init__(self, path: str, threads: int, ctx: int, backend: str):
        import ctypes

        import llama_cpp as L

        self.L, self.ctypes = L, ctypes
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = -1 if backend == "cuda" else 0
        mp.use_mmap = True
        self.model = L.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        cp = L.llama_context_default_params()
        cp.n_ctx = ctx
        cp.n_batch = 512
        cp.n_ubatch = 512
        cp.n_threads = threads
        cp.n_threads_batch = threads
        cp.no_perf = True
        if hasattr(cp, "flash_attn_type"):
            cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_ENABLED
            fa = "on"
        elif hasattr(cp, "flash_attn"):
            cp.flash_attn = True
            fa = "on"
        else:
            fa = "not supported by the binding"
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(vocab)
        self.bos = L.llama_vocab_bos(vocab)
        self.mem = L.llama_get_memory(self.ctx)
        self.info = {"engine": "llama.cpp", "version": f"llama-cpp-python {L.__version__}",
                     "system_info": L.llama_print_system_info().decode(errors="replace").strip(),
                     "gpu_offload": bool(L.llama_supports_gpu_offload()) and backend == "cuda",
                     "flash_attn": fa, "n_batch": 512, "n_ubatch": 512, "n_vocab": self.n_vocab}

    def _decode(self, tokens) -> None:
        arr = (self.L.llama_token * len(tokens))(*tokens)
        rc = self.L.llama_decode(self.ctx, self.L.llama_batch_get_one(arr, len(tokens)))
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def _batches(self, tokens):
        # Pointers into one array of the ids, n_batch (512) at a time, built before any clock starts.
        n = len(tokens)
        arr = (self.L.llama_token * n)(*tokens)
        ptr_t = self.ctypes.POINTER(self.L.llama_token)
        size = self.ctypes.sizeof(self.L.llama_token)
        return arr, [(self.ctypes.cast(self.ctypes.addressof(arr) + size * i, ptr_t), min(512, n - i))
                     for i in range(0, n, 512)]

    def _run_batches(self, chunks) -> None:
        for ptr, m in chunks:
            rc = self.L.llama_decode(self.ctx, self.L.llama_batch_get_one(ptr, m))
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
        self.L.llama_synchronize(self.ctx)

    def _fill_context(self, depth: int, seed: int) -> None:
        # As akunu.bench._fill_context: the same ids, untimed.
        self.L.llama_memory_clear(self.mem, True)
        if depth > 0:
            _arr, chunks = self._batches(prompt_tokens(self.n_vocab, depth, seed))
            self._run_batches(chunks)

    def pp(self, n: int, seed: int, depth: int) -> float:
        self._fill_context(depth, seed + 1_000_003)
        _arr, chunks = self._batches(prompt_tokens(self.n_vocab, n, seed))
        t0 = time.perf_counter()
        self._run_batches(chunks)
        return n / (time.perf_counter() - t0)

    def tg(self, n: int, depth: int) -> float:
        L = self.L
        if depth > 0:
            self._fill_context(depth, 7)
        else:
            self.L.llama_memory_clear(self.mem, True)
            self._decode([self.bos if self.bos >= 0 else 0])
            L.llama_synchronize(self.ctx)
        rng = random.Random(n)
        ids = [rng.randrange(self.n_vocab) for _ in range(n)]
        tok = (L.llama_token * 1)()
        t0 = time.perf_counter()
        for t in ids:  # llama-bench test_gen: one token per decode, no sampling
            tok[0] = t
            if L.llama_decode(self.ctx, L.llama_batch_get_one(tok, 1)) != 0:
                raise RuntimeError("llama_decode failed")
            L.llama_synchronize(self.ctx)
        return n / (time.perf_counter() - t0)

    def close(self):
        self.L.llama_free(self.ctx)
        self.L.llama_model_free(self.model)


def worker_main(engine: str, path: str, threads: int, ctx: int, backend: str) -> int:
    """Loads one engine, then answers JSON-line requests on stdin ({"test": "pp"|"tg", "n": .., "seed": ..})."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the native libraries print goes to the log, not into the protocol
    try:
        eng = (AkunuEngine if engine == "akunu" else LlamaCppEngine)(path, threads, ctx, backend)
    except Exception as e:  # reported to the parent, which records it and goes on
        out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    out.write(json.dumps({"ready": True, "info": eng.info}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("test") == "quit":
            break
        try:
            depth = req.get("depth", 0)
            tps = eng.pp(req["n"], req.get("seed", 0), depth) if req["test"] == "pp" else eng.tg(req["n"], depth)
            out.write(json.dumps({"tps": tps}) + "\n")
        except Exception as e:
            out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
    eng.close()
    return 0


class Worker:
    def __init__(self, engine: str, path: Path, threads: int, ctx: int, backend: str, log_dir: Path):
        self.engine = engine
        self.log_path = log_dir / f"{path.stem}.{engine.replace('.', '')}.log"
        self.log = open(self.log_path, "w")
        env = dict(os.environ)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--_worker", engine, "--_model", str(path),
               "--threads", str(threads), "--ctx", str(ctx), "--backend", backend]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     bufsize=1, env=env)
        reply = self._read()
        if "error" in reply:
            self.close()
            raise RuntimeError(f"{engine}: {reply['error']}")
        self.info = reply["info"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{self.engine} worker died (exit {self.proc.returncode}); log tail:\n{tail}")
        return json.loads(line)

    def run(self, test: str, n: int, seed: int = 0, depth: int = 0) -> float:
        self.proc.stdin.write(json.dumps({"test": test, "n": n, "seed": seed, "depth": depth}) + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise RuntimeError(f"{self.engine} {test}{n} at depth {depth}: {reply['error']}")
        return reply["tps"]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"test": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# --- the comparison ----------------------------------------------------------------------------


def summary(values: list[float]) -> dict:
    return {"values": values, "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def bench_model(key: str, args, log_dir: Path) -> dict:
    name, quant = bench_models.parse_key(key)
    path = bench_models.ensure(key)
    entry = {"key": key, "model": name, "quant": quant, "weights": "real" if bench_models.is_real(name, quant)
             else "random", "file": path.name, "size_bytes": path.stat().st_size}
    print(f"== {key}  ({path.name}, {path.stat().st_size / 1e6:.0f} MB)", flush=True)
    workers: dict[str, Worker] = {}
    try:
        for engine in ("akunu", "llama.cpp"):
            workers[engine] = Worker(engine, path, args.threads, args.ctx, args.backend, log_dir)
        entry["engines"] = {e: w.info for e, w in workers.items()}
        tests = []
        for d in args.depths:
            if args.n_prompt > 0:
                tests.append(("pp", args.n_prompt, d))
            if args.n_gen > 0:
                tests.append(("tg", args.n_gen, d))
        results = {e: {test_name(t, n, d): [] for t, n, d in tests} for e in workers}
        for t, n, d in tests:  # warm-up
            for e, w in workers.items():
                w.run(t, n, seed=-1, depth=d)
                time.sleep(PAUSE_S)
        for r in range(args.reps):
            for t, n, d in tests:
                for e, w in workers.items():
                    tps = w.run(t, n, seed=r, depth=d)
                    results[e][test_name(t, n, d)].append(tps)
                    print(f"   rep {r + 1}/{args.reps} {test_name(t, n, d):<14} {e:<9} {tps:9.2f} t/s", flush=True)
                    time.sleep(PAUSE_S)
        entry["results"] = {e: {test: summary(v) for test, v in res.items()} for e, res in results.items()}
        entry["ratios"] = {test: entry["results"]["akunu"][test]["mean"] / entry["results"]["llama.cpp"][test]["mean"]
                           for test in entry["results"]["akunu"]}
    except Exception as e:
        entry["error"] = str(e)
        print(f"   FAILED: {e}", flush=True)
    finally:
        for w in workers.values():
            w.close()
    return entry


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_features() -> str:
    """Family / model and the vector extensions the kernels care about: the CPU of a machine kind
    can change between runs, and AVX-512 VNNI changes both engines' kernels."""
    info = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.machine()
    flags = set(info.get("flags", "").split())
    isa = [name for flag, name in (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_vnni", "AVX-512 VNNI"),
                                   ("avx_vnni", "AVX-VNNI")) if flag in flags]
    return f"family {info.get('cpu family', '?')} model {info.get('model', '?')} ({', '.join(isa) or 'no AVX2'})"


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + ("+dirty" if dirty else "") if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def fmt_size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def render_markdown(report: dict) -> str:
    h = report["header"]
    pairs = h["test_pairs"]  # per depth the names of its tests: [pp, tg], or the one measured
    with_depth = len(pairs) > 1 or h["depths"] != [0]
    bases = [name.split(" @ ")[0] for name in pairs[0]]
    lines = [
        f"# akunu vs llama.cpp — {h['date']}",
        "",
        f"- device: {h['device']}, backend {h['backend']}, {h['threads']} threads, context {h['ctx']}",
        f"- CPU: {h['cpu']}, {h['cpu_features']}; akunu's CPU weight layout: {h['akunu_cpu_layout']}",
        f"- akunu {h['akunu_version']} (git {h['git']}); llama.cpp via {h['llama_version']} "
        f"(flash attention {h['llama_flash_attn']}, n_batch = n_ubatch = 512)",
        f"- {h['reps']} repetitions after one warm-up, engines interleaved; mean ± std tokens/s; "
        f"ratio = akunu / llama.cpp",
        f"- command: `{h['command']}`",
        f"- load average before / after: {h['load_average_before_after'][0]} / {h['load_average_before_after'][1]}",
        "",
        "| model | quant | weights | size |" + (" depth |" if with_depth else "") +
        "".join(f" akunu {b} | llama.cpp {b} | {b} ratio |" for b in bases),
        "| --- | --- | --- | ---: |" + (" ---: |" if with_depth else "") + " ---: | ---: | ---: |" * len(bases),
    ]
    for m in report["models"]:
        if "error" in m or "results" not in m:
            lines.append(f"| {m['model']} | {m['quant']} | | |{' |' if with_depth else ''} failed: "
                         f"{m.get('error', '?')} |" + " |" * (3 * len(bases) - 1))
            continue
        for depth, names in zip(h["depths"], pairs):
            cells = [m["model"], m["quant"], m["weights"], fmt_size(m["size_bytes"])] + ([str(depth)] if with_depth else [])
            for test in names:
                if test not in m["ratios"]:
                    cells += ["-", "-", "-"]
                    continue
                a, l_ = m["results"]["akunu"][test], m["results"]["llama.cpp"][test]
                cells += [f"{a['mean']:.2f} ± {a['std']:.2f}", f"{l_['mean']:.2f} ± {l_['std']:.2f}",
                          f"**{m['ratios'][test]:.2f}x**"]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def render_chart(report: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = report["header"]
    ok = [m for m in report["models"] if "results" in m]
    tests = [name for pair in h["test_pairs"] for name in pair]
    fig, axes = plt.subplots(1, len(tests), figsize=(max(8, (1.6 * len(ok) + 4) * len(tests) / 2), 4.5), squeeze=False)
    for ax, test in zip(axes[0], tests):
        labels = [f"{m['model']}\n{m['quant']}" for m in ok]
        xs = range(len(ok))
        for off, engine, color in ((-0.2, "akunu", "#1f77b4"), (0.2, "llama.cpp", "#ff7f0e")):
            means = [m["results"][engine].get(test, {}).get("mean", 0) for m in ok]
            stds = [m["results"][engine].get(test, {}).get("std", 0) for m in ok]
            ax.bar([x + off for x in xs], means, 0.4, yerr=stds, capsize=3, label=engine, color=color)
        for x, m in zip(xs, ok):
            if test in m["ratios"]:
                top = max(m["results"][e][test]["mean"] for e in ("akunu", "llama.cpp"))
                ax.text(x, top * 1.02, f"{m['ratios'][test]:.2f}x", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("tokens/s")
        ax.set_title(test)
        ax.margins(y=0.15)
        ax.legend(fontsize=8)
    fig.suptitle(f"akunu vs llama.cpp — {h['device']}, {h['threads']} threads, {h['date']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help=f"comma-separated name:QUANT list, or 'all' (default: {DEFAULT_MODELS}); "
                         "see python benchmarks/models.py --list")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both engines (default: all)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per test (default 3)")
    ap.add_argument("--n-prompt", type=int, default=512, help="prompt tokens of the pp test (default 512; 0: skip)")
    ap.add_argument("--n-gen", type=int, default=128, help="generated tokens of the tg test (default 128; 0: skip)")
    ap.add_argument("--depth", default="0",
                    help="tokens already in the context before each test, comma-separated (llama-bench's -d; default 0)")
    ap.add_argument("--ctx", type=int, default=None,
                    help="context (KV cache) size for both engines (default: 1024, or what the deepest test needs)")
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--out", type=Path, default=None,
                    help="directory for compare.{md,json,png} (default: benchmarks/results/latest.{md,json,png})")
    ap.add_argument("--_worker", choices=("akunu", "llama.cpp"), help=argparse.SUPPRESS)
    ap.add_argument("--_model", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._worker:
        return worker_main(args._worker, args._model, args.threads, args.ctx, args.backend)
    try:
        args.depths = [int(d) for d in args.depth.split(",")]
    except ValueError:
        ap.error(f"--depth takes comma-separated token counts, not {args.depth!r}")
    if min(args.depths) < 0:
        ap.error("--depth values must be >= 0")
    need = max(args.depths) + max(args.n_prompt, args.n_gen + 1)
    if args.ctx is None:
        args.ctx = max(1024, need)

    if args.reps < 1 or args.threads < 1 or args.n_prompt < 0 or args.n_gen < 0:
        ap.error("--reps and --threads must be >= 1, --n-prompt and --n-gen >= 0")
    if args.n_prompt == 0 and args.n_gen == 0:
        ap.error("nothing to measure: --n-prompt and --n-gen are both 0")
    if need > args.ctx:
        ap.error(f"depth {max(args.depths)} + pp{args.n_prompt}/tg{args.n_gen} do not fit --ctx {args.ctx}")
    keys = bench_models.all_keys() if args.models == "all" else [k.strip() for k in args.models.split(",") if k.strip()]
    for k in keys:
        bench_models.parse_key(k)  # fail on a typo before an hour of measuring

    if args.out is None:
        out_dir, stem = HERE / "results", "latest"
    else:
        out_dir, stem = args.out, "compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="akunu-compare-logs-"))

    started = _dt.datetime.now()
    load_before = os.getloadavg()[0]
    if load_before > 0.5:
        print(f"warning: load average {load_before:.2f} before starting: other processes compete for the cores "
              "(llama.cpp's OpenMP threads are hit hardest); numbers from a busy machine are not comparable",
              file=sys.stderr, flush=True)
    models_out = [bench_model(k, args, log_dir) for k in keys]
    first = next((m["engines"] for m in models_out if "engines" in m), None)
    import akunu
    from akunu import _testing

    header = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "device": first["akunu"]["device"] if first else cpu_name(),
        "cpu": cpu_name(),
        "cpu_features": cpu_features(),
        "akunu_cpu_layout": _testing.repacked_layout(),
        "backend": args.backend,
        "threads": args.threads,
        "ctx": args.ctx,
        "reps": args.reps,
        "depths": args.depths,
        "test_pairs": [[test_name(kind, n, d) for kind, n in (("pp", args.n_prompt), ("tg", args.n_gen)) if n > 0]
                       for d in args.depths],
        "akunu_version": akunu.__version__,
        "git": git_revision(),
        "llama_version": first["llama.cpp"]["version"] if first else "llama-cpp-python ?",
        "llama_flash_attn": first["llama.cpp"]["flash_attn"] if first else "?",
        "llama_system_info": first["llama.cpp"]["system_info"] if first else "",
        "python": platform.python_version(),
        "command": "python benchmarks/compare.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "methodology": __doc__.split("\n\n", 2)[2].strip(),
        "load_average_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "duration_s": round((_dt.datetime.now() - started).total_seconds(), 1),
        "worker_logs": str(log_dir),
    }
    report = {"header": header, "models": models_out}
    md = render_markdown(report)
    (out_dir / f"{stem}.md").write_text(md)
    (out_dir / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    written = "md,json"
    try:
        render_chart(report, out_dir / f"{stem}.png")
        written += ",png"
    except ImportError:
        print("matplotlib is missing (pip install matplotlib): no chart", file=sys.stderr)
    print()
    print(md)
    print(f"wrote {out_dir / stem}.{{{written}}}; worker logs in {log_dir}")
    return 0 if all("error" not in m for m in models_out) else 1


if __name__ == "__main__":
    sys.exit(main())
