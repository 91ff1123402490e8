"""Records the kernels of two 128-token chain decodes of a GGUF on CUDA (after a warm-up that
captures the graphs) with libktrace.so. Usage: trace_decode.py MODEL.gguf LIBKTRACE OUT.csv"""
import ctypes
import sys

import akunu

model_path, lib_path, out_path = sys.argv[1:4]
lib = ctypes.CDLL(lib_path)
m = akunu.Model(model_path, backend="cuda", context_length=4096)
m._engine.reset()
m._engine.chain_decode(m._engine.prefill(list(range(100, 116))), 128)
assert lib.ktrace_start() == 0, "CUPTI activity tracing could not start"
for _ in range(2):
    m._engine.reset()
    m._engine.chain_decode(m._engine.prefill(list(range(100, 116))), 128)
assert lib.ktrace_stop(out_path.encode()) == 0
