"""Records the kernels of a grammar's forced runs (feed of n tokens, then choose_token) on CUDA with
libktrace.so and prints each kernel's summed duration, longest first: where a short prefill pass
spends its time. Usage: trace_forced.py MODEL.gguf LIBKTRACE OUT.csv [n]  (then cu++filt OUT.csv)"""
import ctypes
import sys

import numpy as np

import akunu

model_path, lib_path, out_path = sys.argv[1:4]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 8
lib = ctypes.CDLL(lib_path)
m = akunu.Model(model_path, backend="cuda", context_length=4096)
engine = m._engine
mask = np.full(engine.token_mask_words, -1, dtype=np.int32)
engine._begin_constrained(list(range(100, 116)), akunu.SamplingParams().to_core())
token = engine._choose_token(mask)
engine._feed([token] * n)  # warm-up: the table and its graph
token = engine._choose_token(mask)
assert lib.ktrace_start() == 0, "CUPTI activity tracing could not start"
for _ in range(3):
    engine._feed([token] * n)
    token = engine._choose_token(mask)
assert lib.ktrace_stop(out_path.encode()) == 0
engine._end_constrained(0, "length")
