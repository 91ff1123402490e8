"""Records the kernels of two 128-token chain decodes of a GGUF on CUDA (after a warm-up that
captures the graphs) with libktrace.so. Usage: trace_decode.py MODEL.gguf LIBKTRACE OUT.csv [DEPTH
[KV_CACHE_DTYPE]]: DEPTH tokens (default 16) are prefilled untimed before each decode, as
`bench_decode.py -d` does; KV_CACHE_DTYPE is f16 (default) or q8_0."""
import ctypes
import sys

import akunu

model_path, lib_path, out_path = sys.argv[1:4]
depth = int(sys.argv[4]) if len(sys.argv) > 4 else 16
kv_cache_dtype = sys.argv[5] if len(sys.argv) > 5 else "f16"
lib = ctypes.CDLL(lib_path)
m = akunu.Model(model_path, backend="cuda", context_length=max(4096, depth + 256), kv_cache_dtype=kv_cache_dtype)
prompt = [100 + i % 1000 for i in range(depth)]


def decode():
    m._engine.reset()
    m._engine.chain_decode(m._engine.prefill(prompt), 128)


decode()
# The prefill is recorded too; trace_table.py keeps the decode's tokens (those of the most common
# kernel count).
assert lib.ktrace_start() == 0, "CUPTI activity tracing could not start"
for _ in range(2):
    decode()
assert lib.ktrace_stop(out_path.encode()) == 0
