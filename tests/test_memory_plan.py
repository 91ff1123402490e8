"""The memory plan (src/inference/memory_plan.h, docs/adr/0021-memory-plan.md): before anything is
allocated, a load adds up what the model will hold (weights as the backend lays them out, the KV
cache, scratch) and compares it with what the device has free; a model that does not fit raises
akunu.OutOfMemoryError (an AkunuError and a MemoryError) instead of being killed by the OOM killer.

Checked here on the CPU backend:
- the repro of the issue: context_length=100_000_000 on a tiny model is refused in well under a
  second, and the process's peak RSS stays where it was (nothing was allocated or zero-filled);
- the plan's numbers are what the loader allocates (weights of every architecture, file-layout and
  repacked dtypes, GGUF / SafeTensors / MLX; KV cache F16 and Q8_0 with sliding windows; scratch),
  and agree with sizes worked out from the file by gguf-py and from the model's shapes;
- with the available memory forced (akunu._testing.set_available_memory_override), a normal
  context is refused, the largest context the error names loads, and one token more is refused;
- the host's available memory is parsed from /proc/meminfo and cgroup v1 / v2 files (fake trees:
  limits, ancestors, garbage);
- context_length beyond the trained context warns (ContextLengthWarning), `akunu inspect` prints
  the plan, an allocation that fails anyway is an OutOfMemoryError too.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import akunu
import akunu._testing as testing
import gguf_writer as gw
import tiny_models as tm

# Sixteen KV heads of 128 over two layers: 16 KiB of F16 KV cache per token, so the issue's
# context_length=100_000_000 asks for 1.6 TB: more than any machine the tests run on has. (Qwen 3:
# its heads need not add up to the hidden size, so the file stays small.)
KV_HEAVY = tm.family_spec("qwen3", "kv_heavy", dtype="F16", hidden=128, n_heads=16, n_kv_heads=16, head_dim=128,
                          ffn=256, seed=41)
KV_HEAVY_BYTES_PER_TOKEN = KV_HEAVY.n_layers * 2 * KV_HEAVY.n_kv_heads * KV_HEAVY.head_dim * 2  # K and V, F16
HUGE_CONTEXT = 100_000_000

# Every architecture, file-layout (F16, F32) and repacked (Q8_0, Q4_0 on the CPU) weights, tied and not.
PLAN_CASES = {
    **{name: tm.LLAMA_SPECS[name] for name in ("f32_untied", "f16_tied", "q8_0_untied", "q4_0_tied")},
    **{name: tm.ARCH_SPECS[name] for name in ("qwen2_f16", "qwen3_q4_0", "mistral_q8_0", "gemma_f16", "gemma2_q8_0",
                                              "gemma3_f16", "phi3_q4_0")},
}


@pytest.fixture(scope="module")
def build(gguf_dir):
    cache = {}

    def get(spec: tm.ArchSpec) -> str:
        if spec.name not in cache:
            cache[spec.name] = str(gw.build_gguf(spec, gguf_dir)[0])
        return cache[spec.name]

    return get


@pytest.fixture
def available_override():
    """set(bytes): memory plans take `bytes` as the memory available until the test ends."""
    yield testing.set_available_memory_override
    testing.clear_available_memory_override()


def plan_without_availability(plan: dict) -> dict:
    """A plan's sizes and layout: what does not depend on the moment's free memory."""
    return {k: plan[k] for k in ("backend", "context_length", "weights_bytes", "kv_cache_bytes", "scratch_bytes",
                                 "total_bytes")}


# --- the repro ----------------------------------------------------------------------------

REPRO = textwrap.dedent("""
    import json, resource, sys, time
    import akunu
    def peak_rss_bytes():  # ru_maxrss: KiB on Linux, bytes on macOS
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return r if sys.platform == "darwin" else r * 1024
    before = peak_rss_bytes()
    t0 = time.perf_counter()
    out = {}
    try:
        akunu.Model(sys.argv[1], backend="cpu", context_length=int(sys.argv[2]))
        out["raised"] = None
    except MemoryError as e:
        out.update(raised=type(e).__name__, is_akunu_error=isinstance(e, akunu.AkunuError), message=str(e),
                   needed=e.needed, available=e.available, largest_context=e.largest_context)
    out.update(seconds=time.perf_counter() - t0, peak_rss_before=before, peak_rss_after=peak_rss_bytes())
    print(json.dumps(out))
""")


def test_huge_context_is_refused_at_once_without_allocating(build):
    """The issue: Model(tiny, context_length=100_000_000) used to zero-fill a KV cache far larger than
    the machine and be killed. Now the plan refuses it first: OutOfMemoryError (caught as a
    MemoryError in a fresh process) with the three numbers, in well under a second, and the peak
    RSS does not move by more than the tokenizer's few MiB."""
    path = build(KV_HEAVY)
    assert not akunu.Model.plan_memory(path, backend="cpu", context_length=HUGE_CONTEXT)["fits"]  # never allocate 1.6 TB
    r = subprocess.run([sys.executable, "-c", REPRO, path, str(HUGE_CONTEXT)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["raised"] == "OutOfMemoryError" and out["is_akunu_error"], out
    assert out["needed"] >= HUGE_CONTEXT * KV_HEAVY_BYTES_PER_TOKEN > out["available"] > 0
    assert 0 < out["largest_context"] < out["available"] // KV_HEAVY_BYTES_PER_TOKEN + 1
    for number in (out["needed"], out["available"], out["largest_context"]):
        assert str(number) in out["message"], out["message"]
    assert "KV cache" in out["message"] and "weights" in out["message"] and "scratch" in out["message"]
    assert out["seconds"] < 1.0, out
    growth = out["peak_rss_after"] - out["peak_rss_before"]
    assert growth < 32 << 20, f"peak RSS grew by {growth / 2**20:.1f} MiB while refusing the load"


def test_out_of_memory_error_is_a_memory_error_and_an_akunu_error(build):
    path = build(KV_HEAVY)
    for catch in (MemoryError, akunu.AkunuError, akunu.OutOfMemoryError):
        with pytest.raises(catch) as info:
            akunu.Model(path, backend="cpu", context_length=HUGE_CONTEXT)
        e = info.value
        assert isinstance(e, MemoryError) and isinstance(e, akunu.AkunuError) and type(e) is akunu.OutOfMemoryError
        assert isinstance(e.needed, int) and isinstance(e.available, int) and isinstance(e.largest_context, int)
        assert "/proc/meminfo" in str(e) or "cgroup" in str(e) or "physical memory" in str(e)
    assert issubclass(akunu.OutOfMemoryError, MemoryError) and issubclass(akunu.OutOfMemoryError, akunu.AkunuError)


# --- the plan is what the loader allocates --------------------------------------------------------

# The Q8_0 cache needs head_dim a multiple of 32.
ALLOCATION_CASES = [(name, "f16") for name in PLAN_CASES] + \
    [(name, "q8_0") for name, spec in PLAN_CASES.items() if spec.head_dim % 32 == 0]


@pytest.mark.parametrize("name,kv_cache_dtype", ALLOCATION_CASES)
def test_plan_is_what_the_loader_allocates(name, kv_cache_dtype, build):
    """Model.memory_plan's weights, KV cache and scratch are the bytes the loader then holds
    (every weight buffer, repacked or aliased; every KV and scratch buffer), and plan_memory()
    without loading gives the same plan."""
    spec = PLAN_CASES[name]
    path = build(spec)
    model = akunu.Model(path, backend="cpu", context_length=1000, kv_cache_dtype=kv_cache_dtype)
    plan = model.memory_plan
    assert plan["fits"] and plan["context_length"] == model.context_length == 1000
    assert plan["weights_bytes"] == model._engine.weight_bytes
    assert plan["kv_cache_bytes"] == model.kv_cache_bytes
    assert plan["scratch_bytes"] == model._engine.scratch_bytes
    assert plan["total_bytes"] == plan["weights_bytes"] + plan["kv_cache_bytes"] + plan["scratch_bytes"]
    assert plan["prompt_cache_bytes"] == model.prompt_cache_bytes
    unloaded = akunu.Model.plan_memory(path, backend="cpu", context_length=1000, kv_cache_dtype=kv_cache_dtype)
    assert plan_without_availability(unloaded) == plan_without_availability(plan)


def _gguf_tensor_bytes(path: str) -> int:
    """Bytes of a GGUF's weights as a device that reads its matrices in place holds them, from
    gguf-py: each 2-D tensor as stored, each 1-D tensor (norms) as float32."""
    from gguf import GGUFReader

    total = 0
    for t in GGUFReader(path).tensors:
        total += int(t.n_bytes) if len(t.shape) >= 2 else int(t.n_elements) * 4
    return total


@pytest.mark.parametrize("name", ["f32_untied", "f16_tied", "qwen2_f16", "gemma_f16"])
def test_file_layout_weights_count_the_file(name, build):
    """F32 / F16 matrices alias the mapped file on the CPU: they count as resident, so the plan's
    weights are the file's tensors (gguf-py's sizes; norms converted to float32) plus the RoPE
    frequencies the loader computes (rope_dim / 2 floats)."""
    spec = PLAN_CASES[name]
    path = build(spec)
    plan = akunu.Model.plan_memory(path, backend="cpu")
    assert plan["weights_bytes"] == _gguf_tensor_bytes(path) + spec.rope_dim // 2 * 4


def test_kv_cache_size_follows_the_shapes(build):
    """The KV cache's bytes from the model's shapes: K and V, F16 (2 bytes), or Q8_0 (gguf-py's
    block: 34 bytes per 32 values), per layer, head and position."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    spec = PLAN_CASES["q8_0_untied"]
    path = build(spec)
    block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType.Q8_0]
    per_row = {"f16": spec.head_dim * 2, "q8_0": spec.head_dim // block * block_bytes}
    for dtype, row in per_row.items():
        for context in (1, 777, 4096):
            plan = akunu.Model.plan_memory(path, backend="cpu", context_length=context, kv_cache_dtype=dtype)
            assert plan["kv_cache_bytes"] == spec.n_layers * 2 * spec.n_kv_heads * context * row


@pytest.mark.parametrize("name", ["mistral_q8_0", "gemma2_q8_0", "gemma3_f16"])
def test_sliding_window_layers_stop_growing(name, build):
    """Sliding-window layers keep a ring (docs/adr/0013): past it, only the global layers' caches grow
    with the context (every layer for Mistral's all-sliding window: then nothing grows)."""
    spec = PLAN_CASES[name]
    path = build(spec)
    sliding = {"mistral": spec.n_layers, "gemma2": (spec.n_layers + 1) // 2, "gemma3": spec.n_layers - spec.n_layers // 6}
    global_layers = spec.n_layers - sliding[spec.family]
    a, b = (akunu.Model.plan_memory(path, backend="cpu", context_length=n)["kv_cache_bytes"] for n in (20_000, 21_000))
    assert b - a == 1000 * global_layers * 2 * spec.n_kv_heads * spec.head_dim * 2


def test_checkpoints_plan_what_they_allocate(tmp_path, tokenizer_dir):
    """SafeTensors (Q/K reordered in host memory, F16 read in place) and MLX (4-bit converted to Q4_1,
    then repacked) checkpoints: the plan made without loading is what the load allocates."""
    import hf_checkpoints as hc

    spec = tm.family_spec("llama", "plan_st", seed=42)
    st_dir, _ = hc.save_checkpoint(spec, tmp_path / "st", tokenizer_dir, dtype="F16")
    mlx_dir, _, _ = hc.save_mlx_checkpoint(tm.family_spec("llama", "plan_mlx", seed=43), tmp_path / "mlx", tokenizer_dir,
                                        bits=4, group_size=32)
    for d in (st_dir, mlx_dir):
        model = akunu.Model(d, backend="cpu", context_length=512)
        plan = model.memory_plan
        assert plan["weights_bytes"] == model._engine.weight_bytes
        assert plan["kv_cache_bytes"] == model.kv_cache_bytes and plan["scratch_bytes"] == model._engine.scratch_bytes
        assert plan_without_availability(akunu.Model.plan_memory(d, backend="cpu", context_length=512)) == \
            plan_without_availability(plan)


# --- forced availability: the boundary --------------------------------------------------------------

def test_largest_context_loads_and_one_more_is_refused(build, available_override):
    path = build(PLAN_CASES["q8_0_untied"])
    full = akunu.Model.plan_memory(path, backend="cpu", context_length=2048)
    available = full["total_bytes"] - 1
    available_override(available)
    with pytest.raises(akunu.OutOfMemoryError) as info:
        akunu.Model(path, backend="cpu", context_length=2048)
    e = info.value
    assert e.needed == full["total_bytes"] and e.available == available
    assert "akunu._testing.set_available_memory_override" in str(e)
    largest = e.largest_context
    assert 0 < largest < 2048 and f"The largest context_length that fits is {largest}." in str(e)
    model = akunu.Model(path, backend="cpu", context_length=largest)
    assert model.context_length == largest and model.memory_plan["total_bytes"] <= available
    assert model.logits([1, 2, 3]).shape[0] == 3  # it runs
    del model
    with pytest.raises(akunu.OutOfMemoryError) as info:
        akunu.Model(path, backend="cpu", context_length=largest + 1)
    assert info.value.largest_context == largest


def test_nothing_fits_says_so(build, available_override):
    path = build(PLAN_CASES["f16_tied"])
    weights = akunu.Model.plan_memory(path, backend="cpu")["weights_bytes"]
    available_override(weights // 2)
    with pytest.raises(akunu.OutOfMemoryError, match="Not even a context_length of 1 fits") as info:
        akunu.Model(path, backend="cpu", context_length=16)
    assert info.value.largest_context == 0
    plan = akunu.Model.plan_memory(path, backend="cpu", context_length=16)
    assert not plan["fits"] and plan["largest_context"] == 0 and plan["available_bytes"] == weights // 2


def test_default_prompt_cache_takes_only_what_the_plan_leaves(build, available_override):
    """The prompt cache is filled lazily, so it is not in the plan; by default it may grow to a full
    context's worth but no further than the host memory the plan leaves free. One asked for is
    taken as given."""
    path = build(PLAN_CASES["q8_0_untied"])
    total = akunu.Model.plan_memory(path, backend="cpu", context_length=1024)["total_bytes"]
    available_override(total + 5000)
    model = akunu.Model(path, backend="cpu", context_length=1024)
    assert model.prompt_cache_bytes == 5000 == model.memory_plan["prompt_cache_bytes"]
    assert akunu.Model(path, backend="cpu", context_length=1024, prompt_cache_bytes=10**12).prompt_cache_bytes == 10**12
    available_override(total * 100)
    roomy = akunu.Model(path, backend="cpu", context_length=1024)
    assert roomy.prompt_cache_bytes == roomy.kv_cache_bytes + 4 * 1024


def test_memory_check_switch_lets_a_load_through(build, available_override, monkeypatch):
    """AKUNU_MEMORY_CHECK=0 (docs/switches.md) loads what the plan refuses; the plan still says so."""
    path = build(PLAN_CASES["q8_0_untied"])
    available_override(akunu.Model.plan_memory(path, backend="cpu", context_length=256)["total_bytes"] - 1)
    monkeypatch.setenv("AKUNU_MEMORY_CHECK", "0")
    model = akunu.Model(path, backend="cpu", context_length=256)
    assert not model.memory_plan["fits"]
    monkeypatch.setenv("AKUNU_MEMORY_CHECK", "1")
    with pytest.raises(akunu.OutOfMemoryError):
        akunu.Model(path, backend="cpu", context_length=256)


ALLOCATION_FAILS = textwrap.dedent("""
    import os, resource, sys
    import akunu
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # no 4 GiB address space: every big malloc fails
    try:
        akunu.Model(sys.argv[1], backend="cpu", context_length=int(sys.argv[2]))
        print("loaded")
    except akunu.OutOfMemoryError as e:
        print(repr((str(e), e.needed, e.available, e.largest_context)))
""")


def test_a_failed_allocation_is_an_out_of_memory_error(build):
    """With the check switched off and the address space capped, the KV cache's allocation itself
    fails: that is an OutOfMemoryError naming the bytes (availability and largest context unknown),
    not a crash."""
    path = build(KV_HEAVY)
    context = 1_000_000  # 16 GB of KV cache
    r = subprocess.run([sys.executable, "-c", ALLOCATION_FAILS, path, str(context)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "AKUNU_MEMORY_CHECK": "0"})
    assert r.returncode == 0, r.stderr
    message, needed, available, largest = eval(r.stdout.strip())  # noqa: S307 (our own repr)
    layer_buffer = context * KV_HEAVY.n_kv_heads * KV_HEAVY.head_dim * 2  # one layer's K
    assert message == f"out of memory allocating {layer_buffer} bytes" and needed == layer_buffer
    assert available is None and largest is None


# --- context beyond the trained one -----------------------------------------------------------------

def test_context_beyond_the_trained_one_warns(build):
    spec = PLAN_CASES["f16_tied"]
    path = build(spec)
    with pytest.warns(akunu.ContextLengthWarning) as record:
        model = akunu.Model(path, backend="cpu", context_length=spec.context_length * 2)
    assert model.context_length == spec.context_length * 2
    [warning] = [w for w in record if w.category is akunu.ContextLengthWarning]
    message = str(warning.message)
    assert f"context_length={spec.context_length * 2}" in message and f"the {spec.context_length} tokens" in message
    assert warning.filename == __file__  # points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        akunu.Model(path, backend="cpu", context_length=spec.context_length)
        default = akunu.Model(path, backend="cpu")
    assert default.context_length == min(spec.context_length, 4096)


@pytest.mark.parametrize("bad", [0, -1, 2**31, True, 1.5, "4096"])
def test_context_length_out_of_range_is_a_value_error(bad, build):
    with pytest.raises(ValueError, match="context_length"):
        akunu.Model(build(PLAN_CASES["f16_tied"]), backend="cpu", context_length=bad)
    with pytest.raises(ValueError, match="context_length"):
        akunu.Model.plan_memory(build(PLAN_CASES["f16_tied"]), backend="cpu", context_length=bad)


# --- akunu inspect --------------------------------------------------------------------------------

def akunu_cli(*args):
    return subprocess.run([sys.executable, "-m", "akunu.cli", *args], capture_output=True, text=True, timeout=300)


def test_inspect_prints_the_plan(build):
    path = build(PLAN_CASES["q8_0_untied"])
    r = akunu_cli("inspect", path, "--backend", "cpu", "-c", "1000")
    assert r.returncode == 0, r.stderr
    plan = akunu.Model(path, backend="cpu", context_length=1000).memory_plan
    mb = lambda n: f"{n / 1e6:.1f} MB"  # noqa: E731
    line = (f"{'memory plan:':<24}{mb(plan['total_bytes'])} on cpu for context_length 1000: weights "
            f"{mb(plan['weights_bytes'])}, KV cache {mb(plan['kv_cache_bytes'])}, scratch {mb(plan['scratch_bytes'])}")
    assert line in r.stdout.splitlines(), r.stdout
    assert re.search(r"available:\s+[\d.]+ GB \(.+\): fits", r.stdout), r.stdout
    assert re.search(r"largest context:\s+\d+ tokens", r.stdout), r.stdout


def test_inspect_shows_a_refused_plan_and_the_error(build):
    path = build(KV_HEAVY)
    r = akunu_cli("inspect", path, "--backend", "cpu", "-c", str(HUGE_CONTEXT))
    assert r.returncode == 2
    assert re.search(r"available:\s+.*: DOES NOT FIT", r.stdout), r.stdout
    largest = int(re.search(r"largest context:\s+(\d+) tokens", r.stdout).group(1))
    assert "does not fit in memory" in r.stderr and "Traceback" not in r.stderr
    stated = int(re.search(r"The largest context_length that fits is (\d+)\.", r.stderr).group(1))
    assert abs(stated - largest) <= largest // 10  # two plans, moments apart: free memory moves a little


# --- the host's available memory ------------------------------------------------------------------

def write_tree(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        p = root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(root)


MEMINFO = "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\nCached: 5 kB\n"
V2_MOUNT = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNT = ("24 23 0:21 / /sys/fs/cgroup/unified rw shared:5 - cgroup2 cgroup2 rw\n"
            "36 25 0:31 / /sys/fs/cgroup/memory rw,nosuid shared:16 - cgroup cgroup rw,memory\n")
PHYSICAL = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_host_memory_meminfo_only(tmp_path):
    root = write_tree(tmp_path, {"/proc/meminfo": MEMINFO})
    assert testing.host_available_memory(root) == (8000000 * 1024, "/proc/meminfo MemAvailable")


def test_host_memory_cgroup_v2_limit_less_reclaimable_cache(tmp_path):
    root = write_tree(tmp_path, {
        "/proc/meminfo": MEMINFO, "/proc/self/mountinfo": V2_MOUNT, "/proc/self/cgroup": "0::/app.slice/job\n",
        "/sys/fs/cgroup/app.slice/job/memory.max": "500000000\n",
        "/sys/fs/cgroup/app.slice/job/memory.current": "100000000\n",
        "/sys/fs/cgroup/app.slice/job/memory.stat": "anon 40000000\nfile 60000000\ninactive_file 50000000\n",
        "/sys/fs/cgroup/app.slice/memory.max": "max\n", "/sys/fs/cgroup/app.slice/memory.current": "900000000\n"})
    assert testing.host_available_memory(root) == (
        500000000 - (100000000 - 50000000), "cgroup v2 memory.max - memory.current of /sys/fs/cgroup/app.slice/job")


def test_host_memory_cgroup_v2_ancestor_is_tighter(tmp_path):
    root = write_tree(tmp_path, {
        "/proc/meminfo": MEMINFO, "/proc/self/mountinfo": V2_MOUNT, "/proc/self/cgroup": "0::/a/b\n",
        "/sys/fs/cgroup/a/b/memory.max": "max\n", "/sys/fs/cgroup/a/b/memory.current": "10\n",
        "/sys/fs/cgroup/a/memory.max": "200000000\n", "/sys/fs/cgroup/a/memory.current": "150000000\n"})
    assert testing.host_available_memory(root) == (50000000, "cgroup v2 memory.max - memory.current of /sys/fs/cgroup/a")


def test_host_memory_cgroup_v2_over_the_limit_is_zero(tmp_path):
    root = write_tree(tmp_path, {
        "/proc/meminfo": MEMINFO, "/proc/self/mountinfo": V2_MOUNT, "/proc/self/cgroup": "0::/\n",
        "/sys/fs/cgroup/memory.max": "1000\n", "/sys/fs/cgroup/memory.current": "5000\n"})
    assert testing.host_available_memory(root)[0] == 0


def test_host_memory_cgroup_v1_container_root(tmp_path):
    """A container that mounts its own memory cgroup as the hierarchy's root: the path in
    /proc/self/cgroup does not exist under the mount, so the mount's root is the cgroup;
    hierarchical_memory_limit (an ancestor's) is below the cgroup's own limit."""
    root = write_tree(tmp_path, {
        "/proc/meminfo": MEMINFO, "/proc/self/mountinfo": V1_MOUNT,
        "/proc/self/cgroup": "9:pids:/docker/abc\n4:cpuacct,memory:/docker/abc\n0::/\n",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "300000000\n",
        "/sys/fs/cgroup/memory/memory.usage_in_bytes": "100000000\n",
        "/sys/fs/cgroup/memory/memory.stat": "cache 30000000\nhierarchical_memory_limit 250000000\n"
                                             "total_inactive_file 20000000\ninactive_file 1\n"})
    assert testing.host_available_memory(root) == (
        250000000 - (100000000 - 20000000), "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes of /sys/fs/cgroup/memory")


def test_host_memory_cgroup_v1_unlimited_and_escaped_mount(tmp_path):
    mountinfo = "36 25 0:31 / /sys/fs/cg\\040mem rw - cgroup cgroup rw,memory\n"
    root = write_tree(tmp_path, {
        "/proc/meminfo": MEMINFO, "/proc/self/mountinfo": mountinfo, "/proc/self/cgroup": "4:memory:/job\n",
        "/sys/fs/cg mem/job/memory.limit_in_bytes": "9223372036854771712\n",
        "/sys/fs/cg mem/job/memory.usage_in_bytes": "100\n"})
    assert testing.host_available_memory(root) == (8000000 * 1024, "/proc/meminfo MemAvailable")
    (tmp_path / "sys/fs/cg mem/job/memory.limit_in_bytes").write_text("4096\n")
    assert testing.host_available_memory(root) == (
        3996, "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes of /sys/fs/cg mem/job")


@pytest.mark.parametrize("meminfo", [
    "", "MemAvailable:\n", "MemAvailable: lots kB\n", "MemAvailable: -5 kB\n", "MemAvailable: 12 MB\n",
    "MemAvailable: 99999999999999999999 kB\n", "MemAvailable: 18014398509481984 kB\n", "MemAvailable: 1 kB extra\n",
    "\x00\xff" * 100, "MemTotal: 5 kB\n" * 1000])
def test_host_memory_garbage_sets_no_limit(meminfo, tmp_path):
    """Malformed files set no limit from their source: here every source is garbage or missing, so
    the answer is the physical memory."""
    root = write_tree(tmp_path, {
        "/proc/meminfo": meminfo, "/proc/self/mountinfo": "garbage\n- cgroup2\n1 2 3 - \n" + V2_MOUNT[:40],
        "/proc/self/cgroup": "no colons\n0::relative\n0::/../../etc\n",
        "/sys/fs/cgroup/memory.max": "-5\n", "/sys/fs/cgroup/memory.current": "\n",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "0x100\n", "/sys/fs/cgroup/memory/memory.usage_in_bytes": "1 2\n"})
    bytes_, source = testing.host_available_memory(root)
    assert bytes_ == PHYSICAL and source.startswith("physical memory")


def test_host_memory_of_this_machine_matches_meminfo():
    """The real files: MemAvailable read here (it moves; allow 5 %), or less where a cgroup limits."""
    text = Path("/proc/meminfo").read_text()
    meminfo = int(re.search(r"^MemAvailable:\s+(\d+) kB$", text, re.M).group(1)) * 1024
    bytes_, source = testing.host_available_memory()
    assert 0 < bytes_ <= meminfo * 1.05
    if source == "/proc/meminfo MemAvailable":
        assert bytes_ >= meminfo * 0.95
    else:
        assert source.startswith("cgroup")
