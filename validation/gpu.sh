#!/usr/bin/env bash
# Validation on a lent GPU (DESIGN.md §8), one script of at most ~8 minutes on an H200:
#   calibrate -> step-time grid (+ fit) -> compare, on an 8B-shaped random model and on the
#   trained tiny family. Results under validation/results/gpu/ (or $OUT_DIR).
#
#   bash validation/gpu.sh          # on the GPU machine (its own python3 with torch + triton)
#   bash validation/gpu.sh --cpu    # the CPU form: the same steps at small sizes (tests run it)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT_DIR:-validation/results/gpu}
mkdir -p "$OUT"
if [ "${1:-}" = "--cpu" ]; then
  CAL=(--size-mb 32 --gemm 256 --repeats 3)
  STEP=(--quick --repeats 2 --rounds 1)
  RANDOM_TRACE=traces/engine-tiny.yaml
else
  CAL=(--size-mb 2048 --gemm 8192 --repeats 9)
  STEP=(--repeats 5 --rounds 2)
  RANDOM_TRACE=traces/validate-8b-random.yaml
fi
HW="$OUT/hardware-measured.yaml"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
stamp "calibrate"
$PY -m validation.calibrate --out "$HW" "${CAL[@]}" | tail -3
stamp "step-time grid"
$PY -m validation steptime --out "$OUT/steptime" --hardware "$HW" --fit "${STEP[@]}" | tail -12
stamp "compare: random model ($RANDOM_TRACE)"
$PY -m validation compare "$RANDOM_TRACE" --out "$OUT/compare-random" --hardware "$HW" | tail -20
stamp "compare: trained family (traces/family-tiny.yaml)"
$PY -m validation compare traces/family-tiny.yaml --out "$OUT/compare-family" --hardware "$HW" | tail -20
stamp "done: $OUT"
