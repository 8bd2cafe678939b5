#!/usr/bin/env bash
# One resumable validation call on the lent H200 (the device tool's `run`), from the repo root:
#
#   run(command="bash validate/h200_run.sh", carry=[".whl"], timeout_s=600)
#
# Steps: install the carried pydantic wheels -> pip install -e . -> perfsim calibrate (skipped
# when validate/profiles/h200-sxm-calibrated.toml is already in the tree) -> perfsim validate
# with --limit-seconds (resuming from validate/reports/h200/results.jsonl if present) -> report.
# Everything lands in $OUT (6 files): run.log, h200-calibrated.toml, h200/results.jsonl,
# h200/report.md, h200/results.csv, h200/scatter.png. Before the next call copy
# h200/results.jsonl to validate/reports/h200/ and h200-calibrated.toml to
# validate/profiles/h200-sxm-calibrated.toml, so that the next call resumes and skips calibrate.
#
# Knobs (environment): LIMIT (validate budget in s, default 330), GRID (default), PHASE (fwd),
# VALIDATE_ARGS (extra arguments, e.g. "--no-external"), RECALIBRATE=1 (calibrate anyway).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/perfsim-out}
LIMIT=${LIMIT:-330}
GRID=${GRID:-default}
PHASE=${PHASE:-fwd}
RESULTS=validate/reports/h200
PROFILE=validate/profiles/h200-sxm-calibrated.toml
LOG=$OUT/run.log
mkdir -p "$OUT/h200"
export PYTHONUNBUFFERED=1
T0=$SECONDS
step() { echo "== $* (t=$((SECONDS - T0)) s)" | tee -a "$LOG"; }

step "wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >>"$LOG" 2>&1 || { tail -5 "$LOG"; exit 1; }
# pydantic-core needs typing_extensions >= 4.14.1: carry it only if the image's is older
if ! python3 -c "from importlib.metadata import version as v; import sys; \
sys.exit(tuple(map(int, v('typing_extensions').split('.')[:3])) < (4, 14, 1))" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/optional/typing_extensions-*.whl >>"$LOG" 2>&1
fi
export PYTHONPATH=/tmp/site

step "perfsim"
if ! python3 -m pip install -q --no-build-isolation --no-deps -e . >>"$LOG" 2>&1; then
    # fallback: the package layout of pyproject.toml by links (perfsim.validate, .catalog)
    echo "pip install -e . failed; using a linked package tree" | tee -a "$LOG"
    mkdir -p /tmp/shim && rm -rf /tmp/shim/perfsim && cp -r perfsim /tmp/shim/perfsim
    ln -s "$PWD/validate" /tmp/shim/perfsim/validate
    ln -s "$PWD/hardware" /tmp/shim/perfsim/catalog
    export PYTHONPATH=/tmp/shim:/tmp/site
fi
python3 -c "import perfsim, perfsim.validate, torch, triton, pydantic; \
print('perfsim', perfsim.__version__, 'torch', torch.__version__, 'triton', triton.__version__, \
'pydantic', pydantic.VERSION)" 2>&1 | tee -a "$LOG"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader 2>&1 | tee -a "$LOG"

if [ -f "$PROFILE" ] && [ -z "${RECALIBRATE:-}" ]; then
    step "calibrate: using $PROFILE"
    cp "$PROFILE" "$OUT/h200-calibrated.toml"
else
    step "calibrate"
    python3 -m perfsim.cli calibrate --out "$OUT/h200-calibrated.toml" \
        --base h200-sxm 2>&1 | tee -a "$LOG" | cut -c1-160
    [ -f "$OUT/h200-calibrated.toml" ] || { echo "calibrate failed"; exit 1; }
fi

step "validate (limit ${LIMIT} s, grid $GRID, phase $PHASE)"
[ -f "$RESULTS/results.jsonl" ] && cp "$RESULTS/results.jsonl" "$OUT/h200/results.jsonl"
# shellcheck disable=SC2086
python3 -m perfsim.cli validate --out "$OUT/h200" --gpu "$OUT/h200-calibrated.toml" \
    --grid "$GRID" --phase "$PHASE" --limit-seconds "$LIMIT" ${VALIDATE_ARGS:-} >>"$LOG" 2>&1
RC=$?
grep -E "rows measured now|stopped|error:" "$LOG" | tail -3

step "report"
python3 -m perfsim.cli validate --report-only "$OUT/h200" 2>&1 | tee -a "$LOG" \
    | grep -v "^wrote"
exit $RC
