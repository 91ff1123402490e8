#!/bin/bash
# akunu against itself in one device-tool call: several builds side by side, each benched in turn on the
# same pure random-weight files (cuda/bench/bench_decode.py tg128 / pp512, median of -r), round after round.
#
#   bash tools/device_ab.sh 'VARIANTS' 'SHAPE:DTYPE ...' [ROUNDS]
#
# VARIANTS: space-separated NAME=CUDA_FLAGS, each built from the working tree with those nvcc flags (compile-time
# macros of an experiment, e.g. 'chains1=-DAKUNU_EXP_CHAINS=1'; an empty value builds it as is). The name
# "before" builds the working tree with the patch $AB_PATCH (default .devcarry/ab.patch, a `git diff` of the
# change) reversed, so 'before= after=' compares a change with its parent.
# SHAPE:DTYPE: a cuda/bench/bench_decode.py shape and a GGUF dtype (e.g. llama-3.1-8b:Q4_K); the file is written
# once per machine, with the llama-bpe vocabulary.
# BENCH_ARGS: more bench_decode.py arguments for every run (e.g. '-d 16384': tg128 after that many cached keys).
# TEST_VARIANT=NAME: afterwards run tests/test_cuda.py on that build (TEST_K: only what pytest -k selects).
# Prepare the ignored .devcarry/ folder as tools/device_cuda_check.sh says (wheels, tokenizer GGUFs; for
# TEST_VARIANT also the pytest-xdist and execnet wheels), and call with
# carry [".devcarry"]. Builds take ~2 minutes (three at once on 16 cores), an 8B file ~1 minute to write.
set -u
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
variants=$1 cases=$2 rounds=${3:-2}
nvidia-smi -L
source tools/device_wheels.sh

names=()
for v in $variants; do
  name=${v%%=*} flags=${v#*=} src=$PWD
  if [ "$name" = before ]; then
    src=/tmp/ab_src_before
    rm -rf $src && mkdir -p $src && cp -r . $src/ && (cd $src && patch -R -p1 -s < "${AB_PATCH:-.devcarry/ab.patch}") \
      || { echo "could not reverse ${AB_PATCH:-.devcarry/ab.patch}"; exit 1; }
  fi
  names+=("$name")
  ( cd $src && CMAKE_BUILD_PARALLEL_LEVEL=5 python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/ab_$name . \
      -C cmake.define.AKUNU_CUDA_ARCHITECTURES=90a -C "cmake.define.CMAKE_CUDA_FLAGS=$flags" -C build-dir=/tmp/ab_build_$name \
      > /tmp/ab_log_$name.txt 2>&1 || tail -20 /tmp/ab_log_$name.txt ) &
done
( for c in $cases; do
    shape=${c%%:*} dtype=${c##*:}
    [ -f /tmp/random-$shape-$dtype.gguf ] || PYTHONPATH=/tmp/site:cuda/bench python3 -c "
import bench_decode as b; from pathlib import Path
b.write_model(Path('/tmp/random-$shape-$dtype.gguf'), '$shape', '$dtype', Path('.devcarry/tokenizer/ggml-vocab-llama-bpe.gguf'))"
  done ) &
wait
el "built ${names[*]}, files written"

for c in $cases; do
  for round in $(seq 1 $rounds); do
    for name in "${names[@]}"; do
      PYTHONPATH=/tmp/ab_$name:/tmp/site timeout 120 python3 cuda/bench/bench_decode.py -r 3 --shape ${c%%:*} \
        --dtype ${c##*:} --vocab-gguf /dev/null ${BENCH_ARGS:-} | grep RESULT | sed "s/^/$name /"
    done
  done
done
el "benched"

if [ -n "${TEST_VARIANT:-}" ]; then
  PYTHONPATH=/tmp/ab_$TEST_VARIANT:/tmp/site AKUNU_TOKENIZER_TESTDATA=$PWD/.devcarry/tokenizer timeout 300 \
    python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_cuda.py ${TEST_K:+-k "$TEST_K"} 2>&1 | tail -4
  el "tested $TEST_VARIANT"
fi
