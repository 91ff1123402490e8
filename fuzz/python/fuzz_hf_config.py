"""atheris target: the input is a checkpoint's config.json; the loader's own steps read it
(akunu.safetensors_index.read_json, then akunu.hf_checkpoint.read_config for the ModelConfig and
RoPE tables, and quantization_config for MLX's "quantization"). A bad config must raise
akunu.ModelFormatError or akunu.UnsupportedError; any other exception, a hang, a crash or an
allocation that grows with a number in the file is a finding.
"""
import os
import sys
import tempfile

if __name__ == "__main__":  # fuzzing: akunu's modules are first imported under atheris's coverage
    import atheris

    with atheris.instrument_imports(include=["akunu"]):
        import akunu.hf_checkpoint  # noqa: F401

from akunu import ModelFormatError, UnsupportedError
from akunu.hf_checkpoint import quantization_config, read_config
from akunu.safetensors_index import read_json

FOLDER = tempfile.mkdtemp(prefix="akunu_fuzz_")
PATH = os.path.join(FOLDER, "config.json")


def fuzz_one_input(data: bytes) -> None:
    with open(PATH, "wb") as f:
        f.write(data)
    try:
        cfg = read_json(PATH, "config.json")
        checkpoint = read_config(cfg, FOLDER)
        quantization_config(cfg, FOLDER)
    except (ModelFormatError, UnsupportedError) as e:
        str(e)
        return
    c = checkpoint.config
    assert len(c.rope_inv_freq) == c.rope_dim // 2 and len(c.layer_sliding) == c.n_layers


def main() -> None:
    import atheris  # only to fuzz: tests/test_fuzz_regressions.py imports fuzz_one_input without it

    atheris.Setup(sys.argv, fuzz_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
