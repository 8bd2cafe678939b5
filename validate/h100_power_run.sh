#!/usr/bin/env bash
# The H100's own power-model inputs and clock ceiling (issue 9, "Hopper WGMMA rate and the
# clock under load"), none of them an attention timing:
#   1. power_probe.py's microbenchmarks (static, HBM copy, cuBLAS GEMMs, FP32 FMA and MUFU
#      loops, the half-duty GEMM, the L2 read walk, WGMMA loops on shared-memory operands)
#      -> power-microbench.json, the inputs of validate/fit_power.py;
#   2. probe_mma_smem.run_power (the mma.sync loop fed by ldmatrix) -> probe_mma_sync_power.json;
#   3. probe_tick_clock.py beside the same microbenchmarks: the clock the cores tick at under
#      tensor-core work that the power limit does not cap -> tick-clock-power.json;
#   4. Nsight Compute's cycles over time per kernel, each kernel alone (no power cap) for the
#      attention kernels users call (probe_ncu.sh, OPCODES=0) -> ncu/ncu.tgz.
#   OUT=DIR bash validate/h100_power_run.sh    (carry .whl and .ext; any GH100 part)
set -uo pipefail
cd "$(dirname "$0")/.."
. validate/device_env.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv | tee "$OUT/device.txt"
(cd /tmp && timeout 150 python3 -m perfsim.validate.power_probe --out "$OUT/power-microbench.json" \
  --duration 3 --only idle,spin_1cta,hbm_copy,gemm_bf16,gemm_fp16,mufu_exp2,fp32_fma,gemm_bf16_half_duty,l2_read,wgmma_smem_1cta,wgmma_smem_2cta 2>&1 | tail -14)
(cd /tmp && timeout 40 python3 -c "import sys; from perfsim.validate.probe_mma_smem import run_power; run_power(sys.argv[1])" "$OUT/probe_mma_sync_power.json" 2>&1 | tail -3)
(cd /tmp && timeout 150 python3 -m perfsim.validate.probe_tick_clock --out "$OUT/tick-clock-power.json" \
  --cases idle,power:fp32_fma,power:gemm_bf16_half_duty,power:wgmma_smem_1cta,power:wgmma_smem_2cta,power:gemm_bf16,sdpa_flash-bwd@64x16x256x128,sdpa_flash-fwd@1x16x1024x128,flex-fwd@22x12x192x128,sdpa_cudnn-bwd@29x16x192x128 2>&1 | grep -v Warning | tail -10)
OUT="$OUT/ncu" OPCODES=0 CASES="${NCU_CASES:-flash-fwd-d128 flash-bwd-d128 cudnn-fwd-d128 cudnn-bwd-d128 flex-fwd-d128 tutorial-fwd-d128 flash-fwd-d64}" \
  bash validate/probe_ncu.sh 2>&1 | tail -12
