// attnviz GUI: drives the engine by the caching rule and builds the matrix the heatmap shows.
//
// A change to the text, seed, heads, d or archetypes re-runs setInputs (the GEMMs). A change to
// the temperature, a mask or ALiBi re-runs only the softmax, and only for the head on screen;
// the other heads (thumbnails) follow in later frames within a time budget.
#include "app_state.h"

#include "attnviz/mask.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace attnviz::gui {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool sameMask(const MaskSpec& a, const MaskSpec& b) {
  return a.causal == b.causal && a.window == b.window && a.prefix == b.prefix && a.sink == b.sink &&
         a.pad == b.pad && a.alibi == b.alibi && a.customKind == b.customKind &&
         a.custom.sameShape(b.custom) && a.custom.data == b.custom.data && a.chunk == b.chunk &&
         a.docs == b.docs && a.expr == b.expr && a.softcap == b.softcap;
}

// b_ij, or -inf where masked, for one head. Depends on the mask only, never on tau.
void buildBiasMask(AppState& s, int h) {
  ComputeState& c = s.compute;
  const int Tq = s.tq(), Tk = s.tk();
  const MaskSpec& m = c.params.mask;
  c.biasMask.assign(std::size_t(Tq) * Tk, 0.0f);
  c.anyBias = m.alibi || m.customKind == MaskSpec::Custom::Bias;
  const bool anyMask = m.any();
  if (anyMask) {
    const ExprGrid* grid = exprGrid(m, s.heads(), Tq, Tk);
    std::vector<std::uint8_t> allowed(std::size_t(std::max(Tk, 0)));
    for (int i = 0; i < Tq; ++i) {
      float* row = c.biasMask.data() + std::size_t(i) * Tk;
      allowedRow(m, grid, h, i, Tq, Tk, allowed.data());
      for (int j = 0; j < Tk; ++j) {
        if (!allowed[std::size_t(j)]) {
          row[j] = kNegInf;
        } else if (c.anyBias) {
          row[j] = maskBias(m, c.slopes, h, i, j, Tq, Tk);
        }
      }
    }
  }
  c.biasMaskHead = h;
  c.biasMaskValid = true;
  ++c.biasMaskVersion;
}

void ensureBiasMask(AppState& s, int h) {
  if (!s.compute.biasMaskValid || s.compute.biasMaskHead != h) buildBiasMask(s, h);
}

// Softmax and output for `heads` (empty = all). The host copy is left to fetchResult, so a
// batch of heads costs one GPU readback, not one per head.
void computeHeads(AppState& s, const std::vector<int>& heads) {
  ComputeState& c = s.compute;
  c.engine->softmax(c.params, heads);
  c.engine->output(heads);
  const int H = s.heads();
  if (heads.empty()) {
    for (int h = 0; h < H; ++h) {
      c.headFresh[h] = 1;
      ++c.headVersion[h];
    }
  } else {
    for (int h : heads) {
      c.headFresh[h] = 1;
      ++c.headVersion[h];
    }
  }
  ++c.weightsVersion;
}

void fetchResult(AppState& s) {
  ComputeState& c = s.compute;
  // S only changes with the inputs; after the first read only what the softmax changed comes
  // back (for the GPU backend this is the whole readback cost).
  c.result =
      &c.engine->result(c.scaledFetched ? (kStageWeights | kStageOutput | kStageRows) : kStageAll);
  c.scaledFetched = true;
}

// Softmax over the query axis (the teaching mistake): every column sums to 1.
void wrongAxisSoftmax(const float* scaled, const float* biasMask, float tau, int Tq, int Tk,
                      std::vector<float>& out) {
  out.assign(std::size_t(Tq) * Tk, kNegInf);
  std::vector<float> colMax(Tk, kNegInf), colSum(Tk, 0.0f);
  for (int i = 0; i < Tq; ++i)
    for (int j = 0; j < Tk; ++j) {
      const std::size_t k = std::size_t(i) * Tk + j;
      if (biasMask[k] == kNegInf) continue;
      colMax[j] = std::max(colMax[j], (scaled[k] + biasMask[k]) / tau);
    }
  for (int i = 0; i < Tq; ++i)
    for (int j = 0; j < Tk; ++j) {
      const std::size_t k = std::size_t(i) * Tk + j;
      if (biasMask[k] == kNegInf) continue;
      const float e = std::exp((scaled[k] + biasMask[k]) / tau - colMax[j]);
      out[k] = e;
      colSum[j] += e;
    }
  for (int i = 0; i < Tq; ++i)
    for (int j = 0; j < Tk; ++j) {
      const std::size_t k = std::size_t(i) * Tk + j;
      if (out[k] != kNegInf) out[k] /= colSum[j];
    }
}

// The view and the weights `display` must be built from now.
DisplayMatrix::Source displaySource(const AppState& s) {
  const ComputeState& c = s.compute;
  const int h = s.shownHead();
  DisplayMatrix::Source src;
  src.weights = s.view.headAverage
                    ? c.weightsVersion
                    : (h >= 0 && h < int(c.headVersion.size()) ? c.headVersion[h] : 0);
  src.head = h;
  src.stage = int(s.view.stage);
  src.headAverage = s.view.headAverage;
  src.wrongAxis = s.view.wrongAxis;
  return src;
}

void buildDisplay(AppState& s) {
  const auto t0 = Clock::now();
  ComputeState& c = s.compute;
  DisplayMatrix& d = s.display;
  const int h = s.shownHead();
  const int Tq = s.tq(), Tk = s.tk();
  const AttentionResult& r = *c.result;
  const int dv = r.dims.dv;
  ensureBiasMask(s, h);
  const float* S = r.scaled.head(h);
  const float* B = c.biasMask.data();
  const float tau = c.params.temperature;
  const ViewStage stage = s.view.stage;
  const std::size_t n = std::size_t(Tq) * Tk;
  // With a softcap, every stage from Capped on starts from c tanh(s / c).
  thread_local std::vector<float> capped;
  const float* C = S;
  if (c.params.mask.softcap > 0.0f) {
    capped.resize(n);
    for (std::size_t k = 0; k < n; ++k) capped[k] = softcapScore(S[k], c.params.mask.softcap);
    C = capped.data();
  }

  d.columnsAreKeys = stage != ViewStage::Output;
  d.isWeights = stage == ViewStage::Weights;
  d.rows = Tq;
  d.cols = d.columnsAreKeys ? Tk : dv;
  d.values.resize(std::size_t(d.rows) * d.cols);
  switch (stage) {
    case ViewStage::RawScores: {
      const float root = std::sqrt(float(r.dims.dk));
      for (std::size_t k = 0; k < n; ++k) d.values[k] = S[k] * root;
      break;
    }
    case ViewStage::Scaled:
      std::copy(S, S + n, d.values.begin());
      break;
    case ViewStage::Capped:
      std::copy(C, C + n, d.values.begin());
      break;
    case ViewStage::Biased:
      for (std::size_t k = 0; k < n; ++k) d.values[k] = B[k] == kNegInf ? kNegInf : C[k] + B[k];
      break;
    case ViewStage::Logits:
      for (std::size_t k = 0; k < n; ++k)
        d.values[k] = B[k] == kNegInf ? kNegInf : (C[k] + B[k]) / tau;
      break;
    case ViewStage::Weights:
      if (s.view.wrongAxis) {
        wrongAxisSoftmax(C, B, tau, Tq, Tk, d.values);
      } else if (s.view.headAverage) {
        const int H = s.heads();
        std::fill(d.values.begin(), d.values.end(), 0.0f);
        for (int hh = 0; hh < H; ++hh) {
          const float* W = r.weights.head(hh);
          for (std::size_t k = 0; k < n; ++k) d.values[k] += W[k];
        }
        for (std::size_t k = 0; k < n; ++k)
          d.values[k] = (B[k] == kNegInf && d.values[k] == 0.0f) ? kNegInf : d.values[k] / H;
      } else {
        const float* W = r.weights.head(h);
        for (std::size_t k = 0; k < n; ++k) d.values[k] = B[k] == kNegInf ? kNegInf : W[k];
      }
      break;
    case ViewStage::Output: {
      const float* O = r.output.head(h);
      std::copy(O, O + std::size_t(Tq) * dv, d.values.begin());
      break;
    }
  }

  // Sums along both axes of what is shown, and which rows are fully masked.
  d.rowSums.assign(d.rows, 0.0f);
  d.colSums.assign(d.cols, 0.0f);
  d.rowFullyMasked.assign(d.rows, 0);
  d.fullyMaskedRows = 0;
  d.firstFullyMaskedRow = -1;
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (int i = 0; i < d.rows; ++i) {
    const float* row = d.values.data() + std::size_t(i) * d.cols;
    double sum = 0;
    for (int j = 0; j < d.cols; ++j) {
      const float v = row[j];
      if (v == kNegInf) continue;
      if (std::isfinite(v)) {
        sum += v;
        d.colSums[j] += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    d.rowSums[i] = float(sum);
    if (d.columnsAreKeys) {
      // A row is fully masked when the mask allows none of its keys.
      bool allowed = false;
      const float* brow = B + std::size_t(i) * Tk;
      for (int j = 0; j < Tk && !allowed; ++j) allowed = brow[j] != kNegInf;
      d.rowFullyMasked[i] = !allowed;
    } else {
      d.rowFullyMasked[i] = r.row(h, i).fullyMasked;
    }
    if (d.rowFullyMasked[i]) {
      if (d.firstFullyMaskedRow < 0) d.firstFullyMaskedRow = i;
      ++d.fullyMaskedRows;
    }
  }
  if (lo > hi) lo = hi = 0.0f;
  d.minFinite = lo;
  d.maxFinite = hi;
  d.source = displaySource(s);
  ++d.version;
  s.timing.displayMs = msSince(t0);
}

}  // namespace

const char* stageLabel(ViewStage s) {
  switch (s) {
    case ViewStage::RawScores:
      return "QK\xe1\xb5\x80";
    case ViewStage::Scaled:
      return "\xc3\xb7\xe2\x88\x9a"
             "d";
    case ViewStage::Capped:
      return "softcap";
    case ViewStage::Biased:
      return "+ bias & mask";
    case ViewStage::Logits:
      return "\xc3\xb7 \xcf\x84";
    case ViewStage::Weights:
      return "softmax";
    case ViewStage::Output:
      return "A\xc2\xb7V";
  }
  return "?";
}

const char* stageKey(ViewStage s) {
  switch (s) {
    case ViewStage::RawScores:
      return "qk";
    case ViewStage::Scaled:
      return "scaled";
    case ViewStage::Capped:
      return "capped";
    case ViewStage::Biased:
      return "biased";
    case ViewStage::Logits:
      return "logits";
    case ViewStage::Weights:
      return "weights";
    case ViewStage::Output:
      return "output";
  }
  return "weights";
}

const char* stageFormula(ViewStage s) {
  switch (s) {
    case ViewStage::RawScores:
      return "cell (i, j) = q_i \xc2\xb7 k_j   (raw dot product, no scaling)";
    case ViewStage::Scaled:
      return "cell (i, j) = q_i \xc2\xb7 k_j / \xe2\x88\x9a"
             "d_k";
    case ViewStage::Capped:
      return "cell (i, j) = c \xc2\xb7 tanh(s_ij / c), s_ij = q_i \xc2\xb7 k_j / \xe2\x88\x9a"
             "d_k   (Gemma 2 softcap: |cell| < c)";
    case ViewStage::Biased:
      return "cell (i, j) = q_i \xc2\xb7 k_j / \xe2\x88\x9a"
             "d_k + b_ij   (masked = \xe2\x88\x92\xe2\x88\x9e; softcapped first when set)";
    case ViewStage::Logits:
      return "cell (i, j) = L_ij = (q_i \xc2\xb7 k_j / \xe2\x88\x9a"
             "d_k + b_ij) / \xcf\x84";
    case ViewStage::Weights:
      return "row i = softmax over the keys j of L(i, j): every row sums to 1";
    case ViewStage::Output:
      return "row i = o_i = \xce\xa3_j A_ij v_j   (columns are value dimensions)";
  }
  return "";
}

bool stageIsScore(ViewStage s) { return s != ViewStage::Weights; }

ViewStage stageFromKey(const std::string& key) {
  for (int k = 0; k < kStageCount; ++k)
    if (key == stageKey(ViewStage(k))) return ViewStage(k);
  throw UsageError("--stage: expected qk, scaled, capped, biased, logits, weights or output, got '" + key +
                   "'");
}

const Dims AppState::dims() const {
  return compute.engine && compute.haveInputs ? compute.engine->dims() : Dims{};
}

bool allHeadsFresh(const AppState& s) {
  for (auto f : s.compute.headFresh)
    if (!f) return false;
  return true;
}

Archetype headArchetype(const Scene& scene, int h) {
  if (h >= 0 && h < int(scene.archetypes.size())) return scene.archetypes[h];
  const auto all = allArchetypes();
  return all[std::size_t(h) % all.size()];
}

void markInputsDirty(AppState& s) { s.scene.inputsDirty = true; }
void markParamsDirty(AppState& s) {
  s.scene.paramsDirty = true;
  s.scene.maskDirty = true;
}
void markTemperatureDirty(AppState& s) { s.scene.paramsDirty = true; }

AttentionParams currentParams(const AppState& s) {
  AttentionParams p = effectiveParams(s.scene.scene);
  const SceneState& sc = s.scene;
  const int Tq = s.tq(), Tk = s.tk();
  if (sc.paintEnabled && !sc.painted.empty() && sc.paintedRows == Tq && sc.paintedCols == Tk) {
    MaskSpec& m = p.mask;
    if (m.customKind == MaskSpec::Custom::None) {
      m.customKind = MaskSpec::Custom::Allow;
      m.custom = Tensor3(1, Tq, Tk, 1.0f);
    }
    for (int hh = 0; hh < m.custom.heads; ++hh)
      for (int i = 0; i < Tq; ++i)
        for (int j = 0; j < Tk; ++j) {
          if (sc.painted[std::size_t(i) * Tk + j]) continue;
          m.custom.at(hh, i, j) = m.customKind == MaskSpec::Custom::Allow ? 0.0f : kNegInf;
        }
  }
  return p;
}

void clearPaint(AppState& s) {
  s.scene.painted.clear();
  s.scene.paintedRows = s.scene.paintedCols = 0;
  markParamsDirty(s);
}

void paintCell(AppState& s, int i, int j, bool allow) {
  SceneState& sc = s.scene;
  const int Tq = s.tq(), Tk = s.tk();
  if (i < 0 || j < 0 || i >= Tq || j >= Tk) return;
  if (sc.painted.empty() || sc.paintedRows != Tq || sc.paintedCols != Tk) {
    sc.painted.assign(std::size_t(Tq) * Tk, 1);
    sc.paintedRows = Tq;
    sc.paintedCols = Tk;
  }
  auto& cell = sc.painted[std::size_t(i) * Tk + j];
  if (cell != (allow ? 1 : 0)) {
    cell = allow ? 1 : 0;
    markParamsDirty(s);
  }
}

void updateCompute(AppState& s) {
  ComputeState& c = s.compute;
  SceneState& sc = s.scene;
  if (sc.inputsDirty) {
    const auto t0 = Clock::now();
    SceneInputs in = buildSceneInputs(sc.scene);
    c.engine->setInputs(in.q, in.k, in.v);
    sc.inputs = std::move(in);
    const int H = s.heads();
    c.slopes = alibiSlopes(H);
    c.headFresh.assign(H, 0);
    c.headVersion.resize(H, 0);
    c.haveInputs = true;
    ++c.inputsVersion;
    c.result = nullptr;
    c.scaledFetched = false;
    c.biasMaskValid = false;
    s.timing.setInputsMs = msSince(t0);
    sc.inputsDirty = false;
    markParamsDirty(s);
    // Keep the view inside the new shape.
    s.view.head = std::clamp(s.view.head, 0, H - 1);
    if (s.view.selectedRow >= s.tq()) s.view.selectedRow = s.tq() - 1;
    if (sc.paintedRows != s.tq() || sc.paintedCols != s.tk()) {
      sc.painted.clear();
      sc.paintedRows = sc.paintedCols = 0;
    }
  }
  if (!c.haveInputs) return;  // nothing valid yet (the first scene failed to build)
  if (sc.paramsDirty) {
    if (sc.maskDirty) {
      AttentionParams p = currentParams(s);
      validateParams(p, s.heads(), s.tq(), s.tk());
      if (!sameMask(p.mask, c.params.mask)) c.biasMaskValid = false;
      c.params = std::move(p);
      sc.maskDirty = false;
    } else {
      // A temperature step: the mask, painted cells included, is reused as it is.
      AttentionParams p;
      p.temperature = sc.scene.params.temperature;
      validateParams(p, s.heads(), s.tq(), s.tk());
      c.params.temperature = p.temperature;
    }
    std::fill(c.headFresh.begin(), c.headFresh.end(), 0);
    const auto t0 = Clock::now();
    // The head on screen first; every head when the average is shown.
    if (s.view.headAverage)
      computeHeads(s, {});
    else
      computeHeads(s, {s.shownHead()});
    fetchResult(s);
    s.timing.softmaxMs = msSince(t0);
    sc.paramsDirty = false;
  }
  bool ran = false;
  const int shown = s.shownHead();
  if (shown >= 0 && shown < int(c.headFresh.size()) && !c.headFresh[shown]) {
    computeHeads(s, {shown});
    ran = true;
  }
  if (s.view.headAverage && !allHeadsFresh(s)) {
    computeHeads(s, {});
    ran = true;
  }
  if (ran) fetchResult(s);
  if (c.result && !(s.display.source == displaySource(s))) buildDisplay(s);
}

void refreshStaleHeads(AppState& s, double budgetMs) {
  ComputeState& c = s.compute;
  if (!c.haveInputs) return;
  const auto t0 = Clock::now();
  bool ran = false;
  for (int h = 0; h < int(c.headFresh.size()); ++h) {
    if (c.headFresh[h]) continue;
    computeHeads(s, {h});
    ran = true;
    if (msSince(t0) > budgetMs) break;
  }
  if (ran) fetchResult(s);
}

CellInfo cellInfo(const AppState& s, int i, int j) {
  CellInfo ci;
  const ComputeState& c = s.compute;
  if (!c.haveInputs || !c.result || i < 0 || i >= s.tq()) return ci;
  const AttentionResult& r = *c.result;
  const int h = s.shownHead();
  ci.i = i;
  ci.j = j;
  ci.queryToken = s.scene.inputs.queryTokens[i];
  if (s.display.columnsAreKeys) {
    if (j < 0 || j >= s.tk()) return ci;
    ci.keyToken = s.scene.inputs.keyTokens[j];
    ci.scaled = r.scaled.at(h, i, j);
    ci.logit = logitAt(r.scaled, c.params, c.slopes, h, i, j);
    ci.masked = std::isinf(ci.logit) && ci.logit < 0;
    ci.weight = r.weights.at(h, i, j);
    double sum = 0;
    for (int k = 0; k < s.tk(); ++k) sum += r.weights.at(h, i, k);
    ci.rowSum = float(sum);
  }
  if (j >= 0 && j < s.display.cols && i < s.display.rows)
    ci.shown = s.display.values[std::size_t(i) * s.display.cols + j];
  return ci;
}

double nowSeconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

void notify(AppState& s, const std::string& text, double seconds) {
  s.ui.notice = text;
  s.ui.noticeUntil = nowSeconds() + seconds;
}

void reportError(AppState& s, const std::string& what) {
  s.ui.error = what;
  s.ui.errorPending = true;
  std::fprintf(stderr, "attnviz: %s\n", what.c_str());
}

}  // namespace attnviz::gui
