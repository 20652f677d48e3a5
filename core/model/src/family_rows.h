// What the family table's rows share (family_table.cpp) and the rows of each group of families
// (families_decoders.cpp, families_encoders.cpp, families_seq2seq.cpp), private to core/model.
#pragma once

#include "model_internal.h"

#include <initializer_list>
#include <string>
#include <vector>

namespace attnviz::family_rows {

// `when` conditions of tensor rows.
bool qkvBias(const ModelConfig& c);
bool outBias(const ModelConfig& c);
bool mlpBias(const ModelConfig& c);
bool normBias(const ModelConfig& c);
bool headDenseBias(const ModelConfig& c);
bool untied(const ModelConfig& c);
bool plainMlp(const ModelConfig& c);
bool gatedMlp(const ModelConfig& c);
// The rows of several tables, in order.
std::vector<TensorRow> join(std::initializer_list<std::vector<TensorRow>> parts);
// The block every encoder-style row shares once its sizes are read: post-norm LayerNorm, learned
// positions, biases everywhere, bidirectional, the MLP's activation (the head's too).
void encoderBlock(const std::string& path, ModelConfig& c);

std::vector<FamilyRow> decoders();
std::vector<FamilyRow> encoders();
std::vector<FamilyRow> seq2seq();

}  // namespace attnviz::family_rows
