#!/bin/sh
# The soak driver under Xvfb: attnviz --soak SECONDS --seed 1.
#   soak_test.sh ATTNVIZ XVFB_RUN SECONDS            passes when the soak does (exit 0, "soak: PASS")
#   soak_test.sh ATTNVIZ XVFB_RUN SECONDS inject     with ATTNVIZ_SOAK_INJECT=texture,fd,memory the
#                                                    soak must fail and name all three leaks
set -u
bin=$1 xvfb=$2 seconds=$3 mode=${4:-}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {
  for attempt in 1 2 3; do
    "$xvfb" -a -s "-screen 0 1600x1000x24" "$bin" --soak "$seconds" --seed 1 >"$out" 2>&1
    rc=$?
    # xvfb-run -a can race with another test starting a server at the same moment.
    grep -q "xvfb-run: error" "$out" || return 0
    sleep 1
  done
}
if [ -z "$mode" ]; then
  run
  cat "$out"
  [ "$rc" -eq 0 ] && grep -q "^soak: PASS" "$out" || { echo "soak_test: the soak failed (exit $rc)"; exit 1; }
else
  export ATTNVIZ_SOAK_INJECT=texture,fd,memory
  run
  cat "$out"
  [ "$rc" -eq 1 ] || { echo "soak_test: expected exit 1 with leaks injected, got $rc"; exit 1; }
  expected="file descriptors grew|GL textures grew"
  # Under AddressSanitizer the soak does not check the RSS slope (it says so).
  grep -q "^soak: RSS slope not checked" "$out" || expected="RSS slope|$expected"
  IFS='|'
  for what in $expected; do
    grep "^soak: FAIL" "$out" | grep -q "$what" || { echo "soak_test: the summary misses '$what'"; exit 1; }
  done
fi
exit 0
