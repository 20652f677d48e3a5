// attnviz session: what a pass is asked to show and change, as the command line, scenes and the
// app write it: the request strings' grammar (attnviz/engine/request_grammar.h: SiteHead,
// parseSiteAblation, parseSiteName, the list parsers, parseResidualEdit, inScene), included here
// so that callers need one header, and their range checks against a model's sizes, which need the
// model's config. The range checks throw UsageError "WHAT VALUE: out of range, " and the sizes
// the value is out of.
#pragma once

#include "attnviz/engine/request_grammar.h"
#include "attnviz/model/model.h"

#include <string>

namespace attnviz {

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

}  // namespace attnviz
