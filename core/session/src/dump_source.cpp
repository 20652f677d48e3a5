// attnviz session: an attention dump as the session's source (dump_source.h).
#include "attnviz/session/dump_source.h"

#include "attnviz/formats/fileio.h"

namespace attnviz {

namespace {

class WeightsEngine final : public AttentionEngine {
 public:
  WeightsEngine(Tensor3 weights, Tensor3 v) : weights_(std::move(weights)), v_(std::move(v)) {
    if (!v_.empty() && (v_.heads != weights_.heads || v_.rows != weights_.cols))
      throw InputError("V " + v_.shapeString() + " does not fit the weights " +
                       weights_.shapeString());
  }
  std::string name() const override { return "recorded weights (dump)"; }

  // Q and K only say the shapes: the scores are log A of the recorded weights.
  void setInputs(const Tensor3& q, const Tensor3& k, const Tensor3&) override {
    if (q.heads != weights_.heads || q.rows != weights_.rows || k.heads != weights_.heads ||
        k.rows != weights_.cols)
      throw InputError("Q " + q.shapeString() + " / K " + k.shapeString() +
                       " do not fit the weights " + weights_.shapeString());
    dims_ = Dims{weights_.heads, weights_.rows, weights_.cols, q.cols,
                 v_.empty() ? 1 : v_.cols};
    res_ = AttentionResult{};
    res_.dims = dims_;
    logA_ = logWeights(weights_);
    res_.scaled = logA_;
    res_.weights = Tensor3(dims_.H, dims_.Tq, dims_.Tk);
    res_.output = Tensor3(dims_.H, dims_.Tq, dims_.dv);
    res_.rows.assign(std::size_t(dims_.H) * dims_.Tq, RowStats{});
  }
  void softmax(const AttentionParams& p, const std::vector<int>& heads) override {
    renormalizeFromLog(weights_, logA_, p, res_, heads);
    res_.scaled = logA_;  // renormalizeFromLog leaves no scores; the session reads log A there
  }
  void output(const std::vector<int>& heads) override {
    std::vector<int> hs = heads;
    if (hs.empty())
      for (int h = 0; h < dims_.H; ++h) hs.push_back(h);
    for (int h : hs) {
      if (v_.empty()) {
        res_.output.mat(h).setZero();
      } else {
        res_.output.mat(h).noalias() = res_.weights.mat(h) * v_.mat(h);
      }
    }
  }
  const AttentionResult& result(unsigned) override { return res_; }
  Dims dims() const override { return dims_; }

 private:
  Tensor3 weights_, v_, logA_;
  Dims dims_;
  AttentionResult res_;
};

}  // namespace

std::unique_ptr<AttentionEngine> makeWeightsEngine(Tensor3 weights, Tensor3 v) {
  return std::make_unique<WeightsEngine>(std::move(weights), std::move(v));
}

void DumpSource::showLayer(Session& session, int layer) {
  if (layer < 0 || layer >= layers())
    throw UsageError("layer " + std::to_string(layer) + " is out of range (the dump has " +
                     std::to_string(layers()) + " layers)");
  const DumpLayer& d = dump_.layers[layer];
  const Tensor3& w = d.weights;
  session.setEngine(makeWeightsEngine(w, d.v));
  // The dump's weights already carry its model's masks: the session adds none of its own.
  session.editScene().params.mask.causal = false;
  session.touchMask();
  Tensor3 q = d.hasQkv() ? d.q : Tensor3(w.heads, w.rows, 1);
  Tensor3 k = d.hasQkv() ? d.k : Tensor3(w.heads, w.cols, 1);
  Tensor3 v = d.v.empty() ? Tensor3(w.heads, w.cols, 1) : d.v;
  session.setTensors(std::move(q), std::move(k), std::move(v), d.queryTokens, d.keyTokens,
                     /*mayPool=*/false);  // the recorded weights are the matrix shown
  // Figure titles name the layer as `attnviz export --dump` does ("model · layer NAME").
  session.setSourceLabel((dump_.model.empty() ? std::string() : dump_.model + " \xC2\xB7 ") +
                         "layer " + d.name);
  if (d.axes == DumpAxes::Cross)
    session.setAxisTitles("Queries: the target", "Keys: the source");
  else if (d.axes == DumpAxes::KeySelf)
    session.setAxisTitles("Queries: the source", "Keys: the source");
  layer_ = layer;
}

}  // namespace attnviz
