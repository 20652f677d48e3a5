// What the model's info says about it: ModelConfig::describe() for the families' block
// descriptions (layers, heads, sizes, positions and their scaling, partial rotary, the encoder
// stack), worked out by hand from each config.json; and countText, the parameter count as the
// Model panel prints it.
#include "model_test_util.h"

#include "attnviz/model/model.h"

#include <string>

namespace attnviz::testing {
namespace {

ModelConfig parse(const nlohmann::json& j) { return parseModelConfig(j.dump(), "config.json"); }

void expectHas(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "want \"" << part << "\" in: " << text;
}

// Phi-4-mini's shape: 24 query heads over 8 KV heads, head size 128, 96 of its dimensions rotate,
// LongRoPE from 4096 of 131072 positions (cos and sin x sqrt(1 + ln 32 / ln 4096) = 1.190).
TEST(Describe, PartialRotaryAndLongRope) {
  nlohmann::json j = {{"model_type", "phi3"},
                      {"num_hidden_layers", 32},
                      {"num_attention_heads", 24},
                      {"num_key_value_heads", 8},
                      {"hidden_size", 3072},
                      {"intermediate_size", 8192},
                      {"max_position_embeddings", 131072},
                      {"original_max_position_embeddings", 4096},
                      {"vocab_size", 200064},
                      {"partial_rotary_factor", 0.75},
                      {"rope_theta", 10000.0},
                      {"tie_word_embeddings", true}};
  j["rope_scaling"] = {{"type", "longrope"},
                       {"short_factor", std::vector<double>(48, 1.0)},
                       {"long_factor", std::vector<double>(48, 2.0)}};
  const std::string d = parse(j).describe();
  expectHas(d, "phi3: 32 layers, 24 query heads, 8 KV heads (GQA, 3 per group)");
  expectHas(d, "d = 3072, head size 128, MLP 8192, vocab 200064, context 131072");
  expectHas(d, "RoPE \xce\xb8 = 10000 (rotate-half) on 96 of 128 dimensions (partial rotary)");
  expectHas(d, "LongRoPE (long factors past 4096, cos/sin x 1.19)");
  expectHas(d, "gated silu MLP, tied head");
}

// T5: both stacks, relative buckets (not "learned positions"), one "bidirectional" at most.
TEST(Describe, EncoderDecoderAndRelativePositions) {
  const nlohmann::json j = {{"model_type", "t5"}, {"num_layers", 6}, {"num_decoder_layers", 4},
                            {"num_heads", 8},     {"d_model", 512},  {"d_kv", 64},
                            {"d_ff", 2048},       {"vocab_size", 32128}};
  const std::string d = parse(j).describe();
  expectHas(d, "t5: 4 layers (decoder) and 6 encoder layers, 8 query heads, 8 KV heads");
  expectHas(d, "relative position buckets (32, to distance 128)");
  EXPECT_EQ(d.find("learned positions"), std::string::npos) << d;
  const nlohmann::json bert = {{"model_type", "bert"},      {"num_hidden_layers", 2},
                               {"num_attention_heads", 2},  {"hidden_size", 32},
                               {"intermediate_size", 64},   {"max_position_embeddings", 64},
                               {"vocab_size", 100},         {"type_vocab_size", 2}};
  const std::string b = parse(bert).describe();
  expectHas(b, "learned positions, 2 token types, bidirectional");
  EXPECT_EQ(b.find("bidirectional"), b.rfind("bidirectional")) << b;  // said once
  EXPECT_EQ(b.find("post-norm"), b.rfind("post-norm")) << b;
}

// Three significant digits in powers of 1000: a 1.24 B model is not "1.24e+03 M".
TEST(Describe, ParameterCounts) {
  EXPECT_EQ(countText(0), "0");
  EXPECT_EQ(countText(950), "950");
  EXPECT_EQ(countText(12345), "12.3 k");
  EXPECT_EQ(countText(124439808), "124 M");
  EXPECT_EQ(countText(1235814400), "1.24 B");
  EXPECT_EQ(countText(999999), "1 M");  // rounded before the unit is chosen
  EXPECT_EQ(countText(1080000), "1.08 M");
  EXPECT_EQ(countText(27432406640LL), "27.4 B");
}

}  // namespace
}  // namespace attnviz::testing
