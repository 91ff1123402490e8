"""SafeTensors files as tensor directories: each file's JSON header, and the shards of a
checkpoint (model.safetensors, or model.safetensors.index.json's weight_map), checked against the
files' sizes. The engine re-checks every offset when it maps the files."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

from . import _core
from ._core import ModelFormatError


# Element sizes of every SafeTensors dtype (so sizes can be checked even for ones we do not load).
SAFETENSORS_DTYPES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2,
                      "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
FLOAT_DTYPES = ("F32", "F16", "BF16")
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the SafeTensors format's own limit


@dataclass(frozen=True)
class StoredTensor:
    file: str
    name: str
    dtype: str
    shape: tuple
    offset: int  # absolute, in the file
    n_bytes: int

    def slice(self) -> "_core.CheckpointSlice":
        s = _core.CheckpointSlice()
        s.file, s.name, s.dtype, s.shape = self.file, self.name, self.dtype, list(self.shape)
        s.offset, s.n_bytes = self.offset, self.n_bytes
        return s


def read_safetensors_header(path: str) -> dict[str, StoredTensor]:
    """The tensor directory of one .safetensors file, checked against the file's size."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ModelFormatError(f"{path}: truncated SafeTensors file ({size} bytes, no header length)")
            n = int.from_bytes(head, "little")
            if n > MAX_HEADER_BYTES or n > size - 8:
                raise ModelFormatError(f"{path}: SafeTensors header length {n} runs past the end of the file "
                                       f"({size} bytes): truncated or not a SafeTensors file")
            raw = f.read(n)
    except OSError as e:
        raise ModelFormatError(f"{path}: cannot read ({e.strerror or e})") from e
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nested too deeply
        raise ModelFormatError(f"{path}: the SafeTensors header is not valid JSON ({e})") from e
    if not isinstance(header, dict):
        raise ModelFormatError(f"{path}: the SafeTensors header is not a JSON object")
    data_start, data_size = 8 + n, size - 8 - n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        where = f"{path}: tensor '{name}'"
        if not isinstance(info, dict):
            raise ModelFormatError(f"{where}: header entry is not an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(dtype, str):
            raise ModelFormatError(f"{where}: missing dtype")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                 for d in shape):
            raise ModelFormatError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
            raise ModelFormatError(f"{where}: data_offsets {offsets!r} must be [begin, end]")
        begin, end = offsets
        if not 0 <= begin <= end:
            raise ModelFormatError(f"{where}: data_offsets [{begin}, {end}] are not increasing")
        if end > data_size:
            raise ModelFormatError(f"{where}: data ends at byte {end} of the data section, but the file holds "
                                   f"only {data_size} bytes of data: truncated file?")
        if dtype in SAFETENSORS_DTYPES:
            need = math.prod(shape) * SAFETENSORS_DTYPES[dtype]
            if end - begin != need:
                raise ModelFormatError(f"{where}: the header gives {end - begin} bytes, but shape {shape} of {dtype} "
                                       f"needs {need}")
        out[name] = StoredTensor(path, name, dtype, tuple(shape), data_start + begin, end - begin)
    return out


def read_json(path: str, what: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ModelFormatError(f"{path}: cannot read {what} ({e.strerror or e})") from e
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deeply for the parser
        raise ModelFormatError(f"{path}: {what} is not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ModelFormatError(f"{path}: {what} is not a JSON object")
    return data


def list_tensors(path: str) -> dict[str, StoredTensor]:
    """Every tensor of the checkpoint in directory `path`: from the shard index when there is one,
    else model.safetensors, else every *.safetensors file in the directory."""
    index_path = os.path.join(path, "model.safetensors.index.json")
    single = os.path.join(path, "model.safetensors")
    if os.path.isfile(index_path):
        index = read_json(index_path, "the shard index")
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelFormatError(f"{index_path}: missing or empty 'weight_map'")
        for name, shard in weight_map.items():  # before sorting them: names of one type, hashable
            if not isinstance(shard, str) or os.path.basename(shard) != shard:
                raise ModelFormatError(f"{index_path}: bad shard file name {shard!r} for '{name}'")
        shards = {}
        for shard in sorted(set(weight_map.values())):
            shard_path = os.path.join(path, shard)
            if not os.path.isfile(shard_path):
                raise ModelFormatError(f"{path}: missing shard '{shard}' (listed in model.safetensors.index.json)")
            shards[shard] = read_safetensors_header(shard_path)
        out = {}
        for name, shard in weight_map.items():
            if name not in shards[shard]:
                raise ModelFormatError(f"{index_path}: '{name}' is listed in shard '{shard}', which does not hold it")
            out[name] = shards[shard][name]
        return out
    if os.path.isfile(single):
        return read_safetensors_header(single)
    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not files:
        raise ModelFormatError(f"{path}: no model.safetensors, no model.safetensors.index.json and no other "
                               ".safetensors files")
    out = {}
    for f in files:
        for name, t in read_safetensors_header(os.path.join(path, f)).items():
            if name in out:
                raise ModelFormatError(f"{path}: tensor '{name}' is in both {os.path.basename(out[name].file)} and {f}")
            out[name] = t
    return out
