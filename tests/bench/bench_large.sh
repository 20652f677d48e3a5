#!/bin/bash
# The 1B-scale figures of README "Large models": a Llama-3.2-1B-shaped random GGUF per type
# (make_llama1b_gguf.py), and for each
#   - the prompt pass: `attnviz model --ids <T ids> --layer 8 --weights` (one layer's attention
#     kept), median wall time of RUNS runs, as tokens/s, at every CPU-kernel level this machine
#     runs (ATTNVIZ_ISA) and with the default memory budget against --max-memory 16G (every
#     weight converted to float32 at open, the old default);
#   - decode: `attnviz generate -n N --verbose` after a 16-token prompt, its tokens/s;
#   - with LLAMA_BENCH=/path/to/llama-bench (llama.cpp, built outside the project as a peer, never
#     a dependency): its pp<T> and tg<N> on the same file with the same threads, and the ratios.
# Ratios are printed beside the figures: baseline / best level (the portable package on an old
# CPU against this one), converted / kept, attnviz / llama.cpp.
#
#   tests/bench/bench_large.sh [BUILD_DIR] [OUT_DIR]
#   env: TYPES (F16,Q8_0), T (512), N (64), RUNS (3), THREADS (all cores), LLAMA_BENCH
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-/tmp/attnviz-large}
types=${TYPES:-F16,Q8_0}
T=${T:-512}
N=${N:-64}
runs=${RUNS:-3}
threads=${THREADS:-$(nproc)}
bin=$build/app/attnviz
mkdir -p "$out"
/usr/bin/python3 tests/bench/make_llama1b_gguf.py "$out" --types "$types" >&2
ids=$(/usr/bin/python3 -c "import random; random.seed(0); print(','.join(str(random.randrange(1, 128000)) for _ in range($T)))")

# Median wall seconds of `runs` runs of the command.
median() {
  local times=()
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    t1=$(date +%s.%N)
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')")
  done
  printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
rate() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", a / b}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "attnviz $("$bin" --version | tail -1); $(nproc) cores; T=$T, decode $N tokens, median of $runs"
levels=$(for l in baseline avx2 avx512; do
  ATTNVIZ_ISA=$l "$bin" --version 2>/dev/null | grep -q "CPU kernels: $l" && echo $l; done)
best=$(echo "$levels" | tail -1)
for type in ${types//,/ }; do
  f=$out/llama1b-$type.gguf
  declare -A pass=()
  for l in $levels; do
    pass[$l]=$(ATTNVIZ_ISA=$l median "$bin" model --model "$f" --ids "$ids" --layer 8 \
      --weights "$out/w.npy")
    echo "$type pass T=$T [$l]: ${pass[$l]} s, $(rate "$T" "${pass[$l]}") tokens/s"
  done
  echo "$type pass baseline / $best: $(ratio "${pass[baseline]}" "${pass[$best]}")x the time"
  conv=$(median "$bin" model --model "$f" --ids "$ids" --layer 8 --weights "$out/w.npy" \
    --max-memory 16G)
  echo "$type pass converted at open (--max-memory 16G): $conv s, $(rate "$T" "$conv") tokens/s;" \
    "converted / kept $(ratio "$conv" "${pass[$best]}")x"
  # Decode: the tokens/s that --verbose reports (the steps after the prompt), median of runs.
  dec=$(for _ in $(seq "$runs"); do
    "$bin" generate --model "$f" --ids "$(echo "$ids" | cut -d, -f1-16)" -n "$N" --print-ids \
      --verbose 2>&1 >/dev/null | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p'
  done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "$type decode: $dec tokens/s ($N tokens after a 16-token prompt)"
  if [ -n "${LLAMA_BENCH:-}" ]; then
    ll=$("$LLAMA_BENCH" -m "$f" -p "$T" -n "$N" -t "$threads" -o csv 2>/dev/null)
    pp=$(echo "$ll" | awk -F, -v t="$T" 'NR > 1 && $0 ~ "\"" t "\",\"0\"" {gsub(/"/, ""); print $(NF-1)}' | head -1)
    tg=$(echo "$ll" | awk -F, -v n="$N" 'NR > 1 && $0 ~ "\"0\",\"" n "\"" {gsub(/"/, ""); print $(NF-1)}' | head -1)
    echo "$type llama.cpp pp$T: $pp tokens/s; attnviz / llama.cpp: $(ratio "$(rate "$T" "${pass[$best]}")" "$pp")x"
    echo "$type llama.cpp tg$N: $tg tokens/s; attnviz / llama.cpp: $(ratio "$dec" "$tg")x"
  fi
done
