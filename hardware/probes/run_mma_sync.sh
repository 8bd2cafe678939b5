#!/usr/bin/env bash
# Build and run mma_sync_throughput.cu on the lent GPU (README.md); SASS HMMA forms and the
# rates go to $OUT/mma_sync_throughput.txt.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/perfsim-mma}
mkdir -p "$OUT"
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | tail -1)
CUOBJDUMP=$(command -v cuobjdump || python3 -c "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin/cuobjdump'))")
ARCH=${ARCH:-90a}
if [ -n "$NVCC" ]; then
    "$NVCC" -O3 -gencode=arch=compute_$ARCH,code=sm_$ARCH -o /tmp/mma_sync_throughput mma_sync_throughput.cu || exit 1
else   # no compiler on the machine: a binary built elsewhere with the same command, carried in
    cp ../../.build/mma_sync_throughput /tmp/mma_sync_throughput || exit 1
fi
{
    echo "== SASS HMMA forms"
    "$CUOBJDUMP" --dump-sass /tmp/mma_sync_throughput | grep -oE 'HMMA\.[A-Z0-9.]+' | sort | uniq -c
    echo "== rates"
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader
    /tmp/mma_sync_throughput
} 2>&1 | tee "$OUT/mma_sync_throughput.txt"
