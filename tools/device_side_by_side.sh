#!/bin/bash
# One device-tool call: build llama.cpp's llama-bench (CUDA, sm_90) from the llama-cpp-python 0.3.36 sdist in the
# background, build akunu, write random-weight GGUFs and time akunu on them (cuda/bench/bench_decode.py), then
# llama-bench on the very same files; while llama.cpp compiles, pytest tests/test_cuda.py runs (TESTS=0 skips it).
# Prepare the ignored .devcarry/ folder as tools/device_cuda_check.sh says, plus
# .devcarry/lcp-trim.tar.gz: the sdist (pip download --no-deps --no-build-isolation llama-cpp-python==0.3.36)
# unpacked, without .git, vendor/llama.cpp/{models,docs,benches,tests,examples,tools/ui} and unused ggml backends,
# packed again (~6.5 MB). Call: run with command "bash tools/device_side_by_side.sh" and carry [".devcarry"].
set -u
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p /tmp/lcp && tar xzf .devcarry/lcp-trim.tar.gz -C /tmp/lcp
( cd /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp && cmake -S . -B /tmp/lb -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
   -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF > /tmp/lb_cfg.log 2>&1 && \
  cmake --build /tmp/lb --target llama-bench -j 13 > /tmp/lb_build.log 2>&1; echo $? > /tmp/lb_done ) &
source tools/device_wheels.sh
CMAKE_BUILD_PARALLEL_LEVEL=3 python3 -m pip install --no-build-isolation --no-deps . -C cmake.define.AKUNU_CUDA_ARCHITECTURES=90a -C build-dir=/tmp/akbuild > $OUT/log_build.txt 2>&1 || { tail -20 $OUT/log_build.txt; }
el "akunu built"
T=.devcarry/tokenizer
B="timeout 200 python3 cuda/bench/bench_decode.py -r 3"
$B --shape smollm2-135m --dtype Q4_0 --vocab-gguf $T/ggml-vocab-gpt-2.gguf | grep RESULT
$B --shape qwen3-0.6b-ish --dtype Q4_0 --vocab-gguf $T/ggml-vocab-qwen2.gguf | grep RESULT
$B --shape llama-3.2-1b --dtype Q4_0 --vocab-gguf $T/ggml-vocab-llama-bpe.gguf | grep RESULT
$B --shape llama-3.2-1b --dtype Q8_0 --vocab-gguf $T/ggml-vocab-llama-bpe.gguf | grep RESULT
$B --shape llama-3.1-8b --dtype Q4_0 --vocab-gguf $T/ggml-vocab-llama-bpe.gguf | grep RESULT
el "akunu benched"
export AKUNU_TOKENIZER_TESTDATA=$PWD/.devcarry/tokenizer
[ "${TESTS:-1}" = 1 ] && timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tee $OUT/log_tests.txt | tail -15
el "tested"
for i in $(seq 1 80); do [ -f /tmp/lb_done ] && break; sleep 5; done
el "llama-bench build rc=$(cat /tmp/lb_done 2>/dev/null)"; tail -3 /tmp/lb_build.log; tail -3 /tmp/lb_cfg.log
LB=$(find /tmp/lb -name llama-bench -type f | head -1)
for f in smollm2-135m-Q4_0 qwen3-0.6b-ish-Q4_0 llama-3.2-1b-Q4_0 llama-3.2-1b-Q8_0 llama-3.1-8b-Q4_0; do
  timeout 90 $LB -m /tmp/random-$f.gguf -p 512 -n 128 -r 3 -fa 1 -ngl 99 -o md 2>/tmp/lb_err.txt | grep -E "^\|" | tail -2 || tail -3 /tmp/lb_err.txt
  [ -s /tmp/lb_err.txt ] && grep -iE "error|fault|abort" /tmp/lb_err.txt | head -2
done
el "done"
