#!/bin/bash
# One device-tool call on a CUDA machine: environment report, build, CUDA tests, 1B-shape Q4_0 benchmark.
# The device has no network, so prepare (here, once per checkout) an ignored folder it can carry:
#   echo /.devcarry/ >> .git/info/exclude
#   pip download --no-deps -d .devcarry/whl nanobind scikit-build-core gguf pytest-xdist execnet llguidance
#   (and the server / grammar tests' wheels: tools/device_wheels.sh)
#   mkdir -p .devcarry/tokenizer && cp ../shared/testdata/tokenizer/ggml-vocab-{llama-spm,llama-bpe,qwen2,gpt-2}.gguf* .devcarry/tokenizer/
#   cp tools/device_cuda_check.sh .devcarry/run.sh
# then call the device tool's run with command "bash .devcarry/run.sh" and carry [".devcarry"].
# Logs come back in $OUT (log_env, log_build, log_tests, log_bw, log_bench).
set -u
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CMAKE_BUILD_PARALLEL_LEVEL=16
L=$OUT/log_env.txt
{ python3 --version; which nvcc; nvcc --version | tail -2; cmake --version | head -1; nvidia-smi -L;
  python3 -m pip show nanobind scikit-build-core numpy pytest transformers torch 2>/dev/null | grep -E "^(Name|Version)"; } > $L 2>&1
cat $L
source tools/device_wheels.sh
t0=$(date +%s)
python3 -m pip install --no-build-isolation --no-deps -v . -C cmake.define.AKUNU_CUDA_ARCHITECTURES=90a -C build-dir=/tmp/akbuild > $OUT/log_build.txt 2>&1 || { tail -60 $OUT/log_build.txt; exit 1; }
echo "build: $(( $(date +%s) - t0 ))s"; grep -E "akunu: CUDA|warning" $OUT/log_build.txt | head -20
cd /tmp && python3 -c "import akunu._testing; print('cuda_available', akunu._testing.cuda_available())"; cd - >/dev/null
export AKUNU_TOKENIZER_TESTDATA=$PWD/.devcarry/tokenizer
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py -rA 2>&1 | tee $OUT/log_tests.txt | tail -45
python3 - <<'PY' 2>&1 | tee $OUT/log_bw.txt
try:
    import cupy as cp
    n = 1 << 30; a = cp.empty(n, dtype=cp.uint8); b = cp.empty_like(a); cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(2): b[...] = a
    s.record();
    for _ in range(10): b[...] = a
    e.record(); e.synchronize(); ms = cp.cuda.get_elapsed_time(s, e) / 10
    print(f"D2D copy: {2 * n / ms / 1e6:.0f} GB/s (read+write)")
except Exception as ex:
    print("bw skipped", ex)
PY
timeout 240 python3 cuda/bench/bench_decode.py --shape llama-3.2-1b --dtype Q4_0 --vocab-gguf .devcarry/tokenizer/ggml-vocab-llama-bpe.gguf 2>&1 | tee $OUT/log_bench.txt
AKUNU_CUDA_PDL=0 timeout 120 python3 cuda/bench/bench_decode.py --shape llama-3.2-1b --dtype Q4_0 --vocab-gguf .devcarry/tokenizer/ggml-vocab-llama-bpe.gguf 2>&1 | grep RESULT | sed "s/^/PDL=0 /" | tee -a $OUT/log_bench.txt
