"""Sums a ktrace CSV (start_ns,end_ns,grid_x,block_x,name; demangled) per kernel name, longest first."""
import collections
import sys

total, calls = collections.Counter(), collections.Counter()
for line in open(sys.argv[1]):
    start, end, grid, block, name = line.rstrip("\n").split(",", 4)
    key = f"{name[:110]} grid {grid} block {block}"
    total[key] += int(end) - int(start)
    calls[key] += 1
for key, ns in total.most_common(25):
    print(f"{ns / 1e6:8.3f} ms {calls[key]:4d} calls  {key}")
print(f"all: {sum(total.values()) / 1e6:.3f} ms")
