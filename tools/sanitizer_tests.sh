#!/usr/bin/env bash
# Build akunu's Python module with AddressSanitizer + UndefinedBehaviorSanitizer (AKUNU_SANITIZE,
# cmake/sanitizers.cmake) into its own folder, and run the tests that feed the engine bad files,
# bad arguments, many loads and threads, and whole models under them. Fails (exit 1) when a test
# fails or when any sanitizer report was written, in this process or in any process a test started.
# Why it is built and run this way: docs/adr/0023-sanitizer-build.md.
#
#   tools/sanitizer_tests.sh                        # the default test files (SANITIZER_TESTS below)
#   tools/sanitizer_tests.sh tests/test_sampling.py # other pytest arguments instead
#
# AKUNU_SANITIZER_DIR: where the build, the installed module and the reports go (default
# build/sanitize in this clone, git-ignored; a second run rebuilds only what changed).
# Needs GCC (g++: its libasan / libubsan are what the module links and what is preloaded) and the
# test requirements of the README's test command. CUDA is never built (ADR 0023).
set -euo pipefail

# All in one function, read whole before it runs: editing this file during a run cannot change the run.
main() {
  cd "$(dirname "$0")/.."
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

  SANITIZER_TESTS=(
    tests/test_sanitizer_build.py     # first: proves a bug would be reported (the self-test)
    tests/test_bad_input.py
    tests/test_bad_checkpoints.py
    tests/test_model_lifecycle.py
    tests/test_reference_logits.py
    tests/test_architectures.py
    tests/test_kquant_models.py
  )
  if [ $# -gt 0 ]; then SANITIZER_TESTS=("$@"); fi

  dir=$(realpath -m "${AKUNU_SANITIZER_DIR:-build/sanitize}")
  reports="$dir/reports"
  python=$(python -c 'import sys; print(sys.executable)')  # the interpreter itself, not a pyenv shim

  # The sanitizer runtimes of the compiler that builds the module.
  export CC=gcc CXX=g++
  libasan=$(g++ -print-file-name=libasan.so)
  libubsan=$(g++ -print-file-name=libubsan.so)
  for lib in "$libasan" "$libubsan"; do
    if [ ! -e "$lib" ]; then
      echo "sanitizer_tests: g++ has no $(basename "$lib") (Debian: apt-get install libasan8 libubsan1)" >&2
      exit 2
    fi
  done

  # 1. Build and install into $dir/site. CMAKE_ARGS replaced, not extended: .ci/run asks for CUDA.
  # Without pip's build isolation where the build requirements are installed (faster, offline).
  isolation=(--no-build-isolation)
  "$python" -c 'import scikit_build_core, nanobind' 2>/dev/null || isolation=()
  start=$SECONDS
  CMAKE_ARGS="-DAKUNU_CUDA=OFF -DAKUNU_SANITIZE=address,undefined" \
    "$python" -m pip install -q --no-deps "${isolation[@]}" . \
      -C build-dir="$dir/build" -C install.strip=false --target "$dir/site" --upgrade
  build_s=$((SECONDS - start))

  # 2. The environment every test process runs in (children inherit it):
  # - LD_PRELOAD: python is not linked with the ASan runtime, which must be the first library loaded
  #   to intercept malloc; libubsan goes with it (the module needs both, GCC keeps them apart).
  # - detect_leaks=0: at exit LeakSanitizer would report what CPython, torch and every preloaded
  #   helper program (bash, uname: LD_PRELOAD reaches them too) never free; tests/test_model_lifecycle.py
  #   checks the engine's own memory across loads instead.
  # - log_path: reports go to files, so a report from a child process whose output a test keeps to
  #   itself (tests/test_bad_input.py loads bad files in children) still fails the run below.
  # - print_stacktrace=1: UBSan reports with a stack (-fno-sanitize-recover=all already makes them fatal).
  # - tools/sanitizer_site on PYTHONPATH: its sitecustomize.py gives UBSan its log_path in every Python
  #   process (GCC's libubsan loses it to the preloaded libasan; the file says how).
  rm -rf "$reports" && mkdir -p "$reports"
  export LD_PRELOAD="$libasan $libubsan"
  export ASAN_OPTIONS="detect_leaks=0:log_path=$reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:log_path=$reports/ubsan"
  export PYTHONPATH="$PWD/tools/sanitizer_site:$dir/site${PYTHONPATH:+:$PYTHONPATH}"

  built=$("$python" -c 'import akunu, akunu._testing as t; print(akunu.__file__, t.sanitizers())')
  case "$built" in
    "$dir/site/"*" address,undefined") ;;
    *) echo "sanitizer_tests: the module imported is not the sanitizer build: $built" >&2; exit 2 ;;
  esac

  # 3. The tests.
  start=$SECONDS
  status=0
  "$python" -m pytest -q -p no:cacheprovider "${SANITIZER_TESTS[@]}" || status=$?
  tests_s=$((SECONDS - start))

  # 4. Any report fails the run, whatever pytest said.
  n_reports=0
  while IFS= read -r -d '' report; do
    echo "==== $report" >&2
    head -n 60 "$report" >&2
    n_reports=$((n_reports + 1))
  done < <(find "$reports" -type f -print0 | sort -z)
  if [ "$n_reports" -gt 0 ]; then
    echo "sanitizer_tests: $n_reports sanitizer report(s) in $reports" >&2
    status=1
  fi
  echo "sanitizer_tests: build ${build_s}s, tests ${tests_s}s, sanitizer reports: $n_reports, exit $status"
  exit $status
}

main "$@"
