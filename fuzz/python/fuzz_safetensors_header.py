"""atheris target: the input is a .safetensors file; akunu.safetensors_index.read_safetensors_header
reads its header (the JSON tensor directory) and checks it against the file's size. A bad file
must raise akunu.ModelFormatError; any other exception, a hang or a crash is a finding.

Run through fuzz/run.py (fuzz/README.md) or directly: python fuzz/python/fuzz_safetensors_header.py CORPUS_DIR
"""
import os
import sys
import tempfile

if __name__ == "__main__":  # fuzzing: akunu's modules are first imported under atheris's coverage
    import atheris

    with atheris.instrument_imports(include=["akunu"]):
        import akunu.safetensors_index  # noqa: F401

from akunu import ModelFormatError
from akunu.safetensors_index import read_safetensors_header

FOLDER = tempfile.mkdtemp(prefix="akunu_fuzz_")
PATH = os.path.join(FOLDER, "model.safetensors")


def fuzz_one_input(data: bytes) -> None:
    with open(PATH, "wb") as f:
        f.write(data)
    try:
        tensors = read_safetensors_header(PATH)
    except ModelFormatError as e:
        str(e)  # a message that is text
        return
    for t in tensors.values():  # what the engine maps: inside the file, as many bytes as the shape needs
        assert 8 <= t.offset and t.offset + t.n_bytes <= len(data), t


def main() -> None:
    import atheris  # only to fuzz: tests/test_fuzz_regressions.py imports fuzz_one_input without it

    atheris.Setup(sys.argv, fuzz_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
