#!/bin/bash
# akunu against llama.cpp on llama.cpp's normal mixes of one random F16 GGUF (the same files for both
# engines), in device-tool calls on one warm machine:
#   build                     llama-bench + llama-quantize (background) and akunu; tests/test_cuda.py (TESTS=0: skip;
#                             TEST_K: only the tests pytest -k selects, e.g. TEST_K="gqa or window")
#   make SHAPE VOCAB "QUANTS" the shape's random F16 (cuda/bench/bench_decode.py, which also times akunu on
#                             it) and llama-quantize's QUANTS of it (waits for the llama.cpp build)
#   bench SHAPE "FILES"       akunu (bench_decode.py) then llama-bench on each file (F16, Q4_K_M-mix, ...)
#   depth SHAPE VOCAB DTYPE DEPTHS [PROMPT]
#                             long contexts on one file (bench_decode.py writes a pure DTYPE file when missing,
#                             profiles a decode step at the deepest depth): akunu bench then llama-bench, pp PROMPT
#                             (default 4096) and tg128 at each of the comma-separated DEPTHS; KV=q8_0 runs akunu
#                             on the 8-bit KV cache too (after the F16 one), llama-bench stays on F16
# e.g. command "bash tools/device_mixes_side_by_side.sh build && bash tools/device_mixes_side_by_side.sh make
# llama-3.2-1b llama-bpe 'Q4_K_M Q6_K'", then "... bench llama-3.2-1b 'F16 Q4_K_M-mix Q6_K-mix'", carrying
# [".devcarry"] prepared as tools/device_side_by_side.sh says (wheels, tokenizer GGUFs, lcp-trim.tar.gz).
set -u
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
case "${1:-}" in
build)
  nvidia-smi -L
  mkdir -p /tmp/lcp && tar xzf .devcarry/lcp-trim.tar.gz -C /tmp/lcp
  ( cd /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp && cmake -S . -B /tmp/lb -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=OFF > /tmp/lb_cfg.log 2>&1 && \
    cmake --build /tmp/lb --target llama-bench llama-quantize -j 12 > /tmp/lb_build.log 2>&1; echo $? > /tmp/lb_done ) &
  source tools/device_wheels.sh
  CMAKE_BUILD_PARALLEL_LEVEL=4 python3 -m pip install --no-build-isolation --no-deps . -C cmake.define.AKUNU_CUDA_ARCHITECTURES=90a \
    -C build-dir=/tmp/akbuild > $OUT/log_build.txt 2>&1 || { tail -40 $OUT/log_build.txt; exit 1; }
  el "akunu built"
  if [ "${TESTS:-1}" = 1 ]; then
    AKUNU_TOKENIZER_TESTDATA=$PWD/.devcarry/tokenizer timeout 480 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py ${TEST_K:+-k "$TEST_K"} 2>&1 \
      | tee $OUT/log_tests.txt | tail -6
    el "tested"
  fi ;;
make)
  shape=$2 vocab=$3
  for i in $(seq 1 90); do [ -f /tmp/lb_done ] && break; sleep 5; done
  el "llama.cpp build rc=$(cat /tmp/lb_done 2>/dev/null)"
  LQ=$(find /tmp/lb -name llama-quantize -type f | head -1)
  timeout 300 python3 cuda/bench/bench_decode.py -r 3 --shape $shape --vocab-gguf .devcarry/tokenizer/ggml-vocab-$vocab.gguf \
    --dtype F16 | grep -E "RESULT|wrote"
  for q in $4; do
    $LQ /tmp/random-$shape-F16.gguf /tmp/random-$shape-$q-mix.gguf $q 16 > /tmp/lq_$q.log 2>&1 || tail -3 /tmp/lq_$q.log
  done
  el "quantized" ;;
bench)
  shape=$2
  LB=$(find /tmp/lb -name llama-bench -type f | head -1)
  for f in $3; do
    timeout 120 python3 cuda/bench/bench_decode.py -r 3 --shape $shape --vocab-gguf /dev/null --dtype $f | grep RESULT
    timeout 90 $LB -m /tmp/random-$shape-$f.gguf -p 512 -n 128 -r 3 -fa 1 -ngl 99 -o md 2>/tmp/lb_err.txt | grep -E "^\|" | tail -2 \
      || tail -3 /tmp/lb_err.txt
  done
  el "benched" ;;
depth)
  shape=$2 vocab=$3 dtype=$4 depths=$5 n_prompt=${6:-4096}
  f=/tmp/random-$shape-$dtype.gguf deepest=${depths##*,}
  for i in $(seq 1 90); do [ -f /tmp/lb_done ] && break; sleep 5; done
  LB=$(find /tmp/lb -name llama-bench -type f | head -1)
  timeout 300 python3 cuda/bench/bench_decode.py -r 2 --shape $shape --vocab-gguf .devcarry/tokenizer/ggml-vocab-$vocab.gguf \
    --dtype $dtype -d $deepest --profile | grep -vE "^loaded"
  el "profiled"
  for kv in f16 ${KV:-}; do
    timeout 400 python3 -c "import sys; from akunu.cli import main; sys.exit(main(sys.argv[1:]))" bench -m $f --backend cuda \
      -p $n_prompt -n 128 -d $depths -r 3 --kv-cache-dtype $kv
    el "akunu benched ($kv cache)"
  done
  timeout 400 $LB -m $f -p $n_prompt -n 128 -d $depths -r 3 -fa 1 -ngl 99 -o md 2>/tmp/lb_err.txt | grep -E "^\|" \
    || tail -3 /tmp/lb_err.txt
  el "llama-bench benched" ;;
*) echo "usage: $0 build | make SHAPE VOCAB 'QUANTS' | bench SHAPE 'FILES' | depth SHAPE VOCAB DTYPE DEPTHS [PROMPT]"; exit 2 ;;
esac
