"""The fuzzers build and run clean for a short while (fuzz/README.md): the libFuzzer targets
(clang++ and CMake; clang is required, never skipped: CI installs it) and the atheris targets.
Each runs SECONDS on its committed corpus and must end without a crash, a sanitizer report, a
timeout or an out-of-memory, and must actually execute inputs. Long runs: fuzz/run.py."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fuzz_run", REPO / "fuzz" / "run.py")
fuzz_run = importlib.util.module_from_spec(_spec)  # fuzz/run.py: the build and the runs, as a long run does them
sys.modules["fuzz_run"] = fuzz_run  # its dataclass looks its module up there
_spec.loader.exec_module(fuzz_run)

SECONDS = 12  # each of 7 targets: with the instrumented build, about 3 minutes on 2 cores


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> Path:
    try:
        return fuzz_run.build(tmp_path_factory.mktemp("fuzz_build"))
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"building fuzz/ failed:\n{e.stdout}\n{e.stderr}", pytrace=False)


@pytest.fixture(scope="module")
def atheris_dir(tmp_path_factory) -> str:
    """A folder atheris imports from: where it is installed already, else a pip --target install of
    its newest wheel for this Python (no source build: that needs libFuzzer's sources)."""
    found = fuzz_run.atheris_path()
    if found is not None:
        return found
    folder = str(tmp_path_factory.mktemp("atheris"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--only-binary=:all:", "--target", folder,
                           "atheris"], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"pip install atheris failed:\n{done.stderr[-2000:]}", pytrace=False)
    return folder


def _check(result: fuzz_run.RunResult) -> None:
    assert not result.crashed, f"{result.target}: exit {result.returncode}, {result.artifacts}\n{result.log[-6000:]}"
    assert result.executions > 100, f"{result.target} ran only {result.executions} inputs\n{result.log[-3000:]}"
    assert result.coverage > 0, result.log[-3000:]


# The runs work in pytest's tmp_path, which outlives a failure (work/<target>/last_run.log).
@pytest.mark.parametrize("target", fuzz_run.CPP_TARGETS)
def test_libfuzzer_target_runs_clean(target, build_dir, tmp_path):
    _check(fuzz_run.run(target, SECONDS, tmp_path, build_dir))


@pytest.mark.parametrize("target", fuzz_run.PYTHON_TARGETS)
def test_atheris_target_runs_clean(target, atheris_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("AKUNU_ATHERIS_PATH", atheris_dir)
    _check(fuzz_run.run(target, SECONDS, tmp_path))


@pytest.mark.parametrize("target", fuzz_run.CPP_TARGETS)
def test_regressions_run_clean_in_the_fuzzers(target, build_dir):
    """The GGUF regression files (tests/test_fuzz_regressions.py replays them through Python) pass
    the C++ targets too, under their sanitizers and memory limit: e.g. block_count_huge, which made
    fuzz_model_config report malloc(4294967295) before the bound."""
    files = sorted((REPO / "tests" / "data" / "fuzz" / "fuzz_model_config" / "regressions").iterdir())
    done = subprocess.run(fuzz_run.with_own_peak_rss([build_dir / target, *files, *fuzz_run.COMMON_FLAGS]),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-6000:]
    assert done.stderr.count("Executed ") == len(files), done.stderr[-3000:]


_PEAK_PROBE = """
import resource, subprocess, sys
sys.path.insert(0, sys.argv[1])
from run import with_own_peak_rss
big = bytearray(1024 << 20)
big[::4096] = b"x" * len(big[::4096])  # touch every page: a 1 GiB peak
child = [sys.executable, "-c", "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10)"]
print(subprocess.run(child, capture_output=True, text=True).stdout.strip(),
      subprocess.run(with_own_peak_rss(child), capture_output=True, text=True).stdout.strip())
"""


def test_fuzzers_start_with_their_own_peak_rss():
    """A fuzzer's -rss_limit_mb counts from its own size, not its launcher's: started from a process
    with a 1 GiB peak, a direct child inherits the peak (Linux keeps it across fork and exec) and
    one started through with_own_peak_rss does not. Without it, every run in CI's late pytest
    process (2.6 GB) ended at once in out-of-memory."""
    done = subprocess.run([sys.executable, "-c", _PEAK_PROBE, str(REPO / "fuzz")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    inherited, own = map(int, done.stdout.split())
    assert inherited >= 1024, f"a direct child's peak {inherited} MiB: the probe did not reach a 1 GiB peak"
    assert own < 256, f"a child started through with_own_peak_rss peaked at {own} MiB"
