"""Phases of the integer GEMV's blocks from the PROBE lines of a build with q16_probe.patch applied.

Each line is one block of one launch (every fourth block, and the last, of each kernel signature's
700th launch): its start and end in %globaltimer ns, and clock64 cycles of its phases as thread 0
saw them. Prints, per kernel signature in start order: the spread of its blocks' starts and ends
(us, from the first probed start) and the median and largest cycles of each phase: prologue (the
first weight loads issued), wait (for the previous kernel, PDL), quant (x quantized into shared
memory), loop (the products) and store (the block's reduction and stores)."""
import collections
import re
import statistics
import sys

LINE = re.compile(r"PROBE K=(\d+) G=(\d+) grid=(\d+) warps=(\d+) norm=(\d+) blk=\d+ sm=\d+ t0=(\d+) t1=(\d+) c=([-\d,]+)")
PHASES = ["prologue", "wait", "quant", "loop", "store"]

blocks = collections.defaultdict(list)  # (K, groups, grid, warps, norm) -> [(start, end, cycles)]
for line in open(sys.argv[1]):
    m = LINE.match(line)
    if m:
        key = tuple(int(m.group(i)) for i in range(1, 6))
        blocks[key].append((int(m.group(6)), int(m.group(7)), [int(c) for c in m.group(8).split(",")]))
if not blocks:
    sys.exit("no PROBE lines")

kernels = sorted(blocks.items(), key=lambda kv: min(b[0] for b in kv[1]))
origin = min(b[0] for b in kernels[0][1])
for (k, groups, grid, warps, norm), bs in kernels:
    starts = sorted(b[0] - origin for b in bs)
    ends = sorted(b[1] - origin for b in bs)
    med = [statistics.median(b[2][i] for b in bs) for i in range(len(PHASES))]
    top = [max(b[2][i] for b in bs) for i in range(len(PHASES))]
    print(f"K={k:5d} groups={groups:5d} grid={grid:5d} warps={warps:2d} norm={norm} ({len(bs)} blocks) "
          f"start {starts[0] / 1e3:.2f}..{starts[-1] / 1e3:.2f} us, end {ends[0] / 1e3:.2f}..{ends[-1] / 1e3:.2f} us | "
          + " ".join(f"{name} {m:.0f}/{t}" for name, m, t in zip(PHASES, med, top)) + " cycles (median/max)")
