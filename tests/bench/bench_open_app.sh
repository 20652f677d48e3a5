#!/bin/bash
# The app opening a large model: the time from the open to the first heatmap drawn, to the whole
# layers x heads grid drawn and to the full view (the pass adopted), as `attnviz --model FILE
# --text <T - 1 ASCII characters> --report-timing` reports them under Xvfb (each layer of the
# first pass is drawn as it finishes). Median of RUNS runs per file and length;
# docs/performance.md, "The app on the same files".
#
#   tests/bench/bench_open_app.sh [BUILD_DIR] FILE...
#     env: LENGTHS (512 2048), RUNS (3)
# The files: tests/bench/make_llama1b_gguf.py (a byte-level vocabulary: n ASCII characters are
# n tokens, plus the BOS).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: bench_open_app.sh BUILD_DIR FILE...}
shift
runs=${RUNS:-3}
bin=$build/app/attnviz
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for f in "$@"; do
  for T in ${LENGTHS:-512 2048}; do
    text=$(/usr/bin/python3 -c "print(('ab ' * $T)[:$T - 1], end='')")
    first=() grid=() full=() open=()
    for _ in $(seq "$runs"); do
      line=$(xvfb-run -a -s "-screen 0 1700x1100x24" "$bin" --size 1600x1000 --model "$f" \
        --text "$text" --report-timing 2>&1 | grep "^timing: open " || true)
      [ -n "$line" ] || { echo "no timing line from $f at T=$T" >&2; exit 1; }
      echo "  $line" >&2
      open+=("$(echo "$line" | sed -n 's/.*Model::open \([0-9]*\) ms.*/\1/p')")
      first+=("$(echo "$line" | sed -n 's/.*T=[0-9]*) drawn \([0-9]*\) ms.*/\1/p')")
      grid+=("$(echo "$line" | sed -n 's/.*grid drawn \([0-9]*\) ms.*/\1/p')")
      full+=("$(echo "$line" | sed -n 's/.*the full view \([0-9]*\) ms.*/\1/p')")
    done
    echo "$(basename "$f") T=$T, median of $runs: Model::open $(median "${open[@]}") ms, first heatmap" \
      "$(median "${first[@]}") ms, whole grid $(median "${grid[@]}") ms, full view $(median "${full[@]}") ms"
  done
done
