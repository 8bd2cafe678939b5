#!/usr/bin/env bash
# Timing the attention kernels users call (validate/external.py) on the lent H200, from the repo
# root, through the device tool's `run`. MODE (first argument):
#   first  stash the flash-attn-4 pieces carried (.fa4/s/run-NN; validate/fa4_install.sh
#          plan), power microbenchmarks, then rows
#   cute   install flash-attn-4 (validate/fa4_install.sh install, carrying the last piece),
#          then rows
#   rows   rows only
# Always carried: .whl (pydantic wheels) and .ext (Triton's tutorial kernel). Knobs: LIMIT
# (seconds for the rows, default 400), GRID (external | external-holdout[2..59]), IMPLS (default all),
# POWER=0 (skip the power probe in `first`), TAG (default h200: the reports folder's prefix,
# validate/reports/$TAG-external[-holdoutN]; another GPU gets its own, e.g. TAG=h100, so its
# rows never resume from the H200's); PERFSIM_EXT_WARM_S (seconds of warm-up before a row is
# timed, default 0.4: validate/external.py). Outputs under $OUT: run.log,
# ext/results.jsonl, power-microbench.json (first only). Rows resume from
# /tmp/ext-results/$GRID (a warm machine) or else from the repo copy in
# validate/reports/h200-external[-holdout]/results.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-rows}
OUT=${OUT:-/tmp/perfsim-out}
LIMIT=${LIMIT:-400}
GRID=${GRID:-external}
IMPLS=${IMPLS:-}
LOG=$OUT/run.log
mkdir -p "$OUT/ext"
export PYTHONUNBUFFERED=1
T0=$SECONDS
step() { echo "== $* (t=$((SECONDS - T0)) s)" | tee -a "$LOG"; }

step "wheels ($MODE)"
if ! PYTHONPATH=/tmp/site python3 -c "import pydantic" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >>"$LOG" 2>&1 || { tail -5 "$LOG"; exit 1; }
    if ! python3 -c "from importlib.metadata import version as v; import sys; \
sys.exit(tuple(map(int, v('typing_extensions').split('.')[:3])) < (4, 14, 1))" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/optional/typing_extensions-*.whl >>"$LOG" 2>&1
    fi
fi
# perfsim as a linked package tree (the layout of pyproject.toml: validate/, hardware/)
rm -rf /tmp/shim && mkdir -p /tmp/shim && cp -r perfsim /tmp/shim/perfsim
ln -s "$PWD/validate" /tmp/shim/perfsim/validate
ln -s "$PWD/hardware" /tmp/shim/perfsim/catalog
export PYTHONPATH=/tmp/shim:/tmp/site
# run python outside the repo root, where ./perfsim would shadow the linked tree
py() { (cd /tmp && python3 "$@"); }

case "$MODE" in
  first)
    step "stash flash-attn-4 pieces"
    if [ -d .fa4/s ]; then
        bash validate/fa4_install.sh stash 2>&1 | tee -a "$LOG"
    fi
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit \
        --format=csv,noheader 2>&1 | tee -a "$LOG"
    if [ "${POWER:-1}" != 0 ]; then
        step "power microbenchmarks"
        py -m perfsim.validate.power_probe --out "$OUT/power-microbench.json" 2>&1 \
            | tee -a "$LOG"
    fi ;;
  cute)
    step "install flash-attn-4"
    bash validate/fa4_install.sh install 2>&1 | tail -3 | tee -a "$LOG" ;;
esac

TAG=${TAG:-h200}
REPO_RES=validate/reports/$TAG-external
[ "$GRID" = external ] || REPO_RES=validate/reports/$TAG-$GRID
RES=/tmp/ext-results/$TAG-$GRID
mkdir -p "$RES"
if [ ! -f "$RES/results.jsonl" ] && [ -f "$REPO_RES/results.jsonl" ]; then
    cp "$REPO_RES/results.jsonl" "$RES/results.jsonl"
fi
END=$((SECONDS + ${LIMIT%.*}))
for attempt in 1 2 3 4; do
    LEFT=$((END - SECONDS))
    [ "$LEFT" -gt 10 ] || break
    step "rows: grid $GRID, attempt $attempt, limit $LEFT s"
    # shellcheck disable=SC2086
    py -m perfsim.validate.external_run --grid "$GRID" --out "$RES" --limit-seconds "$LEFT" \
        ${IMPLS:+--impls $IMPLS} 2>&1 | tee -a "$LOG" | grep -v "^ *[0-9.]*s b" | tail -40
    RC=${PIPESTATUS[0]}
    cp "$RES/results.jsonl" "$OUT/ext/results.jsonl" 2>/dev/null
    [ "$RC" -eq 3 ] || break
done
cp "$RES/results.jsonl" "$OUT/ext/results.jsonl" 2>/dev/null
step "done"
