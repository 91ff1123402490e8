"""Chain decode for the probes of this folder: a 16-token prefill and 64 chained tokens, twice. The
integer GEMV's clock probes (q16_probe.patch) then reach each kernel signature's 700th launch (one a
layer and token) on models of 6 layers or more; the decode attention's (attention_probe.patch) each
layer's 41st replay, about token 25 of the first chain (57 keys). Usage: probe_decode.py MODEL.gguf
[DEPTH [KV_CACHE_DTYPE]]: a DEPTH-token prefill instead of 16 (gqa_attention_probe.patch: e.g. 16384,
the long-context kernel's 41st replay at token 41), on an f16 (default) or q8_0 cache."""
import sys

import akunu

depth = int(sys.argv[2]) if len(sys.argv) > 2 else 16
kv_cache_dtype = sys.argv[3] if len(sys.argv) > 3 else "f16"
model = akunu.Model(sys.argv[1], backend="cuda", context_length=max(4096, depth + 256), kv_cache_dtype=kv_cache_dtype)
prompt = [100 + i % 1000 for i in range(depth)]
for _ in range(2):
    model._engine.reset()
    first = model._engine.prefill(prompt)
    model._engine.chain_decode(first, 64)
print("DONE", flush=True)
