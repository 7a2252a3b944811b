#!/usr/bin/env bash
# The GPU path, run and measured on a machine with a CUDA device: the CUDA tests, then the
# scorer against the matmul roofline per dtype, float16 (mixed), bfloat16, autocast and TF32 against float32, and the estimators
# (lattice against proxy at equal k) and a class's shared passes on the GPU, then bench/scale.py at the paper's model sizes. Prints every table; the log also goes to
# $LOG (default test-output/gpu.log).
# Run: bench/gpu.sh [quick]   (PYTHON defaults to .venv/bin/python, else python3)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
LOG=${LOG:-test-output/gpu.log}
mkdir -p "$(dirname "$LOG")"
export PYTHONUNBUFFERED=1
K=${K:-1000}
[ "${1:-}" = quick ] && K=100
{
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "|", torch.cuda.get_device_name(0))' || exit 1
  "$PYTHON" -m marginal_core.models --warm
  "$PYTHON" -m pytest -q -m cuda tests/test_cuda.py -p no:cacheprovider
  "$PYTHON" bench/scoring.py --device cuda --dtypes float32,float16,bfloat16 --samples 256
  "$PYTHON" bench/precision.py --device cuda --modes float16,bfloat16,autocast,tf32
  for dtype in float32 float16; do
    "$PYTHON" bench/estimators.py --device cuda --dtype $dtype --samples "$K"
  done
  # a class's sessions in shared passes against taking turns (issue 20, item 5)
  "$PYTHON" bench/batching.py --device cuda --dtype float16 --sessions 1,8,16,32
  # the paper's sizes, random weights, the largest first, one process each ($SCALE to choose)
  for model in ${SCALE:-gemma3-27b llama2-13b gemma3-12b llama2-7b gemma3-4b gemma3-1b}; do
    "$PYTHON" bench/scale.py --device cuda --models "$model" $( [ "${1:-}" = quick ] && echo --quick )
  done
} 2>&1 | grep --line-buffered -v "Loading weights" | tee "$LOG"
