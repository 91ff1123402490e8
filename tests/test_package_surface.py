"""The wheel's surface (README "Public Python API"): akunu._core's top level holds only what the
package's modules use; the test and benchmark seams live in the submodule akunu._core._testing,
re-exported as akunu._testing, which `import akunu` does not import."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import akunu
from akunu import _core, _testing


def test_core_top_level_is_what_the_package_uses():
    package = Path(akunu.__file__).parent
    source = "\n".join(p.read_text(encoding="utf-8") for p in package.glob("*.py") if p.name != "_testing.py")
    names = [n for n in dir(_core) if not n.startswith("__") and n != "_testing"]
    unused = [n for n in names if not re.search(rf"\b{re.escape(n)}\b", source)]
    assert not unused, f"akunu._core names no module of python/akunu/ uses (test seams belong in _testing): {unused}"


def test_testing_reexports_the_submodule():
    native = {n for n in dir(_core._testing) if not n.startswith("_")}
    assert set(_testing.__all__) == native
    assert all(getattr(_testing, n) is getattr(_core._testing, n) for n in native)
    assert {"gemm", "dequantize", "device_attention", "bench_gemm_setup", "cuda_q16_handoffs"} <= native


def test_import_akunu_leaves_the_seams_out():
    r = subprocess.run([sys.executable, "-c", "import sys, akunu; print('akunu._testing' in sys.modules)"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
