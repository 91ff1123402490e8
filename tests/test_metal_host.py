"""The Metal backend's host side, checked on Linux (it is built on macOS only):

- the embedding of the kernels (cmake/embed_metal_sources.cmake): metal/*.metal as one Metal source
  in a C++ header, which MetalDevice compiles at load on a Mac without the offline Metal compiler;
- src/backend/metal/metal_device.mm (MetalDevice, Objective-C++ with ARC), compiled with clang
  against stub Apple headers that declare exactly the API it uses (tests/metal_stubs/README.md),
  and create_device.cpp with the Metal backend in.

The Objective-C++ checks need clang++ (g++ has no ARC) and fail without it, naming the Debian/Ubuntu
package (`clang`; CI's .ci/run installs it)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EMBED_SCRIPT = REPO / "cmake" / "embed_metal_sources.cmake"
METAL_DEVICE_MM = REPO / "src" / "backend" / "metal" / "metal_device.mm"
STUBS = REPO / "tests" / "metal_stubs"
CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
CLANG = shutil.which("clang++")

# clang++ on a Linux host, made to read metal_device.mm as Apple's compiler does:
#   -fobjc-runtime=macosx-13.0  Apple's Objective-C runtime (Linux defaults to the GNU one, whose
#                               ARC and bridging rules differ); 13.0: the Metal 3 floor
#   -fblocks                    blocks, on by default only on Apple targets (Metal's deallocator)
#   -fobjc-arc                  as the macOS build compiles it (CMakeLists.txt)
#   -isystem tests/metal_stubs  <Foundation/Foundation.h>, <Metal/Metal.h>, ... from the stubs
OBJCXX_FLAGS = ["-x", "objective-c++", "-std=c++17", "-fobjc-arc", "-fblocks", "-fobjc-runtime=macosx-13.0",
                "-fsyntax-only", "-Werror", "-Wall", "-Wextra", "-Wno-unused-parameter", "-isystem", str(STUBS),
                "-I", str(REPO / "src"), "-DAKUNU_HAS_METAL=1"]


@pytest.fixture
def clang() -> str:
    assert CLANG, "clang++ is needed to compile the Objective-C++ Metal host (Debian/Ubuntu: apt-get install clang)"
    return CLANG

TABLE_KERNEL = re.compile(r'^\s*\{"(\w+)", \d+, \d+\},', re.M)  # a line of metal_kernels.cpp's table
LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"', re.M)
RAW_PIECE = re.compile(r'R"akunu_msl\((.*?)\)akunu_msl"', re.S)
PIECE_LIMIT = 16000  # bytes per raw string literal (embed_metal_sources.cmake)


def embed(out_dir: Path, root: Path = REPO) -> subprocess.CompletedProcess:
    header = out_dir / "metal_embedded_sources.h"
    return subprocess.run(["cmake", f"-DAKUNU_ROOT={root}", f"-DOUTPUT={header}", "-P", str(EMBED_SCRIPT)],
                          capture_output=True, text=True)


def embedded_parts(header: Path) -> list[str]:
    """The raw string pieces of kEmbeddedMetalSource."""
    return RAW_PIECE.findall(header.read_text())


def table_kernels() -> list[str]:
    """Every kernel of the Metal kernel table (src/backend/metal/metal_kernels.cpp)."""
    names = TABLE_KERNEL.findall((REPO / "src/backend/metal/metal_kernels.cpp").read_text())
    assert len(names) > 40, names
    return names


def compile_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Path:
    """The header generated from this checkout's metal/."""
    out = tmp_path_factory.mktemp("metal_embedded")
    r = embed(out)
    assert r.returncode == 0, r.stderr
    return out / "metal_embedded_sources.h"


# ------------------------------------------------------------------ the embedded kernel source


def test_embedded_source_has_every_kernel_and_no_local_include(embedded):
    pieces = embedded_parts(embedded)
    source = "".join(pieces)
    # Every local header inlined (the Metal compiler gets no include path), the system one kept.
    assert not LOCAL_INCLUDE.search(source), LOCAL_INCLUDE.search(source).group(0)
    assert "#include <metal_stdlib>" in source
    assert all(len(p.encode()) <= PIECE_LIMIT for p in pieces), [len(p.encode()) for p in pieces]


def test_embedded_header_compiles_as_cpp(embedded, tmp_path):
    # The header as metal_device.mm includes it; the program prints the source's length.
    program = tmp_path / "embedded_source_length.cpp"
    program.write_text(r'''#include <cstdio>

#include "metal_embedded_sources.h"

int main() {
    std::printf("%zu\n", sizeof(akunu::metal::kEmbeddedMetalSource) - 1);
    return 0;
}
''')
    exe = tmp_path / "embedded_source_length"
    r = compile_run([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", str(embedded.parent), str(program),
                     "-o", str(exe)], tmp_path)
    assert r.returncode == 0, r.stderr
    r = compile_run([str(exe)], tmp_path)
    assert r.returncode == 0, r.stdout
    pieces = embedded_parts(embedded)
    assert int(r.stdout.split()[-1]) == len("".join(pieces).encode())


def test_embedded_source_is_the_shim_program(embedded, tmp_path):
    # The text Apple's compiler gets, compiled as C++ through the Linux shim (tests/metal_shim/),
    # with <metal_stdlib> standing for the shim as metal/common.h does off Apple: proves the
    # inlining kept a whole program (each header once, in an order that compiles), and that it
    # defines every kernel of the kernel table (src/backend/metal/metal_kernels.cpp) as a kernel
    # (the shim's `kernel` is nothing: taking each one's address fails to compile for a missing one).
    pieces = embedded_parts(embedded)
    (tmp_path / "metal_stdlib").write_text('#include "metal_shim.h"\n#include "metal_shim_keywords.h"\n')
    uses = "".join(f"    (void)&{name};\n" for name in table_kernels())
    (tmp_path / "embedded.cpp").write_text("".join(pieces) + "\nvoid every_table_kernel() {\n" + uses + "}\n")
    r = compile_run([CXX, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
                     "-I", str(tmp_path), "-I", str(REPO / "tests/metal_shim"), "embedded.cpp"], tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]


def fake_repo(tmp_path: Path, metal_files: dict[str, str]) -> Path:
    """A checkout with metal/'s headers, kernel_params.h and the given .metal files."""
    root = tmp_path / "repo"
    (root / "metal").mkdir(parents=True)
    (root / "src/core").mkdir(parents=True)
    for header in (REPO / "metal").glob("*.h"):
        shutil.copy(header, root / "metal")
    shutil.copy(REPO / "src/core/kernel_params.h", root / "src/core")
    for name, text in metal_files.items():
        (root / "metal" / name).write_text(text)
    return root


def test_long_sources_split_into_16kb_literals(tmp_path):
    # Lines with the characters CMake lists treat specially (; [ ] \), a macro continued over lines.
    filler = [f"// line {i}; a[i] = b[j] \\ and more text to make the source long" for i in range(1200)]
    big = "\n".join(['#include "common.h"', *filler,
                     "#define TWICE(x) \\", "    ((x) + (x))",
                     "kernel void big_kernel(device float *x [[buffer(0)]], constant RMSNormParams &p [[buffer(1)]],",
                     "                       AKUNU_THREAD_ARGS) { x[group.x] = TWICE(p.eps); }", ""])
    root = fake_repo(tmp_path, {"big.metal": big})
    r = embed(tmp_path, root)
    assert r.returncode == 0, r.stderr
    header = tmp_path / "metal_embedded_sources.h"
    pieces = embedded_parts(header)
    assert len(pieces) > 3 and all(len(p.encode()) <= PIECE_LIMIT for p in pieces), [len(p) for p in pieces]
    source = "".join(pieces)
    body = source[source.index(filler[0]):]
    assert body.startswith("\n".join(filler) + "\n#define TWICE(x) \\\n    ((x) + (x))\n")
    (tmp_path / "include_it.cpp").write_text('#include "metal_embedded_sources.h"\n')
    r = compile_run([CXX, "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-I", str(tmp_path), "include_it.cpp"],
                    tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("text, error", [
    ('#include "common.h"\n#if defined(SOMETHING)\n#include "reduce.h"\n#endif\n', "inside an #if"),
    ('#include "no_such_header.h"\n', 'not found'),
])
def test_embedding_refuses_what_it_cannot_embed(tmp_path, text, error):
    r = embed(tmp_path, fake_repo(tmp_path, {"bad.metal": text}))
    assert r.returncode != 0 and error in r.stderr, r.stderr


# ------------------------------------------------------------------ MetalDevice against the stubs


def clang_syntax_check(source: Path, embedded: Path, cwd: Path) -> subprocess.CompletedProcess:
    # AKUNU_METALLIB_PATH as a build with the offline compiler defines it, so that branch is checked too.
    return compile_run([CLANG, *OBJCXX_FLAGS, '-DAKUNU_METALLIB_PATH="/build/akunu.metallib"', "-I",
                        str(embedded.parent), str(source)], cwd)


def test_metal_device_mm_compiles(embedded, tmp_path, clang):
    r = clang_syntax_check(METAL_DEVICE_MM, embedded, tmp_path)
    assert r.returncode == 0, r.stderr
    # create_device.cpp with the Metal backend in (plain C++).
    r = compile_run([clang, "-std=c++17", "-fsyntax-only", "-Werror", "-Wall", "-Wextra", "-Wno-unused-parameter",
                     "-I", str(REPO / "src"), "-DAKUNU_HAS_METAL=1", str(REPO / "src/backend/create_device.cpp")],
                    tmp_path)
    assert r.returncode == 0, r.stderr


# One wrong use each, as a typo would make it: the stubs must refuse every one.
WRONG_USES = [
    ("dispatchThreadgroups:", "dispatchThreadGroups:", "dispatchThreadGroups"),  # a misspelled selector
    ("commandBufferWithUnretainedReferences]", "commandBufferWithUnretainedReference]",
     "commandBufferWithUnretainedReference"),
    ("MTLDispatchTypeSerial]", "MTLDispatchTypeSequential]", "MTLDispatchTypeSequential"),  # no such constant
    ("atIndex:slots];", "atIndex:cmd->params];", "atIndex"),  # a wrong argument type
    ("(__bridge_retained void *)buffer", "(void *)buffer", "bridged cast"),  # an ARC ownership error
]


@pytest.mark.parametrize("old, new, error", WRONG_USES, ids=[w[1] for w in WRONG_USES])
def test_stubs_refuse_a_wrong_use(embedded, tmp_path, old, new, error, clang):
    text = METAL_DEVICE_MM.read_text()
    assert old in text
    mutated = tmp_path / "metal_device.mm"
    mutated.write_text(text.replace(old, new, 1))
    r = clang_syntax_check(mutated, embedded, tmp_path)
    assert r.returncode != 0 and error in r.stderr, r.stderr


def test_stubs_declare_only_what_the_device_uses():
    # Every method and property the Foundation and Metal stubs declare appears in the device (so the
    # stubs do not drift into a second SDK that lets wrong uses through).
    device = METAL_DEVICE_MM.read_text()
    declared = []
    for stub in (STUBS / "Foundation/Foundation.h", STUBS / "Metal/Metal.h"):
        for line in stub.read_text().splitlines():
            line = line.strip()
            if line.startswith(("- (", "+ (")):
                declared.append(re.match(r"[-+] \([^)]*\)\s*(\w+)", line).group(1))
            elif line.startswith("@property"):
                declared.append(re.search(r"(\w+)\s*(?:NS_RETURNS_INNER_POINTER|API_(?:AVAILABLE|DEPRECATED)\(.*\))?\s*;$",
                                             line).group(1))
    assert len(declared) > 25
    unused = [name for name in declared if not re.search(rf"\b{name}\b", device)]
    assert not unused, unused
