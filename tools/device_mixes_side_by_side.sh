#!/bin/bash
# Two device-tool calls: akunu against llama.cpp on llama.cpp's normal mixes of one random F16 GGUF of the
# Llama-3.2-1B shape (the K-quants, IQ4_XS, Q8_0, Q4_0, F16), the same files for both engines.
#   a: build llama-bench and llama-quantize (background) and akunu, run tests/test_cuda.py, write the F16 file
#      (cuda/bench/bench_decode.py) and quantize it;   b: right after a, on the still-warm machine: time both.
# Prepare .devcarry/ as tools/device_side_by_side.sh says (wheels, tokenizer GGUFs, lcp-trim.tar.gz), then
# run with command "bash tools/device_mixes_side_by_side.sh a" (then "... b"), carrying [".devcarry"].
set -u
case "${1:-}" in
a)
  export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
  T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
  nvidia-smi -L
  mkdir -p /tmp/lcp && tar xzf .devcarry/lcp-trim.tar.gz -C /tmp/lcp
  ( cd /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp && cmake -S . -B /tmp/lb -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF > /tmp/lb_cfg.log 2>&1 && \
    cmake --build /tmp/lb --target llama-bench llama-quantize -j 12 > /tmp/lb_build.log 2>&1; echo $? > /tmp/lb_done ) &
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site .devcarry/whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
  CMAKE_BUILD_PARALLEL_LEVEL=4 python3 -m pip install --no-build-isolation --no-deps . -C cmake.define.AKUNU_CUDA_ARCHITECTURES=90a -C build-dir=/tmp/akbuild > $OUT/log_build.txt 2>&1 || { tail -40 $OUT/log_build.txt; exit 1; }
  el "akunu built"
  export AKUNU_TOKENIZER_TESTDATA=$PWD/.devcarry/tokenizer
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tee $OUT/log_tests.txt | tail -6
  el "tested"
  for i in $(seq 1 60); do [ -f /tmp/lb_done ] && break; sleep 5; done
  el "llama.cpp build rc=$(cat /tmp/lb_done 2>/dev/null)"
  LQ=$(find /tmp/lb -name llama-quantize -type f | head -1)
  timeout 100 python3 cuda/bench/bench_decode.py -r 3 --shape llama-3.2-1b --vocab-gguf .devcarry/tokenizer/ggml-vocab-llama-bpe.gguf --dtype F16 | grep -E "RESULT|wrote"
  for q in Q8_0 Q4_0 Q4_K_M Q5_K_M Q6_K IQ4_XS; do
    $LQ /tmp/random-llama-3.2-1b-F16.gguf /tmp/random-llama-3.2-1b-$q-mix.gguf $q 16 > /tmp/lq_$q.log 2>&1 || tail -3 /tmp/lq_$q.log
  done
  el "quantized"
  ;;
b)
  export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
  T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
  nvidia-smi -L
  LB=$(find /tmp/lb -name llama-bench -type f | head -1)
  B="timeout 80 python3 cuda/bench/bench_decode.py -r 3 --shape llama-3.2-1b --vocab-gguf .devcarry/tokenizer/ggml-vocab-llama-bpe.gguf"
  for q in F16 Q8_0-mix Q4_0-mix Q4_K_M-mix Q5_K_M-mix Q6_K-mix IQ4_XS-mix; do
    $B --dtype $q | grep RESULT
    timeout 60 $LB -m /tmp/random-llama-3.2-1b-$q.gguf -p 512 -n 128 -r 3 -fa 1 -ngl 99 -o md 2>/tmp/lb_err.txt | grep -E "^\|" | tail -2 || tail -3 /tmp/lb_err.txt
  done
  el "done"
  ;;
*) echo "usage: $0 a|b"; exit 2 ;;
esac
