"""atheris target: the input is a checkpoint's model.safetensors.index.json (the shard index);
akunu.safetensors_index.list_tensors reads it in a folder holding two small shards (a.safetensors:
tensors "a" and "b"; b.safetensors: "c") and resolves every tensor to its shard. A bad index must
raise akunu.ModelFormatError; any other exception, a hang or a crash is a finding.
"""
import json
import os
import struct
import sys
import tempfile

if __name__ == "__main__":  # fuzzing: akunu's modules are first imported under atheris's coverage
    import atheris

    with atheris.instrument_imports(include=["akunu"]):
        import akunu.safetensors_index  # noqa: F401

from akunu import ModelFormatError
from akunu.safetensors_index import list_tensors

FOLDER = tempfile.mkdtemp(prefix="akunu_fuzz_")
INDEX = os.path.join(FOLDER, "model.safetensors.index.json")


def _write_shard(name: str, tensors: list) -> None:
    header = {t: {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]} for i, t in enumerate(tensors)}
    text = json.dumps(header).encode()
    with open(os.path.join(FOLDER, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"\0" * (8 * len(tensors)))


_write_shard("a.safetensors", ["a", "b"])
_write_shard("b.safetensors", ["c"])


def fuzz_one_input(data: bytes) -> None:
    with open(INDEX, "wb") as f:
        f.write(data)
    try:
        tensors = list_tensors(FOLDER)
    except ModelFormatError as e:
        str(e)
        return
    assert set(tensors) <= {"a", "b", "c"}, tensors


def main() -> None:
    import atheris  # only to fuzz: tests/test_fuzz_regressions.py imports fuzz_one_input without it

    atheris.Setup(sys.argv, fuzz_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
