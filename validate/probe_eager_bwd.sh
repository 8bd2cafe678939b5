#!/usr/bin/env bash
# Eager attention's backward on the lent H200 (issue 9, item 7): which kernels autograd runs
# (torch.profiler, profile_eager.py --phase bwd, beside the model's kernels) and the ceilings
# of softmax's backward by row length on standalone tensors (eager_ceilings.py), with the HBM
# copy bandwidth of the same run:
#   run(command="bash validate/probe_eager_bwd.sh", carry=[".whl"])
# OPS_ONLY=1 runs only probe_eager_ops.py (which aten op launches each kernel); SGEMM_ONLY=1
# only probe_sgemm.py; SOFTMAX_LENGTHS_ONLY=1 torch.softmax at row lengths between powers of 2
# (with SCAN=1: every 128 up to 4096 and every 512 up to 16384; with CAUSAL=1 on causally
# masked scores); SMALL_GEMM_ONLY=1 cuBLAS bmm
# with 1 or 16 output rows (eager decode's GEMMs, probe_small_gemm.py).
# Writes $OUT/eager_ops.txt, $OUT/profile_eager_bwd.txt, $OUT/profile_eager_fwd.txt and
# $OUT/eager_ceilings.json; with SGEMM_ONLY=1 $OUT/sgemm.json (committed twice:
# reports/h200/probes/sgemm/sgemm.json is the first run, sgemm-widths.json the second, which
# added the width rows and the kernel names); with SOFTMAX_LENGTHS_ONLY=1
# $OUT/softmax_lengths[-scan].json; with SMALL_GEMM_ONLY=1 $OUT/small_gemm.json. The "model"
# lines of profile_eager_bwd.txt are the model before the two-kernel softmax backward.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-eager}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl > "$OUT/pip.log" 2>&1 || { tail -5 "$OUT/pip.log"; exit 1; }
rm -rf /tmp/shim && mkdir -p /tmp/shim && cp -r perfsim /tmp/shim/perfsim   # as probe_ncu.sh
ln -s "$PWD/validate" /tmp/shim/perfsim/validate
ln -s "$PWD/hardware" /tmp/shim/perfsim/catalog
export PYTHONPATH=/tmp/shim:/tmp/site PYTHONUNBUFFERED=1
cd /tmp      # python -m and stdin scripts put the working directory first on sys.path
if [ -n "${SOFTMAX_LENGTHS_ONLY:-}" ]; then
    python3 - "$OUT/softmax_lengths${SCAN:+-scan}${CAUSAL:+-causal}.json" <<'PY'
import json, os, sys
import torch
from perfsim.validate import eager_ceilings, microbench
rows = []
extra = (eager_ceilings.scan_jobs() if os.environ.get("SCAN")
         else eager_ceilings.causal_jobs() if os.environ.get("CAUSAL")
         else eager_ceilings.other_length_jobs())
for name, job in [("hbm_copy", microbench.hbm_copy)] + extra:
    m = job()
    rows.append({"name": m.name, "value": m.value, "unit": m.unit, "method": m.method})
    print(m.name, f"{m.value:.4g}", m.unit, flush=True)
json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "rows": rows}, open(sys.argv[1], "w"), indent=1)
PY
    exit $?
fi
[ -n "${SMALL_GEMM_ONLY:-}" ] && { python3 -m perfsim.validate.probe_small_gemm "$OUT/small_gemm.json"; exit $?; }
[ -n "${SGEMM_ONLY:-}" ] && { python3 -m perfsim.validate.probe_sgemm "$OUT/sgemm.json"; exit $?; }
python3 -m perfsim.validate.probe_eager_ops > "$OUT/eager_ops.txt" 2>&1
[ -n "${OPS_ONLY:-}" ] && { cat "$OUT/eager_ops.txt"; exit 0; }
python3 -m perfsim.validate.profile_eager --phase bwd > "$OUT/profile_eager_bwd.txt" 2>&1
python3 -m perfsim.validate.profile_eager --phase fwd > "$OUT/profile_eager_fwd.txt" 2>&1
python3 - "$OUT/eager_ceilings.json" <<'PY'
import json, sys
import torch
from perfsim.validate import eager_ceilings, microbench
rows = []
jobs = [("hbm_copy", microbench.hbm_copy)] + eager_ceilings.jobs()
for name, job in jobs + eager_ceilings.backward_jobs():
    m = job()
    rows.append({"name": m.name, "value": m.value, "unit": m.unit, "method": m.method})
    print(m.name, f"{m.value:.4g}", m.unit, flush=True)
json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "rows": rows}, open(sys.argv[1], "w"), indent=1)
PY
tail -3 "$OUT/profile_eager_bwd.txt"
# SGEMM efficiency by K (SDPA math's fp32 matmuls): SGEMM=1 adds it
if [ -n "${SGEMM:-}" ]; then python3 -m perfsim.validate.probe_sgemm "$OUT/sgemm.json"; fi
