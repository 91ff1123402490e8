"""Builds and runs the fuzz targets (fuzz/README.md): the libFuzzer executables of fuzz/*.cpp and
the atheris scripts of fuzz/python/. tests/test_fuzz.py runs each for a few seconds; a long run is

    python fuzz/run.py fuzz_gguf_reader --minutes 30

which fuzzes a copy of the target's committed corpus (tests/data/fuzz/<target>/corpus/) in
--work, leaves any crash in <work>/<target>/artifacts/ and prints a row for fuzz/RUNS.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FUZZ_DATA = REPO / "tests" / "data" / "fuzz"
CPP_TARGETS = ("fuzz_gguf_reader", "fuzz_model_config", "fuzz_tokenizer")
PYTHON_TARGETS = ("fuzz_safetensors_header", "fuzz_safetensors_index", "fuzz_hf_config", "fuzz_chat_template")

# libFuzzer's limits for every run: an input that takes 10 s, or a process past 2 GiB (or one malloc
# past it), is a finding (a hang or an unbounded allocation), as a crash is.
COMMON_FLAGS = ["-rss_limit_mb=2048", "-timeout=10", "-print_final_stats=1"]
MAX_LEN = {"fuzz_gguf_reader": 65536, "fuzz_model_config": 65536, "fuzz_tokenizer": 65536,
           "fuzz_safetensors_header": 4096, "fuzz_safetensors_index": 4096, "fuzz_hf_config": 8192,
           "fuzz_chat_template": 8192}


def atheris_path() -> str | None:
    """Where atheris is importable from: already, or $AKUNU_ATHERIS_PATH (a pip --target folder)."""
    extra = os.environ.get("AKUNU_ATHERIS_PATH")
    probe = subprocess.run([sys.executable, "-c", "import atheris"], capture_output=True,
                           env=dict(os.environ, PYTHONPATH=_pythonpath(extra)))
    return (extra or "") if probe.returncode == 0 else None


def _pythonpath(*extra: str | None) -> str:
    parts = [p for p in extra if p] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(parts)


def build(build_dir: Path) -> Path:
    """Configures and builds fuzz/ with clang++; returns the folder of the executables."""
    clang = shutil.which("clang++")
    if clang is None:
        raise RuntimeError("clang++ is not installed: the libFuzzer targets need clang (apt-get install clang)")
    build_dir.mkdir(parents=True, exist_ok=True)
    generator = ["-G", "Ninja"] if shutil.which("ninja") and not (build_dir / "Makefile").exists() else []
    subprocess.run(["cmake", "-S", str(REPO / "fuzz"), "-B", str(build_dir), f"-DCMAKE_CXX_COMPILER={clang}",
                    *generator], check=True, capture_output=True, text=True)
    subprocess.run(["cmake", "--build", str(build_dir), "-j", "2"], check=True, capture_output=True, text=True)
    return build_dir


@dataclass
class RunResult:
    target: str
    returncode: int
    seconds: float
    executions: int
    coverage: int   # libFuzzer's "cov": code edges reached
    features: int   # "ft": coverage features (edges, counters, comparisons)
    corpus_files: int
    artifacts: list
    log: str

    @property
    def crashed(self) -> bool:
        return self.returncode != 0 or bool(self.artifacts)


def with_own_peak_rss(command: list) -> list:
    """`command` started through a shell that forks it. Linux carries a process's peak RSS (what
    libFuzzer's -rss_limit_mb checks) across fork and exec, so a fuzzer started straight from a large
    process (pytest after the model tests: 2.6 GB) would begin past its limit; forked from a small
    shell, its peak starts from its own size."""
    return ["sh", "-c", '"$@"; exit $?', "sh", *map(str, command)]


def _command(target: str, build_dir: Path | None) -> tuple[list, dict]:
    if target in CPP_TARGETS:
        assert build_dir is not None, "the C++ targets need build()'s folder"
        return [str(build_dir / target), f"-dict={REPO / 'fuzz' / 'gguf.dict'}"], dict(os.environ)
    script = REPO / "fuzz" / "python" / f"{target}.py"
    env = dict(os.environ, PYTHONPATH=_pythonpath(os.environ.get("AKUNU_ATHERIS_PATH")))
    dictionary = [f"-dict={REPO / 'fuzz' / 'jinja.dict'}"] if target == "fuzz_chat_template" else []
    return [sys.executable, str(script), *dictionary], env


def run(target: str, seconds: int, work: Path, build_dir: Path | None = None, extra: tuple = ()) -> RunResult:
    """Fuzzes `target` for `seconds` on a copy of its corpus in work/<target>/ (kept between runs,
    so a long run resumes where the last stopped)."""
    folder = work / target
    corpus, artifacts = folder / "corpus", folder / "artifacts"
    if not corpus.exists():
        shutil.copytree(FUZZ_DATA / target / "corpus", corpus)
    artifacts.mkdir(parents=True, exist_ok=True)
    before = set(artifacts.iterdir())
    command, env = _command(target, build_dir)
    command += [str(corpus), f"-max_len={MAX_LEN[target]}", f"-max_total_time={seconds}",
                f"-artifact_prefix={artifacts}/", *COMMON_FLAGS, *extra]
    log_path = folder / "last_run.log"  # written as the run goes: readable while it runs
    started = datetime.datetime.now()
    with open(log_path, "w") as log_file:
        process = subprocess.Popen(with_own_peak_rss(command), stdout=log_file, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True)
        try:
            # max_total_time counts from the first input; startup (instrumentation, the corpus's
            # first pass) comes on top, slow on a loaded machine.
            returncode = process.wait(timeout=2 * seconds + 900)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the shell and the fuzzer under it
            returncode = process.wait()
            log_file.write(f"\nfuzz/run.py: killed after {2 * seconds + 900} s\n")
    elapsed = (datetime.datetime.now() - started).total_seconds()
    log = log_path.read_text(errors="replace")
    return RunResult(target, returncode, elapsed, _stat(log, "number_of_executed_units"),
                     _last(log, "cov"), _last(log, "ft"), len(list(corpus.iterdir())),
                     sorted(str(p) for p in set(artifacts.iterdir()) - before), log)


def _stat(log: str, name: str) -> int:
    found = re.findall(rf"stat::{name}:\s+(\d+)", log)
    return int(found[-1]) if found else 0


def _last(log: str, name: str) -> int:
    found = re.findall(rf"\b{name}: (\d+)", log)
    return int(found[-1]) if found else 0


def runs_row(r: RunResult, commit: str) -> str:
    findings = ", ".join(os.path.basename(a) for a in r.artifacts) or "none"
    return (f"| {datetime.date.today()} | {commit} | {r.target} | {r.seconds / 60:.1f} | {r.executions} | "
            f"{r.coverage} / {r.features} | {r.corpus_files} | {findings} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="+", choices=CPP_TARGETS + PYTHON_TARGETS)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--work", type=Path, default=REPO / "build" / "fuzz-work")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "fuzz")
    args = parser.parse_args()
    build_dir = build(args.build_dir) if any(t in CPP_TARGETS for t in args.targets) else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    for target in args.targets:
        result = run(target, int(args.minutes * 60), args.work, build_dir)
        print(runs_row(result, commit), flush=True)
        if result.crashed:
            print(f"{target}: exit {result.returncode}, artifacts {result.artifacts}; "
                  f"log: {args.work / target / 'last_run.log'}", file=sys.stderr)


if __name__ == "__main__":
    main()
