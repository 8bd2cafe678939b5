#!/usr/bin/env bash
# Non-attention probes behind the default-path model (issue 9), in one call on a CUDA machine
# (from the repo root):  OUT=DIR bash validate/probe_run.sh
# Writes DIR/probe_mma_smem.json, probe_mma_sync_power.json, probe_cta_prologue.json,
# probe_cta_fixed.json, probe_wgmma_smem.json, probe_wgmma_exp.json, probe_mma_exp.json,
# probe_mma_exp-two-warp.json, probe_softmax_pipes.json
# and profile_calls.json.
# pydantic wheels in .whl/ are installed to /tmp/site when pydantic is missing; perfsim runs
# as a linked package tree (as validate/external_h200.sh does).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-probes}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ! PYTHONPATH=/tmp/site python3 -c "import pydantic" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >/dev/null 2>&1
fi
rm -rf /tmp/shim && mkdir -p /tmp/shim && cp -r perfsim /tmp/shim/perfsim
ln -s "$PWD/validate" /tmp/shim/perfsim/validate
ln -s "$PWD/hardware" /tmp/shim/perfsim/catalog
export PYTHONPATH=/tmp/shim:/tmp/site
py() { (cd /tmp && python3 "$@"); }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv,noheader
py -m perfsim.validate.probe_mma_smem "$OUT" 2>&1 | cut -c1-300 | tail -45
for probe in probe_cta_fixed probe_wgmma_smem probe_wgmma_exp probe_mma_exp probe_softmax_pipes; do
    py -m perfsim.validate.$probe "$OUT/$probe.json" 2>&1 | cut -c1-300 | tail -8
done
py -m perfsim.validate.probe_mma_exp "$OUT/probe_mma_exp-two-warp.json" --two-warp 2>&1 | cut -c1-300 | tail -4
py -m perfsim.validate.profile_calls "$OUT/profile_calls.json" 2>&1 | cut -c1-300
