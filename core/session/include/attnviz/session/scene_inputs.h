// attnviz session: the inputs a scene gives the engine. A scene's text becomes tokens, token
// vectors and per-head Q, K, V through W_q, W_k, W_v shaped by each head's archetype (synthetic,
// deterministic in the scene), or its .npy tensors take their place. The JSON format of scenes is
// core/formats' (attnviz/formats/scene.h).
#pragma once

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/scene.h"

#include <string>
#include <vector>

namespace attnviz {

// The full synthetic multi-head attention block for a scene:
//   X [T, dModel] -> per head Q = X_q W_q, K = X_k W_k, V = X_k W_v -> attention -> concat -> W_o.
struct SceneInputs {
  std::vector<std::string> queryTokens;  // T_q labels
  std::vector<std::string> keyTokens;    // T_k labels
  Tensor3 xq;                            // [1, T_q, dModel]
  Tensor3 xk;                            // [1, T_k, dModel]
  Tensor3 q;                             // [H, T_q, d_k]
  Tensor3 k;                             // [H, T_k, d_k]
  Tensor3 v;                             // [H, T_k, d_v]
  Tensor3 wo;                            // [1, H*d_v, dModel]
};

// Builds tokens and Q, K, V (synthetic, or from the scene's .npy paths). Deterministic in the
// scene's text, seed and sizes. Throws InputError.
SceneInputs buildSceneInputs(const Scene& s);

// The block output concat_h(O_h) W_o: [1, T_q, dModel].
Tensor3 blockOutput(const Tensor3& perHeadOutput, const Tensor3& wo);

}  // namespace attnviz
