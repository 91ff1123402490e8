"""Chain decode for the probes of this folder: a 16-token prefill and 64 chained tokens, twice. The
integer GEMV's clock probes (q16_probe.patch) then reach each kernel signature's 700th launch (one a
layer and token) on models of 6 layers or more; the decode attention's (attention_probe.patch) each
layer's 41st replay, about token 25 of the first chain (57 keys)."""
import sys

import akunu

model = akunu.Model(sys.argv[1], backend="cuda", context_length=4096)
for _ in range(2):
    model._engine.reset()
    first = model._engine.prefill(list(range(100, 116)))
    model._engine.chain_decode(first, 64)
print("DONE", flush=True)
