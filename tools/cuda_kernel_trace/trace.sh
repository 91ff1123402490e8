#!/bin/bash
# Kernel timelines of CUDA chain decode in graph replay, through CUPTI (nsys is not on the device).
# Run after akunu is installed on the device (e.g. at the end of tools/device_side_by_side.sh's build):
#   bash tools/cuda_kernel_trace/trace.sh /tmp/random-llama-3.2-1b-Q4_0.gguf [DEPTH [KV_CACHE_DTYPE]] > $OUT/trace.txt
# Builds libktrace.so against the toolkit's CUPTI, records two 128-token chain decodes and prints, per
# kernel of one token, its duration and its incremental cost (its end minus the previous kernel's
# end: what it adds to the token with PDL's overlap), then the sums per kernel.
set -eu
HERE=$(dirname "$0")
C=/usr/local/cuda
INC=$(dirname "$(find $C/ -name cupti.h | head -1)")
LIB=$(dirname "$(find $C/ -name libcupti.so | head -1)")
# The newest kernel-record struct of this CUPTI (CUpti_ActivityKernel<N>): the one it emits.
REC=$(grep -o "CUpti_ActivityKernel[0-9]*" "$INC/cupti_activity.h" | sort -V | tail -1)
gcc -O2 -shared -fPIC -DKREC="$REC" -I"$INC" -I$C/include "$HERE/ktrace.c" -L"$LIB" -lcupti -Wl,-rpath,"$LIB" \
    -o /tmp/libktrace.so
python3 "$HERE/trace_decode.py" "$1" /tmp/libktrace.so /tmp/ktrace_raw.csv ${2:-16} ${3:-f16}
$C/bin/cu++filt < /tmp/ktrace_raw.csv > /tmp/ktrace.csv
python3 "$HERE/trace_table.py" /tmp/ktrace.csv
