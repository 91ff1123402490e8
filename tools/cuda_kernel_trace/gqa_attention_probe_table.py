"""Phases of the long-context (GQA) decode attention's blocks from the GQAPROBE lines of a build with
gqa_attention_probe.patch.

Each line is one block (one KV head, one split of the keys) of one layer's attention, with thread 0's
%globaltimer stamps (the patch's header names them). Prints, in us from the first PDL-wait return among
the blocks of the block's layer, the median and the 10th / 90th percentiles of each phase over all
blocks and layers, for the blocks that merged the splits and the others apart; then the
median span of a layer's attention from its first wait return to its last block's end."""
import collections
import re
import sys

import numpy as np

LINE = re.compile(r"GQAPROBE kv=(\d+) z=(\d+) active=(\d+) keys=(\d+) kc=(\w+) t=([\d,]+)")
layers = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = LINE.search(line)
    if m:
        layers[m.group(5)].append((int(m.group(1)), int(m.group(3)), [int(x) for x in m.group(6).split(",")]))
if not layers:
    sys.exit("no GQAPROBE lines")
NAMES = ["entry", "early stages issued", "wait returns", "q rows written", "first chunk landed", "key loop end",
         "warp states stored", "outputs / partials", "arrival counted", "end"]
rows = {"merging": [], "other": []}
spans = []
for blocks in layers.values():
    w0 = min(t[2] for _, _, t in blocks)
    spans.append((max(t[9] for _, _, t in blocks) - w0) / 1e3)
    # The blocks that merged: the only split of a KV head, or the last of its splits to arrive.
    last_arrival = {}
    for kv, active, t in blocks:
        if active > 1 and t[8] > last_arrival.get(kv, 0):
            last_arrival[kv] = t[8]
    for kv, active, t in blocks:
        merging = active == 1 or t[8] == last_arrival[kv]
        rows["merging" if merging else "other"].append([(x - w0) / 1e3 if x else float("nan") for x in t])
splits = sorted({active for blocks in layers.values() for _, active, _ in blocks})
print(f"{len(layers)} layers, {sum(len(b) for b in layers.values())} blocks, splits per KV head {splits}")
for kind, r in rows.items():
    if not r:
        continue
    a = np.array(r)
    print(f"--- {kind} blocks ({len(r)})")
    for i, n in enumerate(NAMES):
        col = a[:, i][~np.isnan(a[:, i])]
        if col.size:
            print(f"{n:22s} {np.median(col):7.2f} us  (p10 {np.percentile(col, 10):6.2f}, p90 {np.percentile(col, 90):6.2f})")
print(f"a layer's attention, first wait return to last end: median {np.median(spans):.2f} us")
