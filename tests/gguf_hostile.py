"""Hostile GGUF files for testing the reader (src/weights/gguf_file.cpp).

Use from a test::

    from gguf_hostile import hostile_gguf_cases

    @pytest.mark.parametrize(...)  # or loop
    for name, path, expected in hostile_gguf_cases(None, tmp_path):
        with pytest.raises(akunu.AkunuError) as info:
            akunu.Model(str(path))
        assert expected in str(info.value).lower(), (name, str(info.value))

Every case must raise, never crash. Expected exception classes:
  * cases whose name starts with ``unsupported_`` -> akunu.UnsupportedError
    (a well-formed file asking for something we do not know, e.g. GGML type 99);
  * all other cases -> akunu.ModelFormatError.
Every message also starts with the file path.

``hostile_gguf_cases(src_path, out_dir)``:
  * ``src_path``: a valid GGUF to cut truncated copies from (header, inside metadata keys and
    values, inside tensor infos, the padding before the data, inside tensor data). ``None``
    uses the tiny file this module writes (``write_tiny_gguf``), which keeps the cases small;
    a large real model is fine too (copies are only as long as the cut point, and data cuts
    are made in the first tensor).
  * ``out_dir``: where the files go (e.g. pytest's ``tmp_path``).

Structural cases are always built from the tiny file's layout with a small hand-written
serializer, so each breaks exactly one rule. The truncated copies use the ``gguf`` package
(gguf-py's GGUFReader) to find field boundaries to cut at.
"""
from __future__ import annotations

import os
import pathlib
import struct

GGUF_MAGIC = b"GGUF"

# GGUF metadata value types
UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64 = 4, 5, 6, 7, 8, 9, 10
# GGML tensor types
F32, Q4_0 = 0, 2


# ---------------------------------------------------------------- serializer

def _string(s: str | bytes) -> bytes:
    data = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(data)) + data


def kv_string(key: str, value: str) -> bytes:
    return _string(key) + struct.pack("<I", STRING) + _string(value)


def kv_u32(key: str, value: int) -> bytes:
    return _string(key) + struct.pack("<II", UINT32, value)


def kv_u64(key: str, value: int) -> bytes:
    return _string(key) + struct.pack("<IQ", UINT64, value)


def kv_string_array(key: str, values: list[str]) -> bytes:
    body = b"".join(_string(v) for v in values)
    return _string(key) + struct.pack("<IIQ", ARRAY, STRING, len(values)) + body


def tensor_info(name: str, dims: list[int], ggml_type: int, offset: int,
                n_dims: int | None = None) -> bytes:
    n = len(dims) if n_dims is None else n_dims
    return (_string(name) + struct.pack("<I", n) + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<IQ", ggml_type, offset))


def build_gguf(kvs: list[bytes], tensors: list[bytes], data: bytes, *, magic: bytes = GGUF_MAGIC,
               version: int = 3, kv_count: int | None = None, tensor_count: int | None = None,
               alignment: int = 32) -> bytes:
    """Header + raw kv/tensor-info blobs + padding to `alignment` + data. Counts may lie."""
    header = magic + struct.pack("<IQQ", version,
                                 len(tensors) if tensor_count is None else tensor_count,
                                 len(kvs) if kv_count is None else kv_count)
    body = header + b"".join(kvs) + b"".join(tensors)
    if tensors and alignment > 0:
        body += b"\0" * (-len(body) % alignment)
    return body + data


def _tiny_kvs() -> list[bytes]:
    return [
        kv_string("general.architecture", "llama"),
        kv_string("general.name", "tiny"),
        kv_u32("llama.context_length", 128),
        kv_string_array("tokenizer.ggml.tokens", ["a", "b", "c"]),
    ]


def _f32_bytes(n: int) -> bytes:
    return struct.pack(f"<{n}f", *[float(i) for i in range(n)])


def _tiny_tensors(**override) -> tuple[list[bytes], bytes]:
    """Two F32 tensors: token_embd.weight [4, 3] at 0 (48 bytes) and output_norm.weight [4] at 64."""
    first = dict(name="token_embd.weight", dims=[4, 3], ggml_type=F32, offset=0)
    first.update(override)
    infos = [tensor_info(**first), tensor_info("output_norm.weight", [4], F32, 64)]
    data = _f32_bytes(12) + b"\0" * 16 + _f32_bytes(4)
    return infos, data


def write_tiny_gguf(path: os.PathLike) -> pathlib.Path:
    """A small valid GGUF v3 (readable by gguf.GGUFReader): 4 metadata keys, 2 F32 tensors."""
    infos, data = _tiny_tensors()
    path = pathlib.Path(path)
    path.write_bytes(build_gguf(_tiny_kvs(), infos, data))
    return path


# ---------------------------------------------------------------- structural cases

def _structural_cases() -> list[tuple[str, bytes, str]]:
    kvs = _tiny_kvs()
    infos, data = _tiny_tensors()

    def with_first_tensor(**override) -> bytes:
        bad_infos, bad_data = _tiny_tensors(**override)
        return build_gguf(kvs, bad_infos, bad_data)

    def with_extra_kv(kv: bytes, **kw) -> bytes:
        return build_gguf(kvs + [kv], infos, data, **kw)

    huge = 1 << 60
    deep = _string("deep") + struct.pack("<I", ARRAY)
    for _ in range(20):  # array of array of ... 20 levels, one element each
        deep += struct.pack("<IQ", ARRAY, 1)
    deep += struct.pack("<IQ", UINT32, 0)

    return [
        ("bad_magic", build_gguf(kvs, infos, data, magic=b"GGUX"), "not a gguf file"),
        ("version_1", build_gguf(kvs, infos, data, version=1), "gguf version 1 is not supported"),
        ("version_4", build_gguf(kvs, infos, data, version=4), "unsupported gguf version 4"),
        ("big_endian", build_gguf(kvs, infos, data, version=3 << 24), "big-endian"),
        ("huge_kv_count", build_gguf(kvs, infos, data, kv_count=huge), "metadata entries"),
        ("huge_tensor_count", build_gguf(kvs, infos, data, tensor_count=huge), "tensors but only"),
        ("huge_key_length", build_gguf([struct.pack("<Q", huge) + b"x" * 16] + kvs, infos, data),
         "string of length"),
        ("huge_string_value",
         with_extra_kv(_string("k") + struct.pack("<IQ", STRING, huge) + b"abc"), "string of length"),
        ("huge_array_length",
         with_extra_kv(_string("k") + struct.pack("<IIQ", ARRAY, UINT32, huge)), "claims an array of"),
        ("huge_string_array_length",
         with_extra_kv(_string("k") + struct.pack("<IIQ", ARRAY, STRING, huge)), "claims an array of"),
        ("array_nesting_too_deep", with_extra_kv(deep), "nests arrays"),
        ("unknown_value_type", with_extra_kv(_string("k") + struct.pack("<II", 13, 0)),
         "unknown value type 13"),
        ("unknown_array_element_type",
         with_extra_kv(_string("k") + struct.pack("<IIQ", ARRAY, 77, 1) + b"\0" * 8),
         "unknown value type 77"),
        ("duplicate_metadata_key", with_extra_kv(kv_string("general.name", "again")),
         "duplicate metadata key 'general.name'"),
        ("alignment_zero", with_extra_kv(kv_u32("general.alignment", 0)), "power of two"),
        ("alignment_three", with_extra_kv(kv_u32("general.alignment", 3)), "power of two"),
        ("alignment_wrong_type", with_extra_kv(kv_u64("general.alignment", 32)), "expected uint32"),
        ("n_dims_0", with_first_tensor(dims=[], n_dims=0), "n_dims must be between 1 and 4"),
        ("n_dims_9", with_first_tensor(dims=[1] * 9), "n_dims must be between 1 and 4"),
        ("dim_zero", with_first_tensor(dims=[4, 0]), "equal to 0"),
        ("dims_product_overflow", with_first_tensor(dims=[1 << 32, 1 << 32, 2]), "overflows"),
        ("byte_size_overflow", with_first_tensor(dims=[1 << 62]), "overflows"),
        ("row_not_block_multiple", with_first_tensor(dims=[33, 1], ggml_type=Q4_0),
         "not divisible by the block size"),
        ("misaligned_offset", with_first_tensor(offset=4), "not a multiple of the alignment"),
        ("offset_past_eof", with_first_tensor(offset=1 << 20), "past end of file"),
        ("offset_wraps_around", with_first_tensor(offset=(1 << 64) - 32), "past end of file"),
        ("unsupported_tensor_type", with_first_tensor(ggml_type=99), "unknown ggml type 99"),
        ("duplicate_tensor_name",
         build_gguf(kvs, [infos[0], tensor_info("token_embd.weight", [4], F32, 64)], data),
         "duplicate tensor name 'token_embd.weight'"),
        ("empty_file", b"", "empty file"),
        ("three_bytes", b"GGU", "truncated file"),
    ]


# ---------------------------------------------------------------- truncated copies

def _unique_by_offset(items, offset_of):
    """Drop items whose offset was already seen (samples overlap on small files)."""
    seen, unique = set(), []
    for item in items:
        if int(offset_of(item)) not in seen:
            seen.add(int(offset_of(item)))
            unique.append(item)
    return unique


def _cut_points(src: pathlib.Path, max_fields: int = 8, max_tensors: int = 4) -> list[tuple[str, int]]:
    """(label, length) pairs: cut inside the header, a sample of kv pairs and tensor infos, the
    padding before the data and the first tensor's data. Every cut lies before the end of the
    last tensor's data, so the truncated file can never be valid."""
    from gguf import GGUFReader  # only needed for real source files

    reader = GGUFReader(src)
    cuts = [("magic", 2), ("version", 6), ("tensor_count", 11), ("kv_count", 20)]

    def field_cuts(label: str, field) -> list[tuple[str, int]]:
        size = sum(int(p.nbytes) for p in field.parts)
        start = int(field.offset)
        return [(f"{label}_name_length", start + 3), (f"{label}_name", start + 9),
                (f"{label}_middle", start + size // 2), (f"{label}_last_byte", start + size - 1)]

    kv_fields = [f for name, f in reader.fields.items() if not name.startswith("GGUF.")]
    sampled = kv_fields[: max_fields // 2] + kv_fields[-(max_fields // 2):]
    for field in _unique_by_offset(sampled, lambda f: f.offset):
        cuts += field_cuts(f"kv_{field.name}", field)
    tensors = list(reader.tensors)
    sampled_tensors = tensors[: max_tensors // 2] + tensors[-(max_tensors // 2):]
    for t in _unique_by_offset(sampled_tensors, lambda t: t.field.offset):
        cuts += field_cuts(f"tensor_info_{t.name}", t.field)
    if tensors:
        first = min(tensors, key=lambda t: int(t.data_offset))
        data_start = int(reader.data_offset)
        info_end = int(tensors[-1].field.offset) + sum(int(p.nbytes) for p in tensors[-1].field.parts)
        if data_start > info_end:
            cuts.append(("data_padding", data_start - 1))
        cuts.append(("data_first_byte", int(first.data_offset) + 1))
        cuts.append(("data_middle", int(first.data_offset) + int(first.n_bytes) // 2))
    end = max((int(t.data_offset) + int(t.n_bytes) for t in tensors), default=os.path.getsize(src))
    return [(label, n) for label, n in cuts if 0 < n < end]


def _truncated_cases(src: pathlib.Path, out_dir: pathlib.Path) -> list[tuple[str, pathlib.Path, str]]:
    cases = []
    with open(src, "rb") as f:
        for label, length in _unique_by_offset(_cut_points(src), lambda cut: cut[1]):
            f.seek(0)
            path = out_dir / f"truncated_{length}.gguf"
            path.write_bytes(f.read(length))
            safe = "".join(c if c.isalnum() or c in "_." else "_" for c in label)
            cases.append((f"truncated_{safe}_at_{length}", path, "truncated file"))
    return cases


# ---------------------------------------------------------------- entry point

def hostile_gguf_cases(src_path: os.PathLike | None,
                       out_dir: os.PathLike) -> list[tuple[str, pathlib.Path, str]]:
    """Write hostile GGUF files into `out_dir`; return (case_name, file_path, expected lowercase
    substring of the error message). See the module docstring for the expected exception classes."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = []
    for name, blob, expected in _structural_cases():
        path = out_dir / f"{name}.gguf"
        path.write_bytes(blob)
        cases.append((name, path, expected))

    directory = out_dir / "a_directory.gguf"
    directory.mkdir(exist_ok=True)
    # Through akunu.Model these surface as IsADirectoryError / FileNotFoundError; the reader's own
    # messages ("is a directory", "no such file") contain the same words.
    cases.append(("directory", directory, "directory"))
    cases.append(("nonexistent", out_dir / "does_not_exist.gguf", "not"))

    src = pathlib.Path(src_path) if src_path is not None else write_tiny_gguf(out_dir / "tiny.gguf")
    cases += _truncated_cases(src, out_dir)
    return cases
