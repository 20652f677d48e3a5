// attnviz core: the grammar of the request strings the command line, scenes and the app write
// (what a pass is asked to show and change), parsed into typed values. The one parser of these
// strings: core/formats' scene reader uses it as the command line and the GUI do (through
// attnviz/session/request.h, which adds the range checks against a model's sizes).
//
//   ablations          "L:H" (a decoder's or encoder's layer L, head H; an encoder-decoder's
//                      decoder self site), "enc:L:H" (its encoder), "cross:L:H" (its cross site)
//   sites              "enc:L", "dec:L" or "dec:L:self", "dec:L:cross" (an encoder-decoder's)
//   id lists           "464,3290,318" (--ids, --target-ids)
//   position lists     "2,5" (--mask-source: source positions no cross site reads)
//   patch lists        "3,7" (--mask-patches: an image model's patches, kept unique)
//   layer indices      "3" (--rope-off)
//   residual edits     "L:P:D:zero|mean" (P a position or "all")
//
// Every function names the option or field it reads (`what`: "--ablate", "model.ablate") in its
// error and throws UsageError, the command line's error (exit 2). A scene's reader turns them
// into InputError naming its file (inScene). Indices are only known to be >= 0 here; whether a
// model has them is the range checks' question.
#pragma once

#include "attnviz/engine/tensor.h"  // UsageError, InputError

#include <string>
#include <utility>
#include <vector>

namespace attnviz {

// One attention site of a model: its stack, its layer in that stack, and its index among the
// layer's sites (ModelConfig::sitesOf). Stack 0 is the stack whose stream makes the logits (a
// decoder's, or an encoder's when it is the whole model); stack 1 is an encoder-decoder's
// encoder. Captures, interventions, caches and attribution rows are addressed by it; a head is
// (site, h).
struct SiteId {
  int stack = 0;
  int layer = 0;
  int site = 0;
  bool operator==(const SiteId& o) const {
    return stack == o.stack && layer == o.layer && site == o.site;
  }
  bool operator!=(const SiteId& o) const { return !(*this == o); }
};

// One head of one attention site (an ablation's).
struct SiteHead {
  SiteId site;
  int head = 0;
  bool operator==(const SiteHead& o) const { return site == o.site && head == o.head; }
};

// "L:H", "enc:L:H" or "cross:L:H". Otherwise "WHAT TEXT: expected LAYER:HEAD, enc:LAYER:HEAD or
// cross:LAYER:HEAD, e.g. 3:7".
SiteHead parseSiteAblation(const std::string& text, const std::string& what = "--ablate");
// The form parseSiteAblation reads: "3:7", "enc:1:2", "cross:0:5".
std::string siteAblationText(const SiteHead& a);
// "L:H" alone (models with one site per layer: image models). Otherwise "WHAT TEXT: expected
// LAYER:HEAD, e.g. 3:7".
std::pair<int, int> parseLayerHead(const std::string& text, const std::string& what = "--ablate");
// Items of "L:H" entries separated by commas ("0:1,1:3"), each item or entry repeatable; kept
// unique in the order given. A bad entry: parseLayerHead's error naming the whole item.
std::vector<std::pair<int, int>> parseLayerHeadList(const std::vector<std::string>& items,
                                                    const std::string& what = "--ablate");
// "0:1,1:3" (the form parseLayerHeadList reads).
std::string layerHeadListText(const std::vector<std::pair<int, int>>& a);

// "enc:L", "dec:L", "dec:L:self" or "dec:L:cross". Otherwise "WHAT TEXT: expected enc:L,
// dec:L:self or dec:L:cross".
SiteId parseSiteName(const std::string& text, const std::string& what = "--site");

// "464,3290,318": token ids. Otherwise "WHAT: expected token ids separated by commas, got 'X'"
// (X the first bad item).
std::vector<int> parseIdList(const std::string& text, const std::string& what = "--ids");
// "2,5": source positions, as given. Otherwise "WHAT: expected source positions separated by
// commas, got 'X'".
std::vector<int> parsePositionList(const std::string& text,
                                   const std::string& what = "--mask-source");
// "3,7": patch indices, kept unique in the order given. Otherwise "WHAT TEXT: expected patch
// indices, e.g. 3,7".
std::vector<int> parsePatchList(const std::string& text,
                                const std::string& what = "--mask-patches");
// "3": a layer index. Otherwise "WHAT TEXT: expected a layer index (0, 1, ...)".
int parseLayerArg(const std::string& text, const std::string& what);

// One residual-stream value set inside the pass (massive activations, Sun et al. 2024): dimension
// `dim` of the stream a layer writes (its output, the next layer's input), at `position` (-1:
// every position), to zero or to that dimension's mean over the positions.
struct ResidualEdit {
  int position = -1;
  int dim = 0;
  bool toMean = false;  // false: zero
  bool operator==(const ResidualEdit& o) const {
    return position == o.position && dim == o.dim && toMean == o.toMean;
  }
};

// "L:P:D:zero|mean": dimension D of the residual stream layer L writes, at position P ("all":
// every position, -1), set to zero or to its prefix mean. Otherwise "WHAT TEXT: expected
// LAYER:POSITION:DIM:zero|mean, e.g. 1:0:447:mean", or "WHAT TEXT: layer, position and dimension
// are indices".
struct ResidualEditRequest {
  int layer = 0;
  ResidualEdit edit;
};
ResidualEditRequest parseResidualEdit(const std::string& text,
                                      const std::string& what = "--residual-edit");

// Runs `f`; its UsageError (a scene's field, parsed or checked as above) becomes an InputError
// "SCENEPATH: MESSAGE", a bad file's error.
template <class F>
auto inScene(const std::string& scenePath, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const UsageError& e) {
    throw InputError(scenePath + ": " + e.what());
  }
}

}  // namespace attnviz
