"""Shared fixtures: the SmolLM2 test model (never skipped), generated tiny GGUFs, loaded models."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from paths import smollm2_path as _smollm2_path  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    try:
        return _smollm2_path()
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)


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
    from references import reference_tokenizer

    return reference_tokenizer(smollm2_path.parent, smollm2_path.name)


@pytest.fixture(scope="session")
def tiny_gguf(gguf_dir):
    """Factory: name in tiny_models.LLAMA_SPECS -> (path, original HF model); built once per session."""
    import gguf_writer
    import tiny_models

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = gguf_writer.build_gguf(tiny_models.LLAMA_SPECS[name], gguf_dir)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def llama_spm_tokenizer_ref():
    from gguf_writer import TOKENIZER_DIR, VOCAB_GGUF
    from references import reference_tokenizer

    return reference_tokenizer(TOKENIZER_DIR, VOCAB_GGUF.name)


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory, llama_spm_tokenizer_ref):
    """tokenizer.json + tokenizer_config.json (with a chat template) for the llama-spm vocab: the
    tokenizer the tests' SafeTensors / MLX checkpoints ship (copied into them, never written)."""
    import hf_checkpoints as hc

    return hc.export_tokenizer(tmp_path_factory.mktemp("hf_tokenizer"), llama_spm_tokenizer_ref)


@pytest.fixture(scope="session")
def varied_ids(llama_spm_tokenizer_ref):
    """256-320 teacher-forcing tokens of references.VARIED_TEXT in the llama-spm vocabulary."""
    from references import varied_tokens

    ids = varied_tokens(llama_spm_tokenizer_ref)
    assert len(ids) >= 256
    return ids
