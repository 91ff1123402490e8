"""Gives UBSan the log_path its UBSAN_OPTIONS names, in every Python process of a sanitizer run.

tools/sanitizer_tests.sh puts this folder on PYTHONPATH, so Python imports this module at start-up
(site.py's sitecustomize hook), in the test process and in every Python child a test starts.

Why: GCC keeps UBSan in its own runtime, libubsan, beside libasan. At start-up libubsan reads
UBSAN_OPTIONS and calls __sanitizer_set_report_path(log_path), but through its PLT, and the
preloaded libasan, first in the lookup order, defines that symbol too: the call sets ASan's report
file, and UBSan's reports go to stderr whatever log_path says. A process's stderr is often kept by
the test that started it, so the script could not see them. Calling libubsan's own function (ctypes
looks a symbol up in the library it opened first) puts them in the files the script checks.
docs/adr/0023-sanitizer-build.md.
"""
import ctypes
import os


def _log_path(options: str):
    # Sanitizer options are `name=value` pairs separated by ':', the last one of a name winning.
    path = None
    for option in options.split(":"):
        name, _, value = option.partition("=")
        if name.strip() == "log_path":
            path = value
    return path


def _route_ubsan_reports() -> None:
    path = _log_path(os.environ.get("UBSAN_OPTIONS", ""))
    if not path:
        return
    try:  # only where libubsan is already loaded (preloaded by the script): never load it here
        ubsan = ctypes.CDLL("libubsan.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return
    ubsan.__sanitizer_set_report_path(path.encode())


_route_ubsan_reports()
