"""Prints the microbenchmarks' bandwidth summary (test_microbench.SUMMARY) after pytest-benchmark's table."""

import os

# The numpy references run on one thread: OpenBLAS's spinning worker threads would otherwise keep
# a core busy while akunu's kernels are timed (on a 2-core machine that halves a GEMV's bandwidth).
# Set before numpy is first imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def pytest_terminal_summary(terminalreporter):
    import sys

    mod = sys.modules.get("test_microbench") or sys.modules.get("benchmarks.test_microbench")
    lines = getattr(mod, "SUMMARY", None)
    if lines:
        terminalreporter.section("akunu microbenchmarks (median per replay)")
        for line in lines:
            terminalreporter.write_line(line)
