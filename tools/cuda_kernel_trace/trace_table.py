"""Per-kernel cost in graph replay from ktrace's CSV (start_ns,end_ns,grid_x,block_x,name).

Tokens start at the embedding kernel. For 40 tokens of the middle of the recording it prints, per
kernel of a token: its median duration and its median incremental cost (its end minus the previous
kernel's end; with PDL a kernel starts before the previous one ends, so durations overlap), then the
sums of both per kernel name and grid."""
import re
import statistics
import sys

kernels = []
for line in open(sys.argv[1]):
    start, end, grid, block, name = line.rstrip("\n").split(",", 4)
    kernels.append((int(start), int(end) - int(start), re.sub(r"akunu::cuda::", "", name)[:70], f"{grid}x{block}"))
kernels.sort()
starts = [i for i, k in enumerate(kernels) if "embed" in k[2]]
tokens = [kernels[a:b] for a, b in zip(starts, starts[1:])]
n = statistics.mode(len(t) for t in tokens)
tokens = [t for t in tokens if len(t) == n]
mid = tokens[len(tokens) // 2: len(tokens) // 2 + 40]
period = statistics.median(b[0][0] - a[0][0] for a, b in zip(mid, mid[1:]))
print(f"{len(tokens)} tokens of {n} kernels; token period {period / 1e3:.1f} us (median of {len(mid)})")


def end(k):
    return k[0] + k[1]


sums = {}
for i in range(n):
    duration = statistics.median(t[i][1] for t in mid) / 1e3
    added = statistics.median((end(t[i]) - end(t[i - 1])) if i else t[i][1] for t in mid) / 1e3
    name, grid = mid[0][i][2], mid[0][i][3]
    entry = sums.setdefault(f"{name[:40]} {grid}", [0, 0.0, 0.0])
    entry[0] += 1
    entry[1] += added
    entry[2] += duration
    print(f"{i:4d} {name[:60]:60s} {grid:>12s} duration {duration:6.2f} us, adds {added:6.2f} us")
print("--- per kernel: count, sum of added us, sum of durations us")
for key, (count, added, duration) in sorted(sums.items(), key=lambda kv: -kv[1][1]):
    print(f"{count:4d} {added:8.1f} {duration:8.1f}  {key}")
