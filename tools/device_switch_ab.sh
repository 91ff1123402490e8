#!/bin/bash
# akunu with an environment switch off and on, in one device-tool call: one build of the working tree, then
# chain-decode tokens compared between the two settings (they must be identical) and tg128 / pp512
# (cuda/bench/bench_decode.py, median of -r 3) with SWITCH=0 and SWITCH=1 in turn, round after round.
#
#   SWITCH=AKUNU_CUDA_PAIRS bash tools/device_switch_ab.sh 'SHAPE:DTYPE[:V_DTYPE] ...' [ROUNDS]
#
# SWITCH: a switch of docs/switches.md that is read when a device is created.
# SHAPE:DTYPE: a bench_decode.py shape and GGUF dtype; V_DTYPE: attn_v's dtype where it differs (--v-dtype,
# as llama.cpp's mixes write it). Each file is written once per machine, with the llama-bpe vocabulary.
# TEST_K: first run tests/test_cuda.py -k TEST_K with the switch at its default.
# Prepare the ignored .devcarry/ folder as tools/device_cuda_check.sh says and call with carry [".devcarry"].
set -u
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
cases=$1 rounds=${2:-2}
: "${SWITCH:?name the switch, e.g. SWITCH=AKUNU_CUDA_PAIRS}"
nvidia-smi -L
[ -d /tmp/site ] || source tools/device_wheels.sh
( CMAKE_BUILD_PARALLEL_LEVEL=15 python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/ab_tree . \
    -C cmake.define.AKUNU_CUDA_ARCHITECTURES=90a -C build-dir=/tmp/ab_build_tree > /tmp/ab_log_tree.txt 2>&1 \
    || tail -30 /tmp/ab_log_tree.txt ) &
file_of() { IFS=: read -r shape dtype vd <<< "$1"; echo "/tmp/random-$shape-$dtype${vd:+-v$vd}.gguf"; }
for c in $cases; do
  IFS=: read -r shape dtype vd <<< "$c"
  f=$(file_of "$c")
  [ -f "$f" ] || PYTHONPATH=/tmp/site:cuda/bench python3 -c "
import bench_decode as b; from pathlib import Path
b.write_model(Path('$f'), '$shape', '$dtype', Path('.devcarry/tokenizer/ggml-vocab-llama-bpe.gguf'), '$vd' or None)" &
done
wait
el "built, files written"
if [ -n "${TEST_K:-}" ]; then
  PYTHONPATH=/tmp/ab_tree:/tmp/site AKUNU_TOKENIZER_TESTDATA=$PWD/.devcarry/tokenizer timeout 300 \
    python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_cuda.py -k "$TEST_K" 2>&1 | tail -3
  el tested
fi
for c in $cases; do
  PYTHONPATH=/tmp/ab_tree:/tmp/site timeout 120 python3 - "$(file_of "$c")" <<'PY'
import os, sys
import akunu
name, seqs = os.environ["SWITCH"], {}
for v in ("0", "1"):  # read when the CUDA device is created
    os.environ[name] = v
    m = akunu.Model(sys.argv[1], backend="cuda", context_length=512)
    first = m._engine.prefill(list(range(100, 116)))
    seqs[v] = [first] + list(m._engine.chain_decode(first, 96))
    del m
print(sys.argv[1], name, "tokens same" if seqs["0"] == seqs["1"] else "tokens DIFFERENT", len(seqs["0"]))
PY
done
for c in $cases; do
  IFS=: read -r shape dtype vd <<< "$c"
  for round in $(seq 1 "$rounds"); do
    for v in 0 1; do
      env PYTHONPATH=/tmp/ab_tree:/tmp/site "$SWITCH=$v" timeout 120 python3 cuda/bench/bench_decode.py -r 3 --shape "$shape" \
        --dtype "$dtype" ${vd:+--v-dtype "$vd"} --vocab-gguf /dev/null | grep RESULT | sed "s/^/$SWITCH=$v /"
    done
  done
done
el benched
