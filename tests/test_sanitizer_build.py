"""The sanitizer build (AKUNU_SANITIZE, cmake/sanitizers.cmake; docs/adr/0023-sanitizer-build.md).

- Under tools/sanitizer_tests.sh (a module built with address,undefined, the ASan runtime preloaded)
  each sanitizer reports the bug akunu._testing.sanitizer_self_test commits, in the file its
  log_path names, with the file and line of the bug: the proof that a clean run of the other tests
  under the script means something (the code is instrumented, the runtime is loaded, a report
  reaches the file the script checks).
- In any other build the self-test refuses (RuntimeError) and commits nothing.
- CMake refuses sanitizers the build does not support, and CUDA together with them, naming why.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# bug -> (the sanitizer that catches it, the words of its report)
BUGS = {
    "heap-buffer-overflow": ("address", "ERROR: AddressSanitizer: heap-buffer-overflow"),
    "signed-integer-overflow": ("undefined", "runtime error: signed integer overflow"),
}

_CHILD = "import sys; from akunu import _testing; _testing.sanitizer_self_test(sys.argv[1])"


def _with_log_path(options: str, path: Path) -> str:
    # Sanitizer flags are read left to right, the last value winning: ours replaces the caller's.
    return ":".join(part for part in (options, f"log_path={path}") if part)


@pytest.fixture(scope="module")
def built_with() -> set[str]:
    from akunu import _testing

    return set(filter(None, _testing.sanitizers().split(",")))


@pytest.mark.parametrize("bug", list(BUGS))
def test_sanitizer_reports_the_self_test_bug(bug, built_with, tmp_path):
    sanitizer, report_words = BUGS[bug]
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = _with_log_path(env.get("ASAN_OPTIONS", ""), tmp_path / "asan")
    env["UBSAN_OPTIONS"] = _with_log_path(env.get("UBSAN_OPTIONS", ""), tmp_path / "ubsan")
    r = subprocess.run([sys.executable, "-c", _CHILD, bug], capture_output=True, text=True, timeout=120, env=env)
    reports = "".join(p.read_text(errors="replace") for p in sorted(tmp_path.glob("*san.*")))

    if sanitizer in built_with:
        assert r.returncode != 0, f"the {bug} self-test ran to the end under {sanitizer}: {r.stderr[-2000:]}"
        assert report_words in reports, f"no '{report_words}' report in {tmp_path}:\n{reports[-3000:]}\n{r.stderr[-2000:]}"
        # Symbolized down to the line: the build keeps its debug info and symbols.
        assert "bind_testing_sanitizer.cpp:" in reports, reports[-3000:]
    else:
        assert r.returncode == 1 and "RuntimeError" in r.stderr, r.stderr[-2000:]
        assert f"no {sanitizer} sanitizer" in r.stderr or "needs a sanitizer build" in r.stderr, r.stderr[-2000:]
        assert reports == ""


def test_self_test_names_its_bugs():
    from akunu import _testing

    with pytest.raises(ValueError, match="unknown sanitizer self-test 'use-after-free'.*heap-buffer-overflow"):
        _testing.sanitizer_self_test("use-after-free")


def _configure(tmp_path: Path, *defines: str) -> subprocess.CompletedProcess:
    cmake = shutil.which("cmake")
    assert cmake, "cmake is not on the PATH (it comes with the test extra)"
    # The build tools are not under test: they run without a preloaded sanitizer runtime.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.run([cmake, "-S", str(ROOT), "-B", str(tmp_path / "build"), *defines],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("value, unsupported", [("thread", "thread"), ("address,memory", "memory"),
                                                ("adress", "adress")])
def test_cmake_refuses_unsupported_sanitizers(value, unsupported, tmp_path):
    r = _configure(tmp_path, f"-DAKUNU_SANITIZE={value}", "-DAKUNU_CUDA=OFF")
    assert r.returncode != 0, r.stdout[-2000:]
    assert f"unknown or unsupported sanitizer '{unsupported}'" in r.stderr, r.stderr[-2000:]


def test_cmake_refuses_sanitizers_with_cuda_on(tmp_path):
    r = _configure(tmp_path, "-DAKUNU_SANITIZE=address,undefined", "-DAKUNU_CUDA=ON")
    assert r.returncode != 0, r.stdout[-2000:]
    assert "builds without CUDA: pass AKUNU_CUDA=OFF" in r.stderr, r.stderr[-2000:]
