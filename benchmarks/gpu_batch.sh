#!/usr/bin/env bash
# Batched GPU measurements for one lease of the H200 (method and results: docs/PERFORMANCE.md).
# Usage (on the GPU machine, repo root, after the wheel install line of shared/device/wheels.sh):
#   bash benchmarks/gpu_batch.sh OUTDIR step [step ...]
# Steps: cost | cost8 | adversarial | confined | speed10 | speedtests | agent10 | honest | builtin_all | builtin_eval | model_check | gputests | launch |
#        window | breakdown | copybw | evalops | profile | devbw | resweep | ncu
# evalops, profile, devbw and ncu take the operators from $OPS (comma-separated); evalops and ncu write
# their builtin kernels first. ncu: Nsight Compute's full set for the kernels whose name matches the
# regex $NCU_KERNEL (default: every launch) in each operator's largest case, as text reports.
# Each step writes its log and a tarball of its run folder under OUTDIR.
set -uo pipefail
out=$1; shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
newest_run() { ls -1dt agent_logs/run_* 2>/dev/null | head -1; }
keep_run() { local r; r=$(newest_run); [ -n "$r" ] && tar czf "$out/$1.tgz" "$r" && echo "kept $r as $1.tgz"; }
for step in "$@"; do
  start=$(date +%s)
  case $step in
    cost)
      timeout 100 python3 benchmarks/sandbox_cost.py --device cuda --num-candidates 10 --modes fork \
        --out "$out/sandbox_cost.json" > "$out/cost.log" 2>&1 ;;
    cost8)
      # verdict latency with 8 candidates judged at once
      timeout 200 python3 benchmarks/sandbox_cost.py --device cuda --num-candidates 3 --modes fork \
        --concurrent 8 --out "$out/sandbox_cost8.json" > "$out/cost8.log" 2>&1 ;;
    adversarial)
      # the GPU-only hostile kernels (side stream, timed calls, freed memory) and the sandbox-judged GPU tests
      timeout 400 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_adversarial.py tests/gpu/test_gpu.py \
        tests/integration/test_adversarial.py > "$out/adversarial.log" 2>&1 ;;
    speed10)
      # speed rounds with the builtin provider: per operator speedup before and after
      timeout -s INT -k 30 "${SPEED_TIMEOUT:-420}" python3 -m agent.run --provider builtin --suite torchbench \
        --num-operators 10 --speed-rounds 3 --device cuda --kernels-dir /tmp/k_speed > "$out/speed10.log" 2>&1
      keep_run speed10 ;;
    confined)
      # containment on the GPU: what the machine enforces, then the sandbox-judged GPU tests
      timeout 60 python3 -m evaluator.confine --check > "$out/confined.log" 2>&1
      timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu.py tests/integration/test_containment.py \
        -m "gpu or not gpu" >> "$out/confined.log" 2>&1 ;;
    speedtests)
      timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/unit/test_speed_rounds.py \
        tests/unit/test_compile_baseline.py > "$out/speedtests.log" 2>&1 ;;
    agent10)
      timeout 300 python3 -m agent.run --provider builtin --suite torchbench --num-operators 10 \
        --device cuda --num-workers 1 --kernels-dir /tmp/k10 > "$out/agent10.log" 2>&1
      keep_run agent10 ;;
    honest)
      timeout 200 python3 -m agent.run --evaluate-only --kernels-dir tests/fixtures/kernels/corpus \
        --suite torchbench --ops add.Tensor,relu.default,gelu.default,sum.dim_IntList,_softmax.default,mm.default,mean.dim \
        --device cuda > "$out/honest.log" 2>&1
      keep_run honest ;;
    builtin_all)
      timeout -s INT -k 30 "${BUILTIN_TIMEOUT:-330}" python3 -m agent.run --config configs/builtin_gpu.toml \
        --suite torchbench --device cuda --kernels-dir generated_kernels > "$out/builtin_all.log" 2>&1
      keep_run builtin_all ;;
    builtin_eval)
      # the builtin writer's round-1 kernels (what the agent keeps on the H200), evaluated with timing
      python3 benchmarks/write_builtin.py generated_kernels > "$out/builtin_eval.log" 2>&1
      timeout -s INT -k 30 "${BUILTIN_TIMEOUT:-400}" python3 -m agent.run --config configs/builtin_gpu.toml \
        --evaluate-only --suite torchbench --device cuda --kernels-dir generated_kernels >> "$out/builtin_eval.log" 2>&1
      keep_run builtin_eval ;;
    launch)
      timeout 120 python3 benchmarks/launch_overhead.py --out "$out/launch.json" > "$out/launch.log" 2>&1 ;;
    window)
      timeout 100 python3 benchmarks/timing_window.py --out "$out/window.json" > "$out/window.log" 2>&1 ;;
    breakdown)
      # needs the builtin kernels (builtin_eval writes them); neg.default only
      [ -d generated_kernels/neg__default ] || python3 benchmarks/write_builtin.py generated_kernels --ops neg.default > /dev/null 2>&1
      timeout 100 python3 benchmarks/host_breakdown.py generated_kernels --out "$out/breakdown.json" > "$out/breakdown.log" 2>&1 ;;
    copybw)
      timeout 200 python3 benchmarks/copy_bandwidth.py --out "$out/copy_bandwidth.json" > "$out/copybw.log" 2>&1 ;;
    evalops)
      python3 benchmarks/write_builtin.py generated_kernels --ops "$OPS" > "$out/evalops.log" 2>&1
      timeout -s INT -k 30 "${EVALOPS_TIMEOUT:-300}" python3 -m agent.run --config configs/builtin_gpu.toml \
        --evaluate-only --suite torchbench --device cuda --kernels-dir generated_kernels --ops "$OPS" >> "$out/evalops.log" 2>&1
      keep_run evalops ;;
    devbw)
      # bandwidth by GPU kernel time (benchmarks/device_bandwidth.py) of $OPS; needs their kernels
      python3 benchmarks/write_builtin.py generated_kernels --ops "$OPS" > "$out/devbw.log" 2>&1
      timeout "${DEVBW_TIMEOUT:-300}" python3 benchmarks/device_bandwidth.py generated_kernels \
        --ops "$OPS" --out "$out/devbw.jsonl" >> "$out/devbw.log" 2>&1 ;;
    profile)
      timeout "${PROFILE_TIMEOUT:-200}" python3 benchmarks/kernel_profile.py generated_kernels --ops "$OPS" --largest \
        --cases "${PROFILE_CASES:-2}" --out "$out/profile.jsonl" > "$out/profile.log" 2>&1 ;;
    model_check)
      timeout "${MODEL_CHECK_TIMEOUT:-150}" python3 -m evaluator.model_check --kernels-dir generated_kernels --steps 500 \
        --device cuda > "$out/model_check.log" 2>&1
      keep_run model_check ;;
    resweep)
      # warp/program knobs swept in earlier sessions whose optimum may have moved since (group
      # norm's pipelined kernel went from 16 to 8 warps with the same SASS:
      # docs/history/BENCHMARKS-2026-11-to-12.md §23); one
      # knob_sweep per line of benchmarks/data/resweep.txt ("OP CASES --knob ... --knob ...")
      rk=$(mktemp -d)  # the kernels stay off OUTDIR, which comes back from the device
      python3 benchmarks/write_builtin.py "$rk" > "$out/resweep.log" 2>&1
      grep -v '^#' benchmarks/data/resweep.txt | while read -r op cases knobs; do
        [ -n "$op" ] || continue
        # shellcheck disable=SC2086  # the knob arguments split on purpose
        timeout 200 python3 benchmarks/knob_sweep.py "$rk" --op "$op" --cases "$cases" $knobs \
          --out "$out/resweep.jsonl" >> "$out/resweep.log" 2>&1 < /dev/null
      done ;;
    ncu)
      # the lent machine's CUDA ships ncu; a text report per operator (the binary one is large).
      # knob_sweep runs the case (eager, a check, then timed calls): the 4th matching launch is
      # profiled, past the check's
      python3 benchmarks/write_builtin.py generated_kernels --ops "$OPS" > "$out/ncu.log" 2>&1
      for op in ${OPS//,/ }; do
        timeout "${NCU_TIMEOUT:-200}" /usr/local/cuda/bin/ncu --kernel-name "regex:${NCU_KERNEL:-.}" \
          --launch-skip 3 --launch-count "${NCU_COUNT:-1}" --set full -f -o "/tmp/ncu_$op" \
          python3 benchmarks/knob_sweep.py generated_kernels --op "$op" --cases 1 --reps 3 \
          >> "$out/ncu.log" 2>&1
        /usr/local/cuda/bin/ncu --import "/tmp/ncu_$op.ncu-rep" --page details > "$out/ncu_$op.txt" 2>&1
      done ;;
    gputests)
      # the CUDA tests (tests/gpu/, the folder is the marker), in a process without TRITON_INTERPRET
      env -u TRITON_INTERPRET timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu \
        > "$out/gputests.log" 2>&1 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  echo "step $step: rc=$? in $(( $(date +%s) - start )) s"
done
