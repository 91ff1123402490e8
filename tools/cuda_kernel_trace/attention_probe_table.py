"""Phases of the decode attention's blocks from the APROBE lines of a build with attention_probe.patch.

Each line is one block (one query head, one split) of one layer's attention: %globaltimer stamps of
thread 0 at entry, end of the preloads, return from the PDL wait, end of its key loop, the merged
block state and the end, then per-warp first / last stamps (lane 0 of each warp) after q is rotated,
after the first scores, at the end of the key loop and once the accumulators are final, and thread 0's
stamp after the block barrier. Prints, in us from the first wait return of the block's layer, the
median and the 10th / 90th percentiles over all blocks and layers."""
import collections
import re
import sys

import numpy as np

LINE = re.compile(r"APROBE h=(\d+) z=(\d+) keys=(\d+) kc=(\w+) t=([\d,]+) w=([\d,]+) s=(\d+)")
layers = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = LINE.search(line)
    if m:
        layers[m.group(4)].append(([int(x) for x in m.group(5).split(",")], [int(x) for x in m.group(6).split(",")],
                                   int(m.group(7))))
if not layers:
    sys.exit("no APROBE lines")
rows = []
for blocks in layers.values():
    w0 = min(t[2] for t, _, _ in blocks)
    for t, w, sync in blocks:
        r = [(x - w0) / 1e3 for x in (t[0], t[1], t[2], w[0], w[1], w[3], w[4], w[6], w[7], w[9], w[10], t[3], sync,
                                      t[4], t[5])]
        rows.append(r)
a = np.array(rows)
names = ["entry", "preloads issued", "wait returns", "q rotated (first warp)", "q rotated (last warp)",
         "first scores (first)", "first scores (last)", "key loop end (first)", "key loop end (last)",
         "accumulators (first)", "accumulators (last)", "thread 0 loop end", "after the barrier", "merged state",
         "end"]
print(f"{len(layers)} layers, {len(rows)} blocks")
for i, n in enumerate(names):
    print(f"{n:24s} {np.median(a[:, i]):7.2f} us  (p10 {np.percentile(a[:, i], 10):6.2f}, p90 {np.percentile(a[:, i], 90):6.2f})")
