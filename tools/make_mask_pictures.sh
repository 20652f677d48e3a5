#!/bin/sh
# Renders the mask gallery of docs/masks.md (docs/images/masks/*.png) with `attnviz export`, one
# picture per mask kind, from docs/images/masks/mask_scene.json (one broad head over 24 tokens in
# four documents) and, for softcap, docs/images/masks/softcap_scene.json (a sharp head with large
# logits).
# Usage: tools/make_mask_pictures.sh [path/to/attnviz]   (default build/app/attnviz)
set -eu
cd "$(dirname "$0")/.."
BIN=${1:-build/app/attnviz}
SCENE=docs/images/masks/mask_scene.json
OUT=docs/images/masks
DOCS=0,0,0,0,0,0,1,1,1,1,2,2,2,2,2,2,3,3,3,3,3,3,3,3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

shot() {  # name, title, export options...
  name=$1 title=$2
  shift 2
  "$BIN" export --scene "$SCENE" --width 420 --title "$title" --png "$OUT/$name.png" "$@" >/dev/null
}

# The custom matrix: a bool "may attend" pattern (a checkerboard of 4 x 4 tiles), as a .npy.
/usr/bin/python3 - "$TMP/custom.npy" <<'PY'
import sys, numpy as np
i, j = np.indices((24, 24))
np.save(sys.argv[1], ((i // 4 + j // 4) % 2 == 0))
PY

shot causal "causal" --mask causal
shot window "sliding window:4" --mask window:4
shot prefix "prefix-LM: prefix:6 + causal" --mask prefix:6 --mask causal
shot sink "sink:2 + window:4" --mask sink:2 --mask window:4
shot pad "pad:4 (last 4 keys)" --mask pad:4
shot custom "custom bool matrix" --mask-file "$TMP/custom.npy"
shot alibi "ALiBi + causal" --alibi --mask causal
shot chunk "chunk:8 + causal (Llama 4)" --mask chunk:8 --mask causal
shot doc "doc:<ids> + causal (packed)" --mask doc:$DOCS --mask causal
shot expr "--mask-expr '(q - k) % 2 == 0 && k <= q'" --mask-expr '(q - k) % 2 == 0 && k <= q'
SCENE=docs/images/masks/softcap_scene.json  # a sharp head: logits up to about +-70
shot softcap_off "scores, no softcap" --stage scores --mask causal
shot softcap "scores, softcap 20 (Gemma 2)" --stage scores --softcap 20 --mask causal
SCENE=docs/images/masks/mask_scene.json
shot blocks "doc + causal, 8x8 blocks" --mask doc:$DOCS --mask causal --blocks 8
