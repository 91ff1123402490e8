#!/bin/bash
# Installs into /tmp/site every wheel in .devcarry/whl that this machine's python3 can take (the folder may
# hold one binary wheel per Python version, e.g. pydantic_core for cp310 .. cp312), without dependencies
# or an index: the device machine reaches no network. Sourced by the tools/device_*.sh scripts. Besides
# the build's wheels (tools/device_cuda_check.sh), the server and grammar tests of tests/test_cuda.py
# want these with their dependencies, for the device's Python (3.12 in 2026-11):
#   pip download -d .devcarry/whl --only-binary :all: --python-version 3.12 --platform manylinux2014_x86_64 \
#     --platform manylinux_2_17_x86_64 fastapi uvicorn openai jsonschema prometheus-client lark httpx
# and the grammar test wants llama.cpp's grammars (fetched here by `python tests/paths.py`):
#   mkdir -p .devcarry/grammars && cp .cache/llama-cpp-python-0.3.36-grammars/* .devcarry/grammars/
python3 - <<'PY' > /tmp/device_wheels.txt
import glob
from pip._vendor.packaging.tags import sys_tags
from pip._vendor.packaging.utils import parse_wheel_filename
ok = set(sys_tags())
for path in sorted(glob.glob(".devcarry/whl/*.whl")):
    if ok & set(parse_wheel_filename(path.rsplit("/", 1)[-1])[3]):
        print(path)
PY
# One pip call for all; if it fails (two versions of one package, say), one call a wheel, naming the failures.
xargs python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site < /tmp/device_wheels.txt \
  > /tmp/device_wheels.log 2>&1 || while read -r w; do
    python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site "$w" > /dev/null 2>&1 ||
      echo "device_wheels.sh: $w did not install"
  done < /tmp/device_wheels.txt
export PYTHONPATH=/tmp/site
if [ -d .devcarry/grammars ]; then export AKUNU_LLAMA_CPP_GRAMMARS=$PWD/.devcarry/grammars; fi
