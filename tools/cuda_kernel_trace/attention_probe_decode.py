"""Chain decode for the decode-attention probe (attention_probe.patch): a 16-token prefill and 64 chained
tokens, twice. The probe prints every block's phase times at the 41st replay of each layer's attention
(about token 25 of the first chain, 57 keys). Usage: attention_probe_decode.py MODEL.gguf > probe.txt"""
import sys

import akunu

model = akunu.Model(sys.argv[1], backend="cuda", context_length=4096)
for _ in range(2):
    model._engine.reset()
    first = model._engine.prefill(list(range(100, 116)))
    model._engine.chain_decode(first, 64)
print("DONE", flush=True)
