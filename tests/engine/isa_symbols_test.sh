#!/bin/bash
# The per-level kernel objects (core/CMakeLists.txt, attnviz_engine[_ggml]_isa_<level>) must define no
# global symbol that another level, or the rest of the program, could also define: the linker
# keeps one copy of a weak (inline, template) function, so a shared one compiled for AVX-512
# could run on a CPU without it. Allowed: the level's own table, its own Eigen
# (namespace attnviz_eigen_<level>), and the personality-routine pointer every C++ object with
# exceptions carries.
#   isa_symbols_test.sh NM LEVEL OBJECT [LEVEL OBJECT ...]
set -euo pipefail
nm=$1
shift
status=0
while [ $# -ge 2 ]; do
  level=$1 object=$2
  shift 2
  lower=$(echo "$level" | tr 'A-Z' 'a-z')
  bad=$("$nm" -g --defined-only --format=posix "$object" | awk '{print $1}' |
    grep -v -e "attnviz_eigen_${lower}" -e "gemmKernels${level}E\$" -e "ggmlTypes${level}E\$" \
      -e '^DW\.ref\.__gxx_personality_v0$' || true)
  if [ -n "$bad" ]; then
    echo "$object ($level) defines symbols another level could share:"
    echo "$bad" | sed 's/^/  /'
    status=1
  else
    echo "$object ($level): $("$nm" -g --defined-only "$object" | wc -l) global symbols, all its own"
  fi
done
exit $status
