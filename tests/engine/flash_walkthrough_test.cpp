// The FlashAttention walkthrough: per-row running statistics at every step against sums over the
// keys seen so far (double), skipped tiles against the mask rule, and the final output against
// the double reference, at block sizes that do and do not divide T.
#include "attnviz/render/flash_figure.h"
#include "attnviz/engine/flash_walkthrough.h"
#include "reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace attnviz {
namespace {

struct Inputs {
  Tensor3 q, k, v;
};

Inputs make(int H, int Tq, int Tk, int d, std::uint32_t seed) {
  return {ref::randomTensor(H, Tq, d, seed), ref::randomTensor(H, Tk, d, seed + 1),
          ref::randomTensor(H, Tk, d + 3, seed + 2)};
}

AttentionParams causal(float tau = 1.0f) {
  AttentionParams p;
  p.mask.causal = true;
  p.temperature = tau;
  return p;
}

TEST(FlashWalkthrough, EveryStepKeepsTheRunningMaxSumAndRescaleOfTheKeysSeenSoFar) {
  const Inputs in = make(2, 19, 23, 8, 5);
  AttentionParams p = causal(0.7f);
  p.mask.alibi = true;
  const int head = 1;
  const ref::Result want = ref::attention(in.q, in.k, in.v, p);
  for (auto [br, bc] : {std::pair{4, 4}, {5, 7}, {19, 23}, {1, 3}}) {
    SCOPED_TRACE("blocks " + std::to_string(br) + " x " + std::to_string(bc));
    FlashWalkthrough fw(in.q, in.k, in.v, head, p, br, bc);
    while (fw.forward()) {
      const FlashWalkthrough::Tile t = fw.current();
      ASSERT_EQ(int(fw.rows().size()), t.i1 - t.i0);
      for (int i = t.i0; i < t.i1; ++i) {
        const FlashWalkthrough::Row& row = fw.rows()[i - t.i0];
        // Reference: the logits of keys [0, j1) and [0, j0).
        double m = -ref::kInf, mOld = -ref::kInf;
        for (int j = 0; j < t.j1; ++j) {
          m = std::max(m, want.l(head, i, j));
          if (j < t.j0) mOld = m;
        }
        double l = 0;
        std::vector<double> acc(in.v.cols, 0.0);
        for (int j = 0; j < t.j1 && m > -ref::kInf; ++j) {
          const double e = std::exp(want.l(head, i, j) - m);
          l += e;
          for (int x = 0; x < in.v.cols; ++x) acc[x] += e * in.v.at(head, j, x);
        }
        EXPECT_EQ(row.m == -INFINITY, m == -ref::kInf) << "row " << i;
        if (m > -ref::kInf) {
          EXPECT_NEAR(row.m, m, 1e-5) << "row " << i;
        }
        if (mOld > -ref::kInf) {
          EXPECT_NEAR(row.mOld, mOld, 1e-5) << "row " << i;
        }
        if (!t.skipped && m > -ref::kInf && mOld != m) {
          EXPECT_NEAR(row.rescale, mOld == -ref::kInf ? 0.0 : std::exp(mOld - m), 1e-5);
        }
        if (t.skipped) {
          EXPECT_EQ(row.rescale, 1.0f);
        }
        EXPECT_TRUE(ref::close(row.l, l, 1e-5, 1e-5))
            << "row " << i << ": " << row.l << " vs " << l;
        for (int x = 0; x < in.v.cols; ++x)
          EXPECT_TRUE(ref::close(row.partial[x], l > 0 ? acc[x] / l : 0.0, 1e-5, 1e-4))
              << "row " << i << " x " << x;
      }
    }
    EXPECT_TRUE(fw.done());
  }
}

TEST(FlashWalkthrough, TheLastStepGivesTheMaterialisedSoftmaxOutput) {
  const Inputs in = make(1, 37, 37, 16, 9);
  const AttentionParams p = causal();
  const ref::Result want = ref::attention(in.q, in.k, in.v, p);
  for (auto [br, bc] : {std::pair{8, 8}, {16, 16}, {5, 7}, {37, 37}, {10, 4}}) {
    SCOPED_TRACE("blocks " + std::to_string(br) + " x " + std::to_string(bc));
    FlashWalkthrough fw(in.q, in.k, in.v, 0, p, br, bc);
    fw.seek(fw.steps() - 1);
    ASSERT_TRUE(fw.done());
    for (int i = 0; i < in.q.rows; ++i)
      for (int x = 0; x < in.v.cols; ++x)
        ASSERT_TRUE(ref::close(fw.output()[std::size_t(i) * in.v.cols + x], want.o(0, i, x)))
            << "O[" << i << "," << x << "]";
    EXPECT_LT(fw.maxOutputDifference(), 1e-5f);
    EXPECT_LT(fw.maxWeightDifference(), 1e-6f);
  }
}

TEST(FlashWalkthrough, CausalTilesAboveTheDiagonalAreSkippedAndChangeNothing) {
  const Inputs in = make(1, 20, 20, 8, 3);
  const int br = 6, bc = 4;
  FlashWalkthrough fw(in.q, in.k, in.v, 0, causal(), br, bc);
  ASSERT_EQ(fw.queryBlocks(), 4);
  ASSERT_EQ(fw.keyBlocks(), 5);
  int skipped = 0;
  for (int s = 0; s < fw.steps(); ++s) {
    const FlashWalkthrough::Tile t = fw.tile(s);
    // Wholly masked when even the block's last query (position i1 - 1) is before key j0.
    EXPECT_EQ(t.skipped, t.j0 > t.i1 - 1) << "step " << s;
    skipped += t.skipped;
  }
  EXPECT_EQ(fw.skippedSteps(), skipped);
  EXPECT_GT(skipped, 0);
  // A skipped step leaves the statistics as they were.
  for (int s = 0; s < fw.steps(); ++s) {
    if (!fw.tile(s).skipped || fw.tile(s).keyBlock == 0) continue;
    fw.seek(s - 1);
    const auto before = fw.rows();
    fw.forward();
    EXPECT_TRUE(fw.tileLogits().empty());
    for (std::size_t r = 0; r < before.size(); ++r) {
      EXPECT_EQ(fw.rows()[r].m, before[r].m);
      EXPECT_EQ(fw.rows()[r].l, before[r].l);
      EXPECT_EQ(fw.rows()[r].partial, before[r].partial);
    }
  }
}

TEST(FlashWalkthrough, BackThenForwardReturnsToTheSameState) {
  const Inputs in = make(1, 13, 17, 8, 21);
  FlashWalkthrough fw(in.q, in.k, in.v, 0, causal(), 4, 5);
  fw.seek(7);
  const auto rows = fw.rows();
  const auto out = fw.output();
  const float mx = fw.maxOutputDifference();
  ASSERT_TRUE(fw.back());
  EXPECT_EQ(fw.step(), 6);
  ASSERT_TRUE(fw.forward());
  EXPECT_EQ(fw.step(), 7);
  EXPECT_EQ(fw.output(), out);
  EXPECT_EQ(fw.maxOutputDifference(), mx);
  for (std::size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(fw.rows()[r].l, rows[r].l);
  fw.seek(-1);
  EXPECT_FALSE(fw.back());
  fw.seek(fw.steps() + 5);
  EXPECT_TRUE(fw.done());
  EXPECT_FALSE(fw.forward());
}

TEST(FlashWalkthrough, FullyMaskedRowsEndAsZeros) {
  const Inputs in = make(1, 6, 9, 4, 31);
  AttentionParams p;
  p.mask.pad = 9;  // every key is padding
  FlashWalkthrough fw(in.q, in.k, in.v, 0, p, 4, 4);
  fw.seek(fw.steps() - 1);
  for (float o : fw.output()) EXPECT_EQ(o, 0.0f);
  EXPECT_EQ(fw.skippedSteps(), fw.steps());
  EXPECT_EQ(fw.maxOutputDifference(), 0.0f);
}

TEST(FlashWalkthrough, ProvisionalWeightsAreTheSoftmaxOverTheKeysEachRowHasSeen) {
  const Inputs in = make(2, 17, 19, 8, 41);
  AttentionParams p = causal(0.8f);
  p.mask.window = 9;
  const ref::Result want = ref::attention(in.q, in.k, in.v, p);
  const int head = 1;
  for (auto [br, bc] : {std::pair{4, 6}, {5, 5}, {17, 3}}) {
    SCOPED_TRACE("blocks " + std::to_string(br) + " x " + std::to_string(bc));
    FlashWalkthrough fw(in.q, in.k, in.v, head, p, br, bc);
    EXPECT_EQ(fw.provisionalWeights().cwiseAbs().maxCoeff(), 0.0f);  // before the first step
    while (fw.forward()) {
      const FlashWalkthrough::Tile cur = fw.current();
      const MatrixRM w = fw.provisionalWeights();
      for (int i = 0; i < in.q.rows; ++i) {
        // Keys row i has seen: all for finished blocks, [0, j1) for the current one, none after.
        const int seen = i < cur.i0 ? in.k.rows : i < cur.i1 ? cur.j1 : 0;
        double m = -ref::kInf, l = 0;
        for (int j = 0; j < seen; ++j) m = std::max(m, want.l(head, i, j));
        for (int j = 0; j < seen && m > -ref::kInf; ++j) l += std::exp(want.l(head, i, j) - m);
        for (int j = 0; j < in.k.rows; ++j) {
          const double expect = j < seen && l > 0 && want.l(head, i, j) > -ref::kInf
                                    ? std::exp(want.l(head, i, j) - m) / l
                                    : 0.0;
          ASSERT_NEAR(w(i, j), expect, 1e-6) << "step " << fw.step() << " cell " << i << "," << j;
        }
        for (int kb = 0; kb < fw.keyBlocks(); ++kb)
          EXPECT_EQ(fw.visited(i / br, kb), i < cur.i0 || (i < cur.i1 && kb <= cur.keyBlock));
      }
    }
  }
}

TEST(FlashFigure, TheOverlayAndTitleFollowTheSchedule) {
  const Inputs in = make(1, 21, 21, 8, 7);
  FlashWalkthrough fw(in.q, in.k, in.v, 0, causal(), 5, 7);  // 5 x 3 tiles
  EXPECT_EQ(flashStepTitle(fw), "FlashAttention: before the first step (15 steps)");
  fw.seek(6);  // query block 2, key block 0
  EXPECT_EQ(flashStepTitle(fw), "FlashAttention step 7/15: query block 2, key block 0");
  const FlashOverlay f = flashOverlay(fw);
  ASSERT_EQ(f.tileRows, 5);
  ASSERT_EQ(f.tileCols, 3);
  EXPECT_EQ(f.currentRow, 2);
  EXPECT_EQ(f.currentCol, 0);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 3; ++c) {
      const bool skipped = c * 7 > std::min(21, r * 5 + 5) - 1;  // every key after every query
      const FlashTile want = skipped          ? FlashTile::Skipped
                             : r * 3 + c <= 6 ? FlashTile::Visited
                                              : FlashTile::Unvisited;
      EXPECT_EQ(int(f.at(r, c)), int(want)) << "tile " << r << "," << c;
    }
  fw.seek(1);  // query block 0, key block 1: above the diagonal
  EXPECT_EQ(flashStepTitle(fw), "FlashAttention step 2/15: query block 0, key block 1 (skipped)");
  fw.seek(fw.steps() - 1);
  const FlashOverlay done = flashOverlay(fw);
  ASSERT_FALSE(done.captions.empty());
  EXPECT_NE(done.captions.back().find("done: max |O_flash - O|"), std::string::npos);
}

TEST(FlashWalkthrough, RefusesBadBlocksOrHead) {
  const Inputs in = make(2, 4, 4, 4, 1);
  EXPECT_THROW(FlashWalkthrough(in.q, in.k, in.v, 0, {}, 0, 4), UsageError);
  EXPECT_THROW(FlashWalkthrough(in.q, in.k, in.v, 2, {}, 2, 2), UsageError);
}

}  // namespace
}  // namespace attnviz
