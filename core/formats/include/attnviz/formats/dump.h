// attnviz core: attention dumps, attention that another program computed (a Hugging Face model
// with output_attentions=True, nn.MultiheadAttention per-head weights,
// tools/python/attnviz_dump.py).
//
// The format (docs/dumps.md), the same names in a safetensors file or an .npz:
//   attn.<l>              [H, T_q, T_k] float32 or float16 (float64 too in .npz): layer l's
//                         weights, l = 0, 1, ... with no gaps; a 2-D [T_q, T_k] is one head
//   q.<l>, k.<l>, v.<l>   optional [H, T_q, d], [H, T_k, d], [H, T_k, d_v]
//   metadata              safetensors: __metadata__; .npz: an entry __metadata__ holding the JSON
//                         object as a string (np.array(json.dumps(meta))) or as uint8 bytes. Keys:
//     format_version      "1" (required)
//     tokens              JSON list of strings, the query tokens (required)
//     key_tokens          JSON list of strings, the other sequence (cross-attention keys, the
//                         encoder input of an encoder-decoder); required when a layer uses it
//     layer_names         JSON list of strings, one per layer (e.g. "encoder.3",
//                         "decoder.1.cross"); default "0", "1", ...
//     layer_axes          JSON list, one per layer, of "self" (tokens x tokens), "cross"
//                         (tokens x key_tokens) or "key_self" (key_tokens x key_tokens); default:
//                         inferred from the shape, in that order
//     model               the model's name (optional)
// A "self" layer may have T_q < T_k (decoding with a cache): its queries are the last T_q tokens,
// as everywhere in attnviz (p_i = i + T_k - T_q).
//
// Loading validates everything and refuses a bad dump with InputError "<file>: <problem>" naming
// the tensor: a shape inconsistent with the tokens, negative or NaN weights, a row whose sum is
// off 1 by more than 1e-3 (a row of zeros is a fully masked row and is allowed), missing or
// malformed metadata, an .npz entry whose declared size does not match its header (a zip bomb)
// or whose data is cut short.
#pragma once

#include "attnviz/engine/engine.h"
#include "attnviz/engine/mask.h"
#include "attnviz/engine/tensor.h"

#include <string>
#include <vector>

namespace attnviz {

enum class DumpAxes { Self, Cross, KeySelf };
const char* dumpAxesName(DumpAxes a);  // "self", "cross", "key_self"

struct DumpLayer {
  std::string name;  // from layer_names, or the index
  DumpAxes axes = DumpAxes::Self;
  Tensor3 weights;  // [H, T_q, T_k]; rows sum to 1 or are all 0 (fully masked)
  Tensor3 q, k, v;  // empty when the dump has none: [H,T_q,d], [H,T_k,d], [H,T_k,d_v]
  std::vector<std::string> queryTokens;  // T_q labels
  std::vector<std::string> keyTokens;    // T_k labels

  bool hasQkv() const { return !q.empty() && !k.empty() && !v.empty(); }
  bool isCross() const { return axes == DumpAxes::Cross; }
};

struct Dump {
  int formatVersion = 1;
  std::string model;                   // may be empty
  std::vector<std::string> tokens;     // metadata "tokens"
  std::vector<std::string> keyTokens;  // metadata "key_tokens" (may be empty)
  std::vector<DumpLayer> layers;       // attn.0, attn.1, ...
};

inline constexpr int kDumpFormatVersion = 1;
inline constexpr double kDumpRowSumTolerance = 1e-3;

// Opens a dump by its content: a zip (.npz) or a safetensors file. Throws InputError.
Dump loadDump(const std::string& path);

// The same from bytes in memory (`name` stands for the file in messages); for tests and fuzzing.
Dump parseDumpSafetensors(std::string bytes, const std::string& name);
Dump parseDumpNpz(const std::string& bytes, const std::string& name);

// Whether a path looks like a dump by its extension (.safetensors, .npz), for the app's dispatch.
bool isDumpPath(const std::string& path);

// Writes a dump as safetensors (float32), atomically. Metadata as described above.
void saveDump(const std::string& path, const Dump& dump);

// A dump layer's weights under temperature, masks and bias, computed exactly from the weights
// alone: with A = softmax(S) and any L = (S + b) / tau with -inf where masked,
//   softmax(L)_ij = A_ij^(1/tau) * exp(b_ij / tau) / sum over allowed keys,
// evaluated in log space, (log A_ij + b_ij) / tau (row max subtracted first) with -inf where
// masked, so tiny temperatures stay finite. A weight that is exactly 0 counts as masked. The
// masks follow the engine's rule (mask.h) with p_i = i + T_k - T_q. Throws InputError for
// parameters that do not fit the shape (validateParams). With tau = 1 and no mask or bias the
// weights come back exactly as given (not re-normalised).

// log A for [H, T_q, T_k] weights, -inf where A is 0: compute it once per layer and keep it.
Tensor3 logWeights(const Tensor3& weights);

// Fills out.weights and out.rows (row sums, argmax, entropy, fully masked flags) for the listed
// heads (empty = all), from the weights and their cached logWeights; `out` is resized when its
// shape differs (then heads not listed are zeros). This is the GUI's slider path: no log, one
// pass per row, heads in parallel.
void renormalizeFromLog(const Tensor3& weights, const Tensor3& logA, const AttentionParams& params,
                        AttentionResult& out, const std::vector<int>& heads = {});

// Both steps for every head (or the listed ones); `scaled` holds log A.
AttentionResult renormalizeWeights(const Tensor3& weights, const AttentionParams& params,
                                   const std::vector<int>& heads = {});

}  // namespace attnviz
