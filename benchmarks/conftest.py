"""Prints the microbenchmarks' bandwidth summary (test_microbench.SUMMARY) after pytest-benchmark's table."""


def pytest_terminal_summary(terminalreporter):
    import sys

    mod = sys.modules.get("test_microbench") or sys.modules.get("benchmarks.test_microbench")
    lines = getattr(mod, "SUMMARY", None)
    if lines:
        terminalreporter.section("akunu microbenchmarks (median per replay)")
        for line in lines:
            terminalreporter.write_line(line)
