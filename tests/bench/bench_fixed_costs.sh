#!/bin/bash
# `attnviz model` end to end on a GPT-2-small-shaped folder (open, the pass, every layer's weights
# and every position's logits written) against torch's float32 forward of the same shape in
# process (tests/bench/torch_gpt2_pass.py: the pass alone, after a warm-up, no open and no
# writes), alternating so that both see the same load; docs/performance.md, "Real models".
#
#   tests/bench/bench_fixed_costs.sh GPT2_FOLDER [BUILD_DIR]
#     env: RUNS (5), T (128), TORCH_THREADS (1 2: torch's thread counts, each a separate floor)
#
# Prints each round's figures, then the medians and attnviz / torch for each thread count, and
# one `/usr/bin/time` line of attnviz (user and system time, page faults, peak memory).
# A GPT-2-small-shaped folder: /usr/bin/python3 tests/model/make_gpt2_fixtures.py --gpt2-small DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
folder=${1:?usage: bench_fixed_costs.sh GPT2_FOLDER [BUILD_DIR]}
build=${2:-build}
runs=${RUNS:-5}
T=${T:-128}
threads=${TORCH_THREADS:-1 2}
bin=$build/app/attnviz
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ids=$(/usr/bin/python3 -c "print(','.join(str(t * 7919 % 50257) for t in range($T)))")
run_attnviz() {
  "$bin" model --model "$folder" --ids "$ids" --weights "$out/w.npy" --logits "$out/l.npy"
}
declare -A torch_ms=()
attnviz_ms=()
for round in $(seq "$runs"); do
  t0=$(date +%s%N)
  run_attnviz
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  attnviz_ms+=("$ms")
  line="round $round: attnviz model end to end $ms ms"
  for th in $threads; do
    tm=$(/usr/bin/python3 tests/bench/torch_gpt2_pass.py "$T" --threads "$th" | sed -n 's/.*median \([0-9]*\) ms/\1/p')
    torch_ms[$th]="${torch_ms[$th]:-} $tm"
    line="$line; torch, $th thread(s), in process: $tm ms"
  done
  echo "$line"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
am=$(median "${attnviz_ms[@]}")
echo "median of $runs: attnviz model end to end $am ms"
for th in $threads; do
  # shellcheck disable=SC2086
  tm=$(median ${torch_ms[$th]})
  echo "median of $runs: torch $th thread(s) $tm ms; attnviz / torch: $(awk -v a="$am" -v b="$tm" 'BEGIN {printf "%.2f", a / b}')x"
done
/usr/bin/time -f "attnviz model: wall %e s, user %U s, system %S s, minor faults %R, major %F, peak %M KB" \
  "$bin" model --model "$folder" --ids "$ids" --weights "$out/w.npy" --logits "$out/l.npy"
