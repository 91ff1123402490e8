"""Chain decode for the integer GEMV's clock probes (q16_probe.patch): a 16-token prefill and 64
chained tokens, twice, so that each probed kernel signature (one per layer and token) reaches its
700th launch on models of 6 layers or more."""
import sys

import akunu

model = akunu.Model(sys.argv[1], backend="cuda", context_length=4096)
for _ in range(2):
    model._engine.reset()
    first = model._engine.prefill(list(range(100, 116)))
    model._engine.chain_decode(first, 64)
print("DONE", flush=True)
