#!/usr/bin/env bash
# The GPU checks, on a machine with a GPU, in one call of the device tool.
#
# The machine starts bare, cannot reach a package registry, and has torch,
# numba, numba-cuda, scikit-learn, pytest, pytest-xdist and hypothesis, but not
# quitefastmst or POT; MNIST sits outside the repository. So, here, first
# (both folders are ignored by git and carried to the machine):
#
#   echo /.whl/ >> .git/info/exclude; echo /.gpudata/ >> .git/info/exclude
#   for p in quitefastmst pot; do python3 -m pip download --no-deps \
#       --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .whl "$p"; done
#   mkdir -p .gpudata && cp -r ../shared/data/mnist .gpudata/  # 'mnist', 'lenet'
#
# (the wheels are about 40 MB, MNIST 11 MB: with the repository, 53 of the
# 64 MB a call may carry)
#
# then call the device tool's run with
#   command: bash benchmarks/gpu_session.sh [STEP,...]
#   carry:   [".whl", ".gpudata"]
#   timeout_s: DEADLINE (below) plus 20 s
#
# STEP (default tests,clam,forest,perturbed,checks, about 9 minutes: on an H200
# on 2026-11-27 the tests took 184 s; ClAM's and the forests' cases need about
# two minutes each):
#   tests      the CUDA tests (every test file that has a CUDA case), 14 workers
#   clam       bench_gpu.py's ClAM cases (200,000 x 32, batch 16 and 1,024)
#   forest     bench_gpu.py's embedding cases (mlp on digits, batch 64 to 1,024)
#              and DeepImageClustering on digits
#   perturbed  bench_perturbed.py at n = 4,096 and 16,384, 100 samples
#   checks     bench_torch_api.py --only checks (the input checks' cost)
#   prcut      bench_gpu.py's PRCut case (1,000,000 x 32)
#   prcut-profile  the same case's CUDA fit under cProfile (where its time goes)
#   clam-profile   ClAM's CUDA fit of the clam case under cProfile (the host's share:
#              launches, copies, waits)
#   forest-profile the forest case's CUDA fit (an MLP on digits through the perturbed
#              forests, batch 64) under cProfile: the per-step host work LeNet-5 pays too
#   mnist      bench_gpu.py's MNIST cases (PRCut's protocol and defaults)
#   lenet      bench_mnist.py --only forest --device cuda (LeNet-5, 30,000 steps)
#   deep       bench_mnist.py --only deep --device cuda --phases (DeepImageClustering
#              on MNIST's 60,000 images, random_state 0, 1, 2, each phase timed)
#   base       bench_perturbed.py and bench_gpu.py's ClAM case with an earlier
#              version of the package, to compare a kernel's change on one machine;
#              prepare it here first, e.g. for the version before the pruned Prim:
#                mkdir -p .gpudata/base && git archive 38061e9 skdiffclust \
#                    | tar -x -C .gpudata/base
# Each step's output goes to $OUT/STEP.log (the device tool brings back at most
# eight files) and to the call's output, and bench_gpu.py's and bench_mnist.py's
# rows to $OUT/gpu.csv and $OUT/mnist.csv (for benchmarks/results/); a step that runs past its limit is
# stopped and the next one runs. DEADLINE (seconds, default 570) caps the whole
# script: a step's limit is cut to what is left, and a step with under 20 s left
# is skipped, so the script ends inside the call's timeout_s with its logs.
set -uo pipefail

steps=${1:-tests,clam,forest,perturbed,checks}
out=${OUT:-/tmp/gpu_session}
mkdir -p "$out"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mnist=.gpudata/mnist
deadline=${DEADLINE:-570}

# every test file with a CUDA case (the list stays current as tests are added)
mapfile -t cuda_tests < <(grep -rl --include='test_*.py' cuda tests | sort)

# step name, time limit in seconds, command
run_step() {
    local name=$1 limit=$2
    shift 2
    local left=$((deadline - SECONDS - 5))
    if ((left < 20)); then
        echo "== $name: skipped, ${left} s left of the deadline"
        return
    fi
    ((limit > left)) && limit=$left
    echo "== $name (at most ${limit} s): $*"
    local start=$SECONDS
    timeout --signal=INT --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
    local status=${PIPESTATUS[0]}
    echo "== $name: exit $status after $((SECONDS - start)) s"
}

echo "== machine"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    echo "host cores: $(nproc)"
    python3 -c "import torch, numba, sklearn, numpy; print('torch', torch.__version__, \
'cuda', torch.version.cuda, 'numba', numba.__version__, 'scikit-learn', \
sklearn.__version__, 'numpy', numpy.__version__)"
    git log --oneline -1 2>/dev/null || true
} 2>&1 | tee "$out/machine.log"

for step in ${steps//,/ }; do
    case $step in
        tests) run_step tests 240 python3 -m pytest -q -p no:cacheprovider -n 14 -rs \
            -m "not slow" "${cuda_tests[@]}" ;;
        clam) run_step clam 160 python3 benchmarks/bench_gpu.py --only clam,clam-batch-1024 \
            --csv "$out/gpu.csv" ;;
        forest) run_step forest 150 python3 benchmarks/bench_gpu.py \
            --only forest,forest-batch,deep --csv "$out/gpu.csv" ;;
        perturbed) run_step perturbed 60 python3 benchmarks/bench_perturbed.py \
            --sizes 4096 16384 --samples 100 --cpu-budget 5 ;;
        checks) run_step checks 100 python3 benchmarks/bench_torch_api.py --only checks ;;
        prcut) run_step prcut 150 python3 benchmarks/bench_gpu.py --only prcut \
            --csv "$out/gpu.csv" ;;
        prcut-profile) run_step prcut-profile 90 python3 benchmarks/bench_gpu.py --only prcut \
            --cuda-only --profile 40 ;;
        clam-profile) run_step clam-profile 90 python3 benchmarks/bench_gpu.py --only clam \
            --cuda-only --profile 40 ;;
        forest-profile) run_step forest-profile 90 python3 benchmarks/bench_gpu.py \
            --only forest --cuda-only --profile 40 ;;
        mnist) run_step mnist 240 python3 benchmarks/bench_gpu.py --only none \
            --mnist-dir "$mnist" --csv "$out/gpu.csv" ;;
        lenet) run_step lenet 500 python3 benchmarks/bench_mnist.py --only forest \
            --device cuda --data-dir "$mnist" ;;
        deep) run_step deep 400 python3 benchmarks/bench_mnist.py --only deep \
            --device cuda --phases --data-dir "$mnist" --csv "$out/mnist.csv" ;;
        base) run_step base 160 env PYTHONPATH="$PWD/.gpudata/base:$PYTHONPATH" bash -c \
            "python3 benchmarks/bench_perturbed.py --sizes 4096 16384 --samples 100 \
            --cpu-budget 5 && python3 benchmarks/bench_gpu.py --only clam --cuda-only" ;;
        *) echo "unknown step '$step'"; exit 2 ;;
    esac
done
