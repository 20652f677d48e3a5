#!/bin/bash
# The 1B-scale figures of docs/performance.md, "Large models": a Llama-3.2-1B-shaped random GGUF per
# type (make_llama1b_gguf.py), and for each
#   - the prompt pass: `attnviz model --ids <T ids> --layer 8 --weights` (one layer's attention
#     kept), median wall time of RUNS runs, as tokens/s, at every CPU-kernel level this machine
#     runs (ATTNVIZ_ISA), with --fast-activations (8-bit x) at the best level, and with the default
#     memory budget against --max-memory 16G (every weight converted to float32 at open, the old
#     default);
#   - decode: `attnviz generate -n N --verbose` after a 16-token prompt, its tokens/s, at every
#     level, and with --fast-activations (8-bit x) at the best level;
#   - the head finder: `attnviz heads` over the first HEADS_SEQ (4) chapters of
#     assets/corpora/kjv-heldout.txt cut at T ids (the metrics and the sampling on top of one pass
#     a sequence; open, tokenize and the tree included), median wall time of RUNS runs, as corpus
#     tokens/s, beside the pass's tokens/s and llama.cpp's pp<T> (and again with
#     --fast-activations);
#   - with LLAMA_BENCH=/path/to/llama-bench (llama.cpp, built outside the project as a peer, never
#     a dependency): its pp<T> and tg<N> on the same file with the same threads, and the ratios.
# Type Q4_K_M is llama.cpp's own mix (Q4_K, with Q6_K for the output and half the attn_v and
# ffn_down matrices): it is made from the F16 file by LLAMA_QUANTIZE=/path/to/llama-quantize.
# Ratios are printed beside the figures: baseline / best level (the portable package on an old
# CPU against this one), converted / kept, attnviz / llama.cpp.
#
#   tests/bench/bench_large.sh [BUILD_DIR] [OUT_DIR]
# With NATIVE=/path/to/a -march=native build dir, its pass beside BUILD_DIR's: portable / native.
#   env: TYPES (F16,Q8_0), T (512), N (64), RUNS (3), HEADS_SEQ (4), THREADS (all cores), LLAMA_BENCH,
#        LLAMA_QUANTIZE, NATIVE
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-/tmp/attnviz-large}
types=${TYPES:-F16,Q8_0}
T=${T:-512}
N=${N:-64}
runs=${RUNS:-3}
heads_seq=${HEADS_SEQ:-4}
threads=${THREADS:-$(nproc)}
bin=$build/app/attnviz
mkdir -p "$out"
made=$(echo "$types" | tr , '\n' | { grep -vx Q4_K_M || true; } | paste -sd, -)
case ",$types," in *,Q4_K_M,*) made=$(echo "$made,F16" | sed 's/^,//') ;; esac
/usr/bin/python3 tests/bench/make_llama1b_gguf.py "$out" --types "$made" >&2
if [[ ",$types," == *,Q4_K_M,* && ! -f $out/llama1b-Q4_K_M.gguf ]]; then
  [ -n "${LLAMA_QUANTIZE:-}" ] || { echo "Q4_K_M needs LLAMA_QUANTIZE=/path/to/llama-quantize" >&2; exit 2; }
  "$LLAMA_QUANTIZE" "$out/llama1b-F16.gguf" "$out/llama1b-Q4_K_M.gguf.part" Q4_K_M >/dev/null 2>&1
  mv "$out/llama1b-Q4_K_M.gguf.part" "$out/llama1b-Q4_K_M.gguf"
fi
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

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
flags=$(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -e avx512_vnni -e avx_vnni | tr '\n' ' ' || true)
echo "CPU: ${cpu:-unknown} (${flags:-no VNNI}); attnviz $("$bin" --version | tail -1); $(nproc) cores;" \
  "T=$T, decode $N tokens, median of $runs"
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
  if [ -n "${NATIVE:-}" ]; then
    nat=$(median "$NATIVE/app/attnviz" model --model "$f" --ids "$ids" --layer 8 --weights "$out/w.npy")
    echo "$type pass of the native build: $nat s; this build / native: $(ratio "${pass[$best]}" "$nat")x the time"
  fi
  # The same pass on the fast path (x rounded to 8 bits per 256 values in the K-quants' products),
  # at the best level.
  passfast=$(ATTNVIZ_ISA=$best median "$bin" model --model "$f" --ids "$ids" --layer 8 \
    --weights "$out/w.npy" --fast-activations)
  echo "$type pass T=$T --fast-activations [$best]: $passfast s, $(rate "$T" "$passfast") tokens/s;" \
    "exact / fast $(ratio "${pass[$best]}" "$passfast")x the time"
  conv=$(median "$bin" model --model "$f" --ids "$ids" --layer 8 --weights "$out/w.npy" \
    --max-memory 16G)
  echo "$type pass converted at open (--max-memory 16G): $conv s, $(rate "$T" "$conv") tokens/s;" \
    "converted / kept $(ratio "$conv" "${pass[$best]}")x"
  # The head finder over the corpus: tokens/s from the ids it counted (pipeline_config.tokens).
  hf=$(median "$bin" heads --model "$f" --corpus assets/corpora/kjv-heldout.txt --seq-len "$T" \
    --sequences "$heads_seq" --out "$out/heads")
  hf_tokens=$(/usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['pipeline_config']['tokens'])" \
    "$out/heads/config.json")
  hf_rate=$(rate "$hf_tokens" "$hf")
  echo "$type head finder, $heads_seq sequences ($hf_tokens ids, T <= $T): $hf s, $hf_rate tokens/s;" \
    "pass / finder: $(ratio "$(rate "$T" "${pass[$best]}")" "$hf_rate")x the tokens/s"
  hff=$(median "$bin" heads --model "$f" --corpus assets/corpora/kjv-heldout.txt --seq-len "$T" \
    --sequences "$heads_seq" --out "$out/heads" --fast-activations)
  hff_rate=$(rate "$hf_tokens" "$hff")
  echo "$type head finder --fast-activations: $hff s, $hff_rate tokens/s"
  # Decode: the tokens/s that --verbose reports (the steps after the prompt), median of runs, at
  # each level (the AVX2 level is what laptops without AVX-512 run).
  declare -A dec=()
  for l in $levels; do
    dec[$l]=$(for _ in $(seq "$runs"); do
      ATTNVIZ_ISA=$l "$bin" generate --model "$f" --ids "$(echo "$ids" | cut -d, -f1-16)" -n "$N" \
        --print-ids --verbose 2>&1 >/dev/null | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p'
    done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "$type decode [$l]: ${dec[$l]} tokens/s ($N tokens after a 16-token prompt)"
  done
  # The same through the fast path (x rounded to 8 bits per block: Q8_0 and the K-quants), at
  # the best level.
  fast=$(for _ in $(seq "$runs"); do
    ATTNVIZ_ISA=$best "$bin" generate --model "$f" --ids "$(echo "$ids" | cut -d, -f1-16)" -n "$N" \
      --print-ids --verbose --fast-activations 2>&1 >/dev/null | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p'
  done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "$type decode --fast-activations [$best]: $fast tokens/s"
  if [ -n "${LLAMA_BENCH:-}" ]; then
    ll=$("$LLAMA_BENCH" -m "$f" -p "$T" -n "$N" -t "$threads" -o csv 2>/dev/null)
    # Columns by name: n_prompt, n_gen and avg_ts (tokens/s) in llama-bench's CSV header.
    col() { echo "$ll" | awk -F, -v p="$1" -v g="$2" 'NR == 1 {for (i = 1; i <= NF; i++) c[$i] = i; next}
      {gsub(/"/, "")} $c["n_prompt"] == p && $c["n_gen"] == g {print $c["avg_ts"]; exit}'; }
    pp=$(col "$T" 0)
    tg=$(col 0 "$N")
    echo "$type llama.cpp pp$T: $pp tokens/s; attnviz / llama.cpp: $(ratio "$(rate "$T" "${pass[$best]}")" "$pp")x," \
      "with --fast-activations $(ratio "$(rate "$T" "$passfast")" "$pp")x"
    echo "$type head finder / llama.cpp pp$T: $(ratio "$hf_rate" "$pp")x the tokens/s," \
      "with --fast-activations $(ratio "$hff_rate" "$pp")x"
    echo "$type llama.cpp tg$N: $tg tokens/s; attnviz / llama.cpp: $(ratio "${dec[$best]}" "$tg")x," \
      "with --fast-activations $(ratio "$fast" "$tg")x"
  fi
done
