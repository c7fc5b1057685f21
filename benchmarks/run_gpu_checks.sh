#!/usr/bin/env bash
# Every GPU check and GPU benchmark of the project, in one go, on a machine with an NVIDIA
# GPU, nvcc and torch with CUDA (run from the repository root). Each step has a time limit
# and writes its log (and JSON where it has one) to OUT; a step that fails or runs out of
# time does not stop the next.
#
#   benchmarks/run_gpu_checks.sh OUT [KERNELBENCH_SRC]
#
# KERNELBENCH_SRC: the src/ folder of a KernelBench checkout, for the side-by-side
# comparison with KernelBench's own harness (skipped without it). KB_PROBLEMS (its
# KernelBench/ folder) and KB_TIMING (a folder of its published timings, such as
# results/timing/H100_Modal) enable the comparison of our reference timings with the
# published ones. KB (default .kb) is a folder holding KernelBench's real-candidate runs
# (runs/, technoabsurdist/KernelBench, KernelBench/, src/) and CUDA-L1's set (cuda-l1/), for
# the real-candidate steps (skipped where they are missing). STEPS (environment) picks
# steps by name, e.g. STEPS="gpu-tests-evaluator optimize"; default: all of
# gpu-tests-evaluator gpu-tests-rest throughput eval-processes-0 eval-processes-1 eval-processes-2
# timing-spread kernelbench-a kernelbench-b real-cuda kernelbench-harness kernelbench-harness-rest cuda-l1
# baselines offline-cuda-policy optimize gpu-preset. Each step is sized for a 600 s limit on an
# H100 80GB with 16 cores.
set -uo pipefail
out="${1:?usage: benchmarks/run_gpu_checks.sh OUT [KERNELBENCH_SRC]}"
kb_src="${2:-}"
mkdir -p "$out" && out="$(cd "$out" && pwd)"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"

steps="${STEPS:-gpu-tests-evaluator gpu-tests-rest throughput eval-processes-0 eval-processes-1 eval-processes-2 timing-spread kernelbench-a kernelbench-b real-cuda kernelbench-harness kernelbench-harness-rest cuda-l1 baselines offline-cuda-policy optimize gpu-preset}"
kb="${KB:-.kb}"
wanted() { [[ " $steps " == *" $1 "* ]]; }

step() {  # step NAME SECONDS COMMAND...: run with a limit, log to OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  wanted "$name" || return 0
  echo "== $name (limit ${limit} s)"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  echo "   exit $? after $((SECONDS - t0)) s; log: $out/$name.log"
}

# Tasks with hand-written candidates in four variants (correct, slow, wrong, compile error).
tasks="1_Scaled_vector_add.py 2_GELU_tanh.py 3_Row_sum.py 5_Softmax.py 6_LayerNorm.py 8_Square_matmul.py 1_Linear_ReLU_BiasAdd.py 4_Residual_LayerNorm.py"

step gpu-tests-evaluator 590 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider --durations=15 \
  tests/evaluate
step gpu-tests-rest 590 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider --durations=15 \
  --ignore=tests/evaluate
step throughput 590 python3 benchmarks/bench_cuda_eval.py --section throughput --tasks $tasks \
  --sample 2 --work "$out/.work" --json "$out/throughput.json"
# The hostile corpus of tests/evaluate/cuda/test_cuda_hostile.py (its 1_Scaled_vector_add
# fixtures) in three parts, each sized for the limit: one maxcode eval cuda process takes about
# 25 s alone on an H200.
hostile=tests/evaluate/cuda/hostile
parts=("good slow oom racy late_reuse crash hang exits torch_only"
  "result_reuse inplace alias stream thread timing_patch precision hardcoded calls_reference"
  "torch_compute torch_tampering backend_flags unused_kernel spin introspection cuda_graph")
for i in 0 1 2; do
  step "eval-processes-$i" 590 python3 benchmarks/bench_cuda_eval.py --section processes \
    --task src/maxcode/tasks/builtin_cuda/level1/1_Scaled_vector_add.py --cache-dir "$out/.work/processes" \
    $(for f in ${parts[$i]}; do echo "$hostile/$f.py"; done) --json "$out/eval_processes_$i.json"
done
step timing-spread 590 python3 benchmarks/bench_timing_spread.py --repeats 5 --json "$out/timing_spread.json"
if [ -n "$kb_src" ]; then
  # In two halves, each sized for the 600 s limit (ours cold, KernelBench's parallel
  # pre-compile of 16 candidates, then a fresh process per KernelBench evaluation).
  half_a="1_Scaled_vector_add.py 2_GELU_tanh.py 3_Row_sum.py 5_Softmax.py"
  half_b="6_LayerNorm.py 8_Square_matmul.py 1_Linear_ReLU_BiasAdd.py 4_Residual_LayerNorm.py"
  step kernelbench-a 590 python3 benchmarks/bench_cuda_eval.py --section kernelbench --kb-src "$kb_src" \
    --tasks $half_a --work "$out/.work/kb-a" --budget-s 560 --json "$out/kernelbench-a.json"
  step kernelbench-b 590 python3 benchmarks/bench_cuda_eval.py --section kernelbench --kb-src "$kb_src" \
    --tasks $half_b --work "$out/.work/kb-b" --budget-s 560 --json "$out/kernelbench-b.json"
fi
if [ -d "$kb/runs" ]; then
  # 64 real LLM-written candidates (a stratified sample of KernelBench levels 1-2 with A100
  # labels) in one go, timed cold and warm (each pass times the references again, so the
  # run-to-run spread includes theirs).
  step real-cuda 590 python3 benchmarks/bench_real_cuda.py -n 64 --passes cold warm \
    --work "$out/.work/real-cuda" --json "$out/real-cuda.json"
  # KernelBench's own harness on the same 64 candidates, on this GPU, four fresh processes at a
  # time, each as soon as its build is done (its pre-compile of 64 takes 370 s on an H200's 16
  # cores), resumed by a second step where the first ran out of time; then ours against it on
  # this GPU: the agreement table, each disagreement with its named cause.
  for part in harness harness-rest; do
    step "kernelbench-$part" 590 python3 benchmarks/bench_real_cuda.py --mode kernelbench --kb-n 64 \
      --kb-jobs 4 --ours-json "$out/real-cuda.json" --work "$out/.work/kb-harness" \
      --json "$out/kernelbench-harness.json"
  done
fi
if [ -f "$kb/cuda-l1/optimized_cuda_code/h100.json" ]; then
  step cuda-l1 590 python3 benchmarks/bench_real_cuda.py --source cuda-l1 -n 24 \
    --work "$out/.work/cuda-l1" --json "$out/cuda-l1.json"
fi
if [ -n "${KB_PROBLEMS:-}" ] && [ -n "${KB_TIMING:-}" ]; then
  problems="level1/1_Square_matrix_multiplication_.py level1/19_ReLU.py level1/23_Softmax.py
    level1/40_LayerNorm.py level1/47_Sum_reduction_over_a_dimension.py level1/88_MinGPTNewGelu.py
    level2/12_Gemm_Multiply_LeakyReLU.py level2/40_Matmul_Scaling_ResidualAdd.py"
  step baselines 590 python3 benchmarks/bench_cuda_eval.py --section baselines --kernelbench-dir "$KB_PROBLEMS" \
    --timing-dir "$(dirname "$KB_TIMING")" --hardware "$(basename "$KB_TIMING")" --problems $problems \
    --json "$out/baselines.json"
fi
step offline-cuda-policy 590 python3 benchmarks/bench_offline_cuda_policy.py --depth 2 --k 2 \
  --wall-budget-s 230 --cache "$out/.work/policy-cache" --json "$out/offline_cuda_policy.json"
model=src/maxcode/tasks/builtin_cuda/level2/3_Scale_Add_Clamp.py
step optimize 590 python3 -m maxcode optimize "$model" --kind cuda --depth 3 --k 3 --out "$out/optimize"

# The gpu preset end to end on a small slice (2 tasks per suite, CUDA-LLM and +MaxCode,
# depth 2, one seed), in a copy of the workflow so this checkout's results stay as they are.
wanted gpu-preset || exit 0
work="$out/gpu-preset"
mkdir -p "$work/data"
cp -r Snakefile workflow envs "$work/" && cp data/paper_reference.yaml "$work/data/"
python3 - "$work/params.yaml" <<'PY'
import sys
from pathlib import Path

import yaml

cfg = yaml.safe_load(Path("presets/gpu.yaml").read_text())
keep = ["cuda-llm", "cuda-llm+maxcode"]
cfg["methods"] = {name: m for name, m in cfg["methods"].items() if name in keep}
cfg["search"].update(seeds=[0], depth=2)
for suite in cfg["suites"].values():
    suite["limit"] = 2
cfg["tables"].update(main=keep, ablation=[], rerank=[])
cfg["r2g"]["train_methods"] = keep
Path(sys.argv[1]).write_text(yaml.safe_dump(cfg, sort_keys=False))
PY
(cd "$work" && step gpu-preset 540 snakemake --profile workflow/profiles/gpu --cores "$(nproc)" results/tables/main.md)
cp "$work"/results/tables/main.md "$out/gpu-preset-main.md" 2>/dev/null || true
# The GPU each rollout held (provenance.gpu_device of its records): one device per rollout.
python3 - "$work/results" <<'PY' | tee "$out/gpu-preset-devices.txt"
import json
import sys
from collections import Counter
from pathlib import Path

devices = Counter()
for path in sorted(Path(sys.argv[1]).rglob("seed*.jsonl")):
    records = (json.loads(line) for line in path.open())
    start = next((r for r in records if r.get("kind") == "run_start"), {})
    device = start.get("provenance", {}).get("gpu_device")
    devices[device] += 1
    print(f"{path.relative_to(sys.argv[1])}: gpu {device}")
print("rollouts per GPU:", dict(devices))
PY
tar -czf "$out/gpu-preset-results.tar.gz" -C "$work" results logs 2>/dev/null || true
