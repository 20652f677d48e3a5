#!/bin/bash
# Builds llama.cpp's llama-bench and llama-quantize outside the project, as the benchmark peer of
# bench_large.sh (never a dependency of attnviz). The source is the git bundle that npm's
# node-llama-cpp package carries (llama/gitRelease.bundle; llama/llama.cpp.info.json names the
# release), so it needs only the npm registry.
#
#   tests/bench/build_llama_peer.sh [DIR]     # DIR defaults to /tmp/llama-peer
#   then: LLAMA_BENCH=DIR/src/build/bin/llama-bench LLAMA_QUANTIZE=DIR/src/build/bin/llama-quantize \
#         tests/bench/bench_large.sh build-portable /tmp/attnviz-large
#
# env: NLC_VERSION (node-llama-cpp's version, 3.22.1: llama.cpp de3ff81), AMX (off; on builds
# the AMX kernels, for machines whose kernel lets a process use the tiles).
#
# The CPU code is built for the AVX-512 set this build machine has (VNNI, VBMI, BF16) rather than
# with GGML_NATIVE: -march=native turns on the AMX kernels wherever the CPU reports AMX, and
# where the kernel (or a VM) has not enabled the tiles their first tile load dies with SIGILL,
# as it did on the 2-core build machine.
set -euo pipefail
dir=${1:-/tmp/llama-peer}
version=${NLC_VERSION:-3.22.1}
mkdir -p "$dir"
cd "$dir"
if [ ! -d src ]; then
  [ -d npm/node_modules/node-llama-cpp ] || {
    mkdir -p npm
    (cd npm && npm init -y >/dev/null && npm install --ignore-scripts "node-llama-cpp@$version" >/dev/null)
  }
  git -c advice.detachedHead=false clone -q npm/node_modules/node-llama-cpp/llama/gitRelease.bundle src
fi
amx=OFF
[ "${AMX:-off}" = on ] && amx=ON
isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
if grep -q avx512f /proc/cpuinfo; then
  isa+=(-DGGML_AVX512=ON)
  for f in vbmi vnni bf16; do
    grep -q "avx512_\?$f" /proc/cpuinfo && isa+=(-DGGML_AVX512_${f^^}=ON)
  done
fi
grep -q avx_vnni /proc/cpuinfo && isa+=(-DGGML_AVX_VNNI=ON)
cmake -S src -B src/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  "${isa[@]}" -DGGML_AMX_TILE=$amx -DGGML_AMX_INT8=$amx -DGGML_AMX_BF16=$amx >/dev/null
ninja -C src/build llama-bench llama-quantize >/dev/null
echo "$dir/src/build/bin/llama-bench"
echo "$dir/src/build/bin/llama-quantize"
