#!/usr/bin/env bash
# attnviz: the GPU backend's checks on a machine with a real (NVIDIA) GPU.
#
# Builds the GPU tests and the benchmark, forces the EGL device platform (so Mesa's software
# renderer cannot be picked by mistake), refuses to go on if the renderer is llvmpipe, runs
# every `gpu`-labelled test with ATTNVIZ_REQUIRE_GPU=1 (a skip is a failure), then the GPU
# benchmark cases at 12 heads x T=1024 and 32 heads x T=8192 (and 1 head x T=4096).
#
# Needs: cmake, ninja, g++, the NVIDIA driver with its EGL library (libEGL_nvidia via GLVND),
# and the Debian packages libeigen3-dev nlohmann-json3-dev libcli11-dev libstb-dev libegl-dev
# libgl-dev libgtest-dev libbenchmark-dev. The 32 x 8192 case allocates about 17 GiB of GPU
# buffers (S and A, 8 GiB each) and reads 8 GiB back to the host once.
#
# Usage: tests/gpu/device_check.sh [BUILD_DIR]     (default: build-device)
# Writes its logs and the benchmark JSON to $BUILD_DIR/device_check/.
# DEVICE_CHECK_DRY_RUN=1 accepts a software renderer and runs only the 12 x 1024 benchmark,
# once: a rehearsal of the script on a machine without a GPU.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build-device}
out=$build/device_check
mkdir -p "$out"

echo "== machine"
nvidia-smi -L 2>/dev/null || echo "(nvidia-smi not found)"

echo "== build ($build)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNVIZ_GUI=OFF >"$out/cmake.log"
ninja -C "$build" attnviz attnviz_tests_gpu attnviz_bench >"$out/build.log"

export ATTNVIZ_EGL_PLATFORM=device
export ATTNVIZ_REQUIRE_GPU=1

echo "== renderer"
"$build/tests/gpu/attnviz_tests_gpu" --gtest_filter='GpuEngine.NameAndRendererNameTheGlRenderer' \
  | tee "$out/renderer.log" | grep 'GL renderer' || true
if ! grep -q 'GL renderer' "$out/renderer.log"; then
  echo "device_check: no GL context on the EGL device platform; see $out/renderer.log" >&2
  exit 1
fi
dry=${DEVICE_CHECK_DRY_RUN:-0}
if [ "$dry" != 1 ] && grep -qi 'llvmpipe\|softpipe\|swrast' "$out/renderer.log"; then
  echo "device_check: the EGL device platform gave a software renderer, not the GPU" >&2
  exit 1
fi

echo "== parity tests (label gpu)"
ctest --test-dir "$build" -L gpu --output-on-failure -j4 | tee "$out/ctest.log" | tail -n 5

echo "== benchmark"
if [ "$dry" = 1 ]; then
  large=0 filter='BM_Gpu.*/H:12/T:1024/' reps=1
else
  large=1 filter='BM_Gpu.*/H:(12/T:1024|32/T:8192|1/T:4096)/' reps=3
fi
ATTNVIZ_BENCH_LARGE=$large "$build/tests/bench/attnviz_bench" --benchmark_filter="$filter" \
  --benchmark_repetitions=$reps --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/bench_gpu.json" --benchmark_out_format=json | tee "$out/bench_gpu.txt"

if [ "$dry" != 1 ]; then
  # Tuning data for the kernel shapes (the defaults were chosen without a GPU at hand).
  echo "== kernel shapes (full MHA and re-softmax at 12 x 1024 and 32 x 8192)"
  for mm in 8,8,16 16,16,16 16,16,8 16,8,16 8,8,32; do
    for wg in 128 256 512; do
      echo "-- ATTNVIZ_GPU_MATMUL=$mm ATTNVIZ_GPU_SOFTMAX_WG=$wg"
      ATTNVIZ_GPU_MATMUL=$mm ATTNVIZ_GPU_SOFTMAX_WG=$wg ATTNVIZ_BENCH_LARGE=1 \
        "$build/tests/bench/attnviz_bench" \
        --benchmark_filter='BM_Gpu(FullMha|ReSoftmax)/H:(12/T:1024|32/T:8192)/' 2>&1 \
        | grep '^BM_' || true
    done
  done | tee "$out/shapes.txt"
fi

echo "== done: logs in $out"
