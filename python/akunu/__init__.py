"""akunu: fast local LLM inference.

    from akunu import Model
    model = Model("SmolLM2-135M-Instruct.Q4_1.gguf")
    print(model.chat([{"role": "user", "content": "What is the capital of France?"}]))

The forward pass is built once at load as a dispatch table and replayed for every token;
greedy decoding chains many tokens per replay.
"""

from ._core import (
    AkunuError,
    ContextOverflowError,
    GenerationStats,
    ModelFormatError,
    Tokenizer,
    TokenizerError,
    UnsupportedError,
)
from .model import Model
from .models import default_model_path

__all__ = [
    "Model",
    "Tokenizer",
    "GenerationStats",
    "AkunuError",
    "ModelFormatError",
    "UnsupportedError",
    "ContextOverflowError",
    "TokenizerError",
    "default_model_path",
]
__version__ = "0.1.0"
