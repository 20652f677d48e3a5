// Cross attention read as an alignment (attnviz/session/alignment.h): the Pharaoh
// parser, the shift by one, argmax and threshold links, word grouping and the AER, on values
// worked by hand; then the shipped kjv-t5-align's card figures (card.json: every cross head's
// AER, shifted and unshifted, over the card's 100 held-out clauses) reproduced in process.
#include "attnviz/model/tokenizers/tokenizer.h"
#include "attnviz/session/alignment.h"
#include "attnviz/session/seq2seq_source.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace attnviz {
namespace {

Tensor3 weights(int heads, int rows, int cols, const std::vector<float>& v) {
  Tensor3 w(heads, rows, cols);
  for (std::size_t k = 0; k < v.size(); ++k) w.data[k] = v[k];
  return w;
}

AlignUnits pieces(int n) {
  AlignUnits u;
  for (int k = 0; k < n; ++k) u.unitOf.push_back(k), u.labels.push_back(std::to_string(k));
  return u;
}

// A vocabulary of a few pieces: id 0 is a control token (</s>), the others plain pieces
// (a leading space starts a word).
class FakeTokenizer : public Tokenizer {
 public:
  std::vector<std::string> pieces{"</s>", " the", " ca", "t", " xy", " ab", "c"};
  std::vector<int> encode(std::string_view, bool) const override { return {}; }
  std::string pieceBytes(int id) const override { return pieces.at(std::size_t(id)); }
  int size() const override { return int(pieces.size()); }
  bool isSpecial(int id) const override { return id == 0; }
  std::string kind() const override { return "fake"; }
};

TEST(Alignment, PharaohPairsParseSortedWithoutRepeats) {
  const Alignment a = parsePharaoh("  0-2 1-1\t2-0\n1-1 ", 3, 3);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], (AlignLink{0, 2}));
  EXPECT_EQ(a[1], (AlignLink{1, 1}));
  EXPECT_EQ(a[2], (AlignLink{2, 0}));
  EXPECT_EQ(pharaohText(a), "0-2 1-1 2-0");
  EXPECT_TRUE(parsePharaoh("").empty());
  EXPECT_TRUE(parsePharaoh("   ").empty());
}

TEST(Alignment, BadPharaohTextIsOneLineNamingThePair) {
  for (const std::string bad : {"x-1", "0_2", "1-", "-1", "0-1-2", "0?1", "1-+2", "3"}) {
    try {
      parsePharaoh("0-0 " + bad + " 1-1", 5, 5);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'" + bad + "'"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      EXPECT_EQ(m.rfind("gold alignment: ", 0), 0u) << m;
    }
  }
  try {
    parsePharaoh("0-0 5-1", 3, 4);
    ADD_FAILURE() << "a source index past the strip was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'5-1': source index 5 is past the 3 source units"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parsePharaoh("0-4", 3, 4), InputError);
  EXPECT_NO_THROW(parsePharaoh("2-3", 3, 4));
  EXPECT_NO_THROW(parsePharaoh("99-99"));  // no strips given: no range check
}

// Three produced target tokens (rows: the start row + 3), three source tokens, two heads.
// Head 0's rows 0-2 point at 2, 1, 0 (the gold anti-diagonal) and row 3 at 2; head 1 is uniform.
const std::vector<float> kHead0 = {0.1f, 0.2f, 0.7f,  //
                                   0.2f, 0.6f, 0.2f,  //
                                   0.5f, 0.3f, 0.2f,  //
                                   0.3f, 0.3f, 0.4f};

AlignmentStrips pieceStrips() { return AlignmentStrips{pieces(3), pieces(3)}; }

Tensor3 twoHeads() {
  std::vector<float> v = kHead0;
  for (int k = 0; k < 12; ++k) v.push_back(1.0f / 3.0f);
  return weights(2, 4, 3, v);
}

TEST(Alignment, TheShiftReadsProducedTokenTOnRowTAndOffOnRowTPlusOne) {
  const Tensor3 w = twoHeads();
  const Alignment gold = parsePharaoh("0-2 1-1 2-0");
  AlignOptions o;
  const Eigen::MatrixXd on = unitWeights(w, 0, pieceStrips(), true);
  EXPECT_DOUBLE_EQ(on(0, 2), double(0.7f));  // token 0 on row 0
  EXPECT_DOUBLE_EQ(on(2, 0), double(0.5f));  // token 2 on row 2
  const Alignment shifted = predictAlignment(on, o);
  EXPECT_EQ(pharaohText(shifted), "0-2 1-1 2-0");
  EXPECT_DOUBLE_EQ(alignmentErrorRate(shifted, gold), 0.0);

  const Eigen::MatrixXd off = unitWeights(w, 0, pieceStrips(), false);
  EXPECT_DOUBLE_EQ(off(0, 1), double(0.6f));  // token 0 on row 1
  EXPECT_DOUBLE_EQ(off(2, 2), double(0.4f));  // token 2 on row 3
  const Alignment late = predictAlignment(off, o);
  EXPECT_EQ(pharaohText(late), "0-1 1-0 2-2");  // every link one late: none gold
  EXPECT_DOUBLE_EQ(alignmentErrorRate(late, gold), 1.0);
}

TEST(Alignment, AerCountsSureLinksOnlyAndPools) {
  const Alignment pred = parsePharaoh("0-2 1-1 2-0");
  const Alignment gold = parsePharaoh("0-2 1-0");
  const AerCounts c = aerCounts(pred, gold);
  EXPECT_EQ(c.both, 1);
  EXPECT_EQ(c.predicted, 3);
  EXPECT_EQ(c.gold, 2);
  EXPECT_DOUBLE_EQ(c.aer(), 1.0 - 2.0 / 5.0);  // 0.6
  AerCounts pooled = c;
  pooled += aerCounts(gold, gold);  // 2 of 2 more
  EXPECT_DOUBLE_EQ(pooled.aer(), 1.0 - 2.0 * 3 / 9);
  EXPECT_DOUBLE_EQ(aerCounts({}, {}).aer(), 0.0);
  EXPECT_DOUBLE_EQ(aerCounts(pred, {}).aer(), 1.0);
}

TEST(Alignment, ThresholdKeepsEveryPairAtOrAboveIt) {
  const Eigen::MatrixXd on = unitWeights(twoHeads(), 0, pieceStrips(), true);
  AlignOptions o;
  o.rule = AlignRule::Threshold;
  o.threshold = 0.5f;  // 0.7, 0.6, 0.5 (at the threshold) and nothing else
  EXPECT_EQ(pharaohText(predictAlignment(on, o)), "0-2 1-1 2-0");
  o.threshold = 0.55f;
  const Alignment two = predictAlignment(on, o);
  EXPECT_EQ(pharaohText(two), "1-1 2-0");
  EXPECT_DOUBLE_EQ(alignmentErrorRate(two, parsePharaoh("0-2 1-1 2-0")), 1.0 - 4.0 / 5.0);
  o.threshold = 0.15f;  // row 0: 0.2 and 0.7; row 1: all three; row 2: all three
  EXPECT_EQ(predictAlignment(on, o).size(), 8u);
}

TEST(Alignment, TheMeanOverHeadsAveragesTheWeights) {
  const Eigen::MatrixXd mean = unitWeights(twoHeads(), -1, pieceStrips(), true);
  EXPECT_NEAR(mean(0, 2), (0.7 + 1.0 / 3.0) / 2, 1e-7);
  EXPECT_NEAR(mean(1, 0), (0.2 + 1.0 / 3.0) / 2, 1e-7);
  EXPECT_EQ(pharaohText(predictAlignment(mean, AlignOptions{})), "0-2 1-1 2-0");
  const Eigen::MatrixXd h1 = unitWeights(twoHeads(), 1, pieceStrips(), true);
  // A uniform row: the first of the tied source tokens.
  EXPECT_EQ(pharaohText(predictAlignment(h1, AlignOptions{})), "0-0 0-1 0-2");
  // A row of exact zeros (all its weight on a special token) links to unit 0, as numpy's argmax.
  Eigen::MatrixXd zero = Eigen::MatrixXd::Zero(2, 3);
  zero(1, 2) = 0.5;
  EXPECT_EQ(pharaohText(predictAlignment(zero, AlignOptions{})), "0-0 2-1");
  EXPECT_THROW(unitWeights(twoHeads(), 2, pieceStrips(), true), InputError);
  EXPECT_THROW(unitWeights(weights(1, 3, 3, {}), 0, pieceStrips(), true), InputError);
}

// Words: source "the cat </s>" is pieces [ the][ ca][t][</s>] -> words the, cat (</s> none);
// target pieces [ xy][ ab][c] -> words xy, abc. A source word sums its columns, a target word
// averages its rows.
TEST(Alignment, WordsSumSourcePiecesAndAverageTargetRows) {
  FakeTokenizer tok;
  AlignmentStrips s{alignUnits(tok, {1, 2, 3, 0}, true), alignUnits(tok, {4, 5, 6}, true)};
  EXPECT_EQ(s.source.unitOf, (std::vector<int>{0, 1, 1, -1}));
  EXPECT_EQ(s.source.labels, (std::vector<std::string>{"the", "cat"}));
  EXPECT_EQ(s.target.unitOf, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(s.target.labels, (std::vector<std::string>{"xy", "abc"}));
  const AlignUnits p = alignUnits(tok, {1, 2, 3, 0}, false);
  EXPECT_EQ(p.unitOf, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.count(), 4);

  const Tensor3 w = weights(1, 4, 4,
                            {0.1f, 0.2f, 0.3f, 0.4f,  //
                             0.6f, 0.1f, 0.1f, 0.2f,  //
                             0.1f, 0.4f, 0.3f, 0.2f,  //
                             0.0f, 0.0f, 0.1f, 0.9f});
  const Eigen::MatrixXd on = unitWeights(w, 0, s, true);
  ASSERT_EQ(on.rows(), 2);
  ASSERT_EQ(on.cols(), 2);
  EXPECT_NEAR(on(0, 0), 0.1, 1e-7);
  EXPECT_NEAR(on(0, 1), 0.5, 1e-7);                 // 0.2 + 0.3
  EXPECT_NEAR(on(1, 0), (0.6 + 0.1) / 2, 1e-7);     // rows 1 and 2
  EXPECT_NEAR(on(1, 1), (0.2 + 0.7) / 2, 1e-7);
  const Alignment gold = parsePharaoh("1-0 0-1", 2, 2);
  const Alignment a = predictAlignment(on, AlignOptions{});
  EXPECT_EQ(pharaohText(a), "1-0 1-1");
  EXPECT_DOUBLE_EQ(alignmentErrorRate(a, gold), 0.5);
  const Alignment late = predictAlignment(unitWeights(w, 0, s, false), AlignOptions{});
  EXPECT_EQ(pharaohText(late), "0-0 1-1");  // word 0 on row 1, word 1 on rows 2 and 3
  EXPECT_DOUBLE_EQ(alignmentErrorRate(late, gold), 1.0);
}

// The AER map: one map layer per cross site of the dump, the best head the lowest.
TEST(Alignment, TheMapHasAHeadPerCellAndOutlinesTheLowest) {
  Dump d;
  DumpLayer self;
  self.weights = weights(2, 4, 4, std::vector<float>(32, 0.25f));
  d.layers.push_back(self);
  DumpLayer cross;
  cross.axes = DumpAxes::Cross;
  cross.weights = twoHeads();
  d.layers.push_back(cross);
  std::vector<float> swapped(12, 1.0f / 3.0f);
  swapped.insert(swapped.end(), kHead0.begin(), kHead0.end());
  cross.weights = weights(2, 4, 3, swapped);
  d.layers.push_back(self);
  d.layers.push_back(cross);
  const AerMap m = aerMap(d, pieceStrips(), parsePharaoh("0-2 1-1 2-0"), AlignOptions{});
  EXPECT_EQ(m.layers, 2);
  EXPECT_EQ(m.heads, 2);
  EXPECT_EQ(m.sites, (std::vector<int>{1, 3}));
  EXPECT_DOUBLE_EQ(m.aer(0, 0), 0.0);
  EXPECT_DOUBLE_EQ(m.aer(0, 1), 1.0 - 2.0 / 6.0);  // 0-0 0-1 0-2 against the gold: 0-2 only
  EXPECT_DOUBLE_EQ(m.aer(1, 1), 0.0);
  EXPECT_EQ(m.bestLayer, 0);  // the first of the two zeros
  EXPECT_EQ(m.bestHead, 0);
}

// The shipped model's card (tools/train/t5_card.py) in process: every clause of card.json run
// through Seq2SeqSource, its words' gold links (target word i <-> source word n-1-i), the counts
// pooled over the clauses. Every cell of both tables within 0.005 of the card, and the best head
// of the shifted reading layer 1 head 0 at 0.057.
TEST(AlignmentShippedT5, TheCardsAerTablesReproduce) {
  const std::string dir = ATTNVIZ_SHIPPED_T5;
  std::ifstream f(dir + "/card.json");
  ASSERT_TRUE(f) << dir;
  const nlohmann::json card = nlohmann::json::parse(f);
  Seq2SeqSource q(Model::open(dir));
  AerMap on, off;
  AlignOptions shifted, unshifted;
  unshifted.shift = false;
  const std::vector<std::string> src = card["clauses"], tgt = card["targets"];
  ASSERT_EQ(src.size(), 100u);
  for (std::size_t c = 0; c < src.size(); ++c) {
    q.setTexts(src[c], tgt[c]);
    const AlignmentStrips s = alignmentStrips(q, true);
    const int n = s.source.count();
    ASSERT_EQ(s.target.count(), n) << src[c];
    std::string gold;
    for (int i = 0; i < n; ++i) gold += std::to_string(n - 1 - i) + "-" + std::to_string(i) + " ";
    const Alignment g = parsePharaoh(gold, n, n);
    const Dump d = q.dump();
    on += aerMap(d, s, g, shifted);
    off += aerMap(d, s, g, unshifted);
  }
  ASSERT_EQ(on.layers, 2);
  ASSERT_EQ(on.heads, 4);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 4; ++h) {
      EXPECT_NEAR(on.aer(l, h), card["aer_shifted"][l][h].get<double>(), 0.005) << l << ":" << h;
      EXPECT_NEAR(off.aer(l, h), card["aer_unshifted"][l][h].get<double>(), 0.005)
          << l << ":" << h;
    }
  EXPECT_EQ(on.bestLayer, 1);
  EXPECT_EQ(on.bestHead, 0);
  EXPECT_NEAR(on.aer(1, 0), 0.057, 0.005);
  EXPECT_GE(off.aer(off.bestLayer, off.bestHead), 0.76);
  EXPECT_EQ(on.counts[4].gold, card["links"].get<long long>());
  std::printf("kjv-t5-align over %zu clauses: best shifted %d:%d AER %.4f, best unshifted %d:%d "
              "AER %.4f\n",
              src.size(), on.bestLayer, on.bestHead, on.aer(on.bestLayer, on.bestHead),
              off.bestLayer, off.bestHead, off.aer(off.bestLayer, off.bestHead));
}

}  // namespace
}  // namespace attnviz
