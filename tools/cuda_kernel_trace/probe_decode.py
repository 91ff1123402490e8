"""Chain decode for the integer GEMV's clock probes (q16_probe.patch): a 16-token prefill and two
64-token chunks, twice, so that every probed kernel signature reaches its 700th launch."""
import sys

import akunu

model = akunu.Model(sys.argv[1], backend="cuda", context_length=4096)
for _ in range(2):
    model.reset()
    first = model.prefill(list(range(100, 116)))
    model.chain_decode(first, 64)
print("DONE", flush=True)
