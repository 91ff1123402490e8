"""akunu: fast local LLM inference.

    from akunu import Model, SamplingParams
    model = Model("SmolLM2-135M-Instruct.Q4_1.gguf")   # or a Hugging Face checkpoint directory,
    # or Model.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")
    print(model.chat([{"role": "user", "content": "What is the capital of France?"}]))
    print(model.generate("The sea is", SamplingParams(temperature=0.7, top_p=0.9, seed=1, max_tokens=32)))

The forward pass is built once at load as a dispatch table and replayed for every token;
greedy decoding chains many tokens per replay.
"""

from ._core import (
    AkunuError,
    ContextOverflowError,
    GenerationStats,
    ModelFormatError,
    OutOfMemoryError,
    Tokenizer,
    TokenizerError,
    UnsupportedError,
    built_backends,
)
from .grammar import Grammar, GrammarError
from .hf_tokenizer import HFTokenizer
from .model import ContextLengthWarning, Model
from .models import default_model_path
from .sampling import SamplingParams

__all__ = [
    "Model",
    "SamplingParams",
    "Grammar",
    "GrammarError",
    "Tokenizer",
    "HFTokenizer",
    "GenerationStats",
    "AkunuError",
    "ModelFormatError",
    "UnsupportedError",
    "ContextOverflowError",
    "TokenizerError",
    "OutOfMemoryError",
    "ContextLengthWarning",
    "default_model_path",
    "built_backends",
]
__version__ = "0.1.0"
