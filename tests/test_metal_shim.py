"""The Metal backend's kernels (metal/*.metal) on Linux, through the MSL shim (tests/metal_shim/).

No Apple GPU here, so each kernel is compiled as C++ (metal_shim.h) and run on CPU threads:
- every kernel against the CPU backend's kernel of the same contract on random inputs
  (cases_*.cpp), once under AddressSanitizer + UndefinedBehaviorSanitizer (GPU threads as fibers)
  and once under ThreadSanitizer (GPU threads as OS threads: a missing barrier is a data race);
- whole tiny models of every family and weight dtype on ShimMetalDevice, which encodes tables as
  MetalDevice does (threadgroups = the command's grid, the kernel table's threads and buffer
  slots, patches per token), against the CPU backend: logits, greedy tokens, chain decode ==
  single steps, seeded sampling, a grammar mask (the checks tests/test_cuda.py makes of CUDA);
- coverage: every kernel the table builder can ask of Metal is in the kernel table, in metal/,
  and has cases.
What only a Mac can check (the Metal compiler, MetalDevice itself) is tests/test_metal.py.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as QT

import gguf_kquants as kq
import gguf_writer as gw
import tiny_models as tm

ROOT = Path(__file__).resolve().parent.parent
SHIM_DIR = ROOT / "tests" / "metal_shim"
VOCAB = 512  # small enough that the logits GEMV is not most of a shim run

SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    "TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1",
}


@pytest.fixture(scope="session")
def shim_build(tmp_path_factory) -> Path:
    """Configure and build both checkers (one reference library); returns the build folder."""
    # AKUNU_METAL_SHIM_BUILD keeps the build between runs (development); CI builds afresh.
    kept = os.environ.get("AKUNU_METAL_SHIM_BUILD")
    build = Path(kept) if kept else tmp_path_factory.mktemp("metal_shim")
    cmake = ["cmake", "-S", str(SHIM_DIR), "-B", str(build), "-G", "Ninja", "-DAKUNU_SHIM_VARIANTS=ON"]
    for cmd in (cmake, ["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return build


@pytest.fixture(scope="session")
def asan_check(shim_build) -> Path:
    return shim_build / "metal_kernel_check_asan"


@pytest.fixture(scope="session")
def tsan_check(shim_build) -> Path:
    return shim_build / "metal_kernel_check_tsan"


def _run(binary: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **SANITIZER_ENV})


def _lines(binary: Path, *args: str) -> list[str]:
    r = _run(binary, *args)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout.splitlines()


# --------------------------------------------------------------------------------------
# every kernel against the CPU backend
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["asan", "tsan"])
def test_kernel_cases(kind, request):
    binary = request.getfixturevalue(f"{kind}_check")
    r = _run(binary)
    report = r.stdout.splitlines()
    failed = [line for line in report if line.startswith("FAIL")]
    assert r.returncode == 0 and not failed, "\n".join(failed) + "\n" + r.stdout[-2000:] + r.stderr[-6000:]
    assert "WARNING: ThreadSanitizer" not in r.stderr and "ERROR: AddressSanitizer" not in r.stderr
    assert report[-1].endswith(" 0 failed"), report[-1]


def _required_kernels(binary: Path) -> set[str]:
    return set(_lines(binary, "--list-required"))


def test_every_kernel_the_tables_need_exists_and_has_cases(asan_check):
    table = set(_lines(asan_check, "--list-table"))
    compiled = set(_lines(asan_check, "--list-kernels"))
    with_cases = {line.split("\t")[0] for line in _lines(asan_check, "--list-cases")}
    required = _required_kernels(asan_check)
    assert required, "--list-required printed nothing"
    assert required <= table, f"kernels the table builder may emit on Metal but the kernel table lacks: {sorted(required - table)}"
    assert table == compiled, (f"in the kernel table only: {sorted(table - compiled)}; "
                               f"in metal/ only: {sorted(compiled - table)}")
    assert table <= with_cases, f"Metal kernels without a case against the CPU: {sorted(table - with_cases)}"


def test_shim_reports_kernel_bugs(tsan_check, asan_check):
    """The executors turn a missing threadgroup_barrier, a skipped barrier and an out-of-bounds write
    into reports (the kernels' safety net)."""
    # --self-test-race runs a kernel-shaped function that writes threadgroup memory and reads
    # another thread's slot without a barrier (tests/metal_shim/self_test.cpp).
    r = _run(tsan_check, "--self-test-race")
    assert r.returncode != 0 and "ThreadSanitizer: data race" in r.stderr, r.stderr[-2000:]
    # The fiber executor cannot see races, but reports a barrier some threads never reach, and
    # AddressSanitizer still sees a kernel write past its buffer from inside a fiber.
    r = _run(asan_check, "--self-test-deadlock")
    assert r.returncode != 0 and "deadlock" in r.stderr, r.stdout[-1000:] + r.stderr[-2000:]
    r = _run(asan_check, "--self-test-overflow")
    assert r.returncode != 0 and "heap-buffer-overflow" in r.stderr, r.stderr[-2000:]


def test_top_p_target_without_double_equals_the_hosts(asan_check):
    """Metal has no double: the sampler's top-p target comes from integers alone and must equal the
    host's double arithmetic bit for bit, or a draw could differ (src/core/sampling_rule.h)."""
    r = _run(asan_check, "--check-top-p")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


# --------------------------------------------------------------------------------------
# whole models: CPU backend vs the Metal kernels
# --------------------------------------------------------------------------------------

def _small_vocab_gguf(path: Path) -> Path:
    """llama.cpp's SPM test vocabulary cut to its first VOCAB tokens (bytes and a few pieces)."""
    w = gguf.GGUFWriter(str(path), "llama")
    for key, val, vtype, sub in gw._tokenizer_kv(str(gw.VOCAB_GGUF)):
        if vtype == gguf.GGUFValueType.ARRAY:
            val = list(val)[:VOCAB]
        w.add_key_value(key, val, vtype, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# (spec, per-tensor dtypes or None for spec.dtype, KV-cache dtype)
LLAMA = tm.LLAMA_SPECS
MODELS = {
    **{f"llama_{name}": (spec, None, "f16") for name, spec in LLAMA.items()},
    "llama_bf16": (replace(LLAMA["q4_0_tied"], name="bf16", dtype="BF16", seed=12), None, "f16"),
    "llama_q4_1": (replace(LLAMA["q8_0_untied"], name="q4_1", dtype="Q4_1", seed=11), None, "f16"),
    "llama_hd64": (tm.family_spec("llama", "hd64", dtype="F16", hidden=256, n_heads=4, n_kv_heads=2, head_dim=64,
                                  seed=13), None, "f16"),
    "llama_hd128_q8kv": (tm.family_spec("llama", "hd128", dtype="Q8_0", hidden=256, n_heads=2, n_kv_heads=1,
                                        head_dim=128, seed=14), None, "q8_0"),
    "llama_q4_0_q8kv": (LLAMA["q4_0_tied"], None, "q8_0"),
    "qwen3_q8kv": (tm.ARCH_SPECS["qwen3_q4_0"], None, "q8_0"),  # NeoX RoPE and QK-norm into a Q8_0 cache
    "kquant_mixed": (kq.CASES["mixed_q4_k_m"].spec, kq.MIXED_DTYPES, "f16"),
    "kquant_mixed_b": (kq.CASES["mixed_b_tied_llama3"].spec, kq.MIXED_DTYPES_B, "f16"),
    **{name: (spec, None, "f16") for name, spec in tm.ARCH_SPECS.items()},
}


@pytest.fixture(scope="session")
def small_vocab(tmp_path_factory) -> Path:
    return _small_vocab_gguf(tmp_path_factory.mktemp("vocab") / "vocab-512.gguf")


def _model_gguf(name: str, out_dir: Path, vocab_src: Path) -> Path:
    spec, dtypes, _ = MODELS[name]
    path = out_dir / f"{name}.gguf"
    if path.exists():
        return path
    model = tm.make_hf_model(spec, VOCAB)
    tensors = gw.gguf_tensors_from_hf(model, spec)
    if dtypes is None:
        gw.write_gguf(path, spec, tensors, vocab_src=vocab_src)
    else:
        override = {n: dtypes[n.removesuffix(".weight")] for n, a in tensors.items() if np.ndim(a) == 2}
        gw.write_gguf(path, spec, tensors, vocab_src=vocab_src, dtype_override=override, quantize=kq.quantize,
                      file_type=gguf.LlamaFileType.MOSTLY_Q4_K_M)
    return path


def _model_report(binary: Path, path: Path, kv: str) -> dict[str, str]:
    r = _run(binary, "--model", str(path), "--kv", kv)
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert r.returncode == 0, (out.get("error") or "") + r.stdout[-2000:] + r.stderr[-6000:]
    return out


@pytest.fixture(scope="session")
def model_reports(asan_check, small_vocab, tmp_path_factory) -> dict[str, dict[str, str]]:
    out_dir = tmp_path_factory.mktemp("metal_models")
    reports = {}
    for name, (_, _, kv) in MODELS.items():
        reports[name] = _model_report(asan_check, _model_gguf(name, out_dir, small_vocab), kv)
    return reports


@pytest.mark.parametrize("name", list(MODELS))
def test_model_on_metal_kernels_matches_cpu(model_reports, name):
    r = model_reports[name]
    # The criterion tests/test_cuda.py applies to CUDA: argmax >= 99%, mean KL <= 1e-3.
    assert float(r["argmax_agreement"]) >= 0.99, r
    assert float(r["mean_kl"]) <= 1e-3, r
    assert r["greedy_metal"] == r["greedy_cpu"], r
    assert r["chain_metal"] == r["steps_metal"], r
    # Seeded sampling, teacher-forced on the CPU's sampled tokens: the same choice at every step but
    # where the draw falls within the backends' rounding of a boundary (llama_hd128_q8kv at 4d5e2d5:
    # one step of 20; a free-running Metal run then continues from another token).
    assert r["sampled_forced_cpu"] == r["sampled_cpu"], r
    forced_cpu, forced_metal = r["sampled_forced_cpu"].split(","), r["sampled_forced_metal"].split(",")
    assert len(forced_metal) == len(forced_cpu) > 0, r
    assert sum(a != b for a, b in zip(forced_cpu, forced_metal)) <= 1, r
    assert r["masked_metal"] == r["masked_cpu"], r
    assert all(int(t) % 3 == 0 for t in r["masked_metal"].split(",")), r


def test_models_use_only_kernels_with_cases(model_reports, asan_check):
    used = set()
    for r in model_reports.values():
        used |= set(r["kernels_used"].split(","))
    with_cases = {line.split("\t")[0] for line in _lines(asan_check, "--list-cases")}
    assert used <= with_cases, sorted(used - with_cases)
    # The models reach every kernel the static list names but the rarely used dtypes' GEMMs.
    missing = _required_kernels(asan_check) - used
    assert all(k.startswith(("gemm_", "embedding_")) for k in missing), sorted(missing)
