// attnviz session: what a pass is asked to show and change, as the command line, scenes and the
// app write it: the one parser of these strings into typed values, and their range checks
// against a model's sizes.
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
// into InputError naming its file (inScene). The range checks say "WHAT VALUE: out of range, "
// and the sizes the value is out of.
#pragma once

#include "attnviz/model/model.h"

#include <string>
#include <utility>
#include <vector>

namespace attnviz {

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

// ---- range checks against the model's sizes (UsageError, "WHAT VALUE: out of range, ...") ----

// 0 <= layer < the layers: "... out of range, the model has L layers (0..L-1)".
void checkLayerInRange(int layer, const ModelConfig& c, const std::string& what = "--layer");
// 0 <= head < the heads: "... out of range, the model has H heads (0..H-1)".
void checkHeadInRange(int head, const ModelConfig& c, const std::string& what = "--head");
// The model has the ablation's site and head: "... out of range, the model has L layers and H
// heads" (an encoder-decoder: "the encoder has ..." or "the decoder has ..."); an enc: or cross:
// ablation on a model with one site per layer: "WHAT TEXT: FAMILY has one attention site per
// layer (use L:H)".
void checkSiteAblation(const SiteHead& a, const ModelConfig& c,
                       const std::string& what = "--ablate");
// The model is an encoder-decoder with the site: "WHAT: FAMILY is not an encoder-decoder (no
// sites to choose)", or "... out of range, the encoder has E layers and the decoder D".
void checkSiteInRange(const SiteId& s, const ModelConfig& c, const std::string& what = "--site");
// An encoder-decoder (a source to hide): "WHAT: FAMILY is not an encoder-decoder (no cross
// sites)".
void checkHasCrossSites(const ModelConfig& c, const std::string& what = "--mask-source");
// RoPE off in layer L: "... out of range, the model has L layers", or "WHAT L: the model has no
// RoPE (its positions are learned)".
void checkRopeOffLayer(int layer, const ModelConfig& c, const std::string& what = "--rope-off");
// "... out of range, the model has L layers of width D".
void checkResidualEdit(const ResidualEditRequest& e, const ModelConfig& c,
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
