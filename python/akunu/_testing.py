"""Test and benchmark seams of the native core (akunu._core._testing). Not API.

These reach below akunu.Model into single kernels, commands and counters, for the tests
(tests/), the microbenchmarks (benchmarks/test_microbench.py) and the tools: run one CPU row
kernel on raw GGUF bytes (dequantize, gemm, ...), one command on a new device of any backend
(device_gemm, device_attention, device_sample, ...), one kernel as a timed dispatch table
(bench_gemm_setup, KernelBench, ...), read the CUDA path counters (cuda_q16_handoffs,
cuda_settled_accumulates, cuda_cublas_gemms, cuda_pair_gemvs), run the loader's MLX conversion (mlx_convert), force
the memory the memory plan sees as available (set_available_memory_override /
clear_available_memory_override) and read the host's available memory from a fake /proc tree
(host_available_memory). They follow the engine's
internals and may change or disappear in any release; `import akunu` does not import them.
"""

from ._core import _testing as _native

__all__ = sorted(name for name in dir(_native) if not name.startswith("_"))
globals().update({name: getattr(_native, name) for name in __all__})
