// attnviz retrieval: needle-in-a-haystack cases, every head's retrieval score (Wu et al. 2024)
// and what masking the top-k heads does to the answer, against masking random k.
#include "cli/cli.h"
#include "cli/model_options.h"

#include "attnviz/formats/npy.h"
#include "attnviz/model/retrieval.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace attnviz::app {
namespace {

std::string heads(const std::vector<std::pair<int, int>>& hs) {
  std::string s;
  for (const auto& [l, h] : hs) s += (s.empty() ? "" : " ") + std::to_string(l) + ":" + std::to_string(h);
  return s;
}

std::string quoted(const Model& m, const std::vector<int>& ids) {
  std::string t = m.tokenizer().decode(ids);
  for (char& ch : t)
    if (ch == '\n') ch = ' ';
  return "\"" + t + "\"";
}

}  // namespace

int runRetrieval(int argc, char** argv) {
  CLI::App app{"Retrieval heads: hide a needle sentence in a filler text, ask for it, and score "
               "each head by how often its most attended key is the needle token being copied "
               "(Wu et al. 2024); then mask the top-k heads, and k random ones, and compare",
               "retrieval"};
  std::string model, filler, fillerFile, needle, question, answer, depths = "0.5", out,
                                                                 maxMemory;
  int k = 2, draws = 5;
  std::uint64_t seed = 1;
  app.add_option("--model", model, "a decoder: model folder, .gguf file or name (ORG/NAME, ollama:NAME:TAG)")->required();
  auto* f1 = app.add_option("--filler", filler, "the haystack text");
  auto* f2 = app.add_option("--filler-file", fillerFile, "the haystack, from a UTF-8 text file");
  f1->excludes(f2);
  app.add_option("--needle", needle, "the sentence hidden in the filler")->required();
  app.add_option("--question", question, "the text after the filler that asks for it")->required();
  app.add_option("--answer", answer, "what the model should copy from the needle")->required();
  app.add_option("--depths", depths,
                 "where the needle goes, as shares of the filler, one case each (default 0.5), "
                 "e.g. 0.1,0.5,0.9");
  app.add_option("--mask-k", k, "how many heads to mask: the top-k by score, and k random (2)");
  app.add_option("--random", draws, "how many random k-sets to draw from the other heads (5)");
  app.add_option("--seed", seed, "the random draws' seed (1)");
  app.add_option("--out", out, "write the scores, float32 [L, H] (.npy)");
  app.add_option("--max-memory", maxMemory, "as for `attnviz model`");
  bool printIds = false;
  app.add_flag("--print-ids", printIds, "print each case's prompt ids, answer ids and text (line ends as \\n)");
  if (const int rc = parseArgs(app, argc, argv); rc >= 0) return rc;

  return guarded("retrieval", [&] {
    if (filler.empty() && fillerFile.empty())
      throw UsageError("give the haystack with --filler TEXT or --filler-file FILE");
    if (!fillerFile.empty()) {
      std::ifstream in(fillerFile, std::ios::binary);
      if (!in) throw InputError(fillerFile + ": cannot be read");
      std::ostringstream ss;
      ss << in.rdbuf();
      filler = ss.str();
      if (filler.empty()) throw InputError(fillerFile + ": the file is empty");
    }
    std::vector<double> ds;
    {
      std::stringstream ss(depths);
      std::string item;
      while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        const double d = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !(d >= 0.0 && d <= 1.0))
          throw UsageError("--depths: expected shares in [0, 1] separated by commas, got \"" +
                           item + "\"");
        ds.push_back(d);
      }
      if (ds.empty()) throw UsageError("--depths: expected at least one share");
    }
    const std::unique_ptr<Model> m = Model::open(model, {}, parseMaxMemory(maxMemory));
    std::vector<NeedleCase> cases;
    for (double d : ds) cases.push_back(buildNeedleCase(*m, {filler, needle, question, answer, d}));
    const RetrievalScores s = retrievalScores(*m, cases);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const NeedleCase& c = cases[i];
      std::printf("case depth %.2f: %zu tokens, needle at %d..%d, answer at %d, greedy %s (%s)\n",
                  c.depth, c.ids.size(), c.needleBegin, c.needleEnd - 1, c.answerBegin,
                  quoted(*m, s.traces[i].generated).c_str(),
                  s.traces[i].correct ? "copied" : "not copied");
      if (printIds) {
        std::string line;
        for (int id : c.ids) line += (line.empty() ? "" : ",") + std::to_string(id);
        std::printf("ids %s\n", line.c_str());
        line.clear();
        for (int id : c.answer) line += (line.empty() ? "" : ",") + std::to_string(id);
        std::printf("answer-ids %s\n", line.c_str());
        line.clear();
        for (char ch : c.text) line += ch == '\n' ? std::string("\\n") : std::string(1, ch);
        std::printf("text %s\n", line.c_str());
      }
    }
    if (!out.empty()) saveNpy(out, {s.layers, s.heads}, s.score.data());
    const std::vector<std::pair<int, int>> ranked = topHeads(s, s.layers * s.heads);
    int positive = 0;
    for (float v : s.score) positive += v > 0.0f ? 1 : 0;
    std::printf("retrieval score (mean over %zu cases): %d of %d heads above 0\n", cases.size(),
                positive, s.layers * s.heads);
    for (std::size_t i = 0; i < ranked.size() && i < 10; ++i) {
      const auto [l, h] = ranked[i];
      if (s.at(l, h) <= 0.0f && i >= 3) break;
      std::printf("head %d:%d\t%.4f\n", l, h, s.at(l, h));
    }
    const MaskComparison cmp = compareMasks(*m, cases, s, k, draws, seed);
    std::printf("answer log-probability (mean over cases), copies right:\n");
    std::printf("no mask\t%.6f\t%d/%d\n", cmp.none.meanLogProb, cmp.none.correct, cmp.none.cases);
    std::printf("top-%d masked (%s)\t%.6f\t%d/%d\n", k, heads(cmp.top.heads).c_str(),
                cmp.top.meanLogProb, cmp.top.correct, cmp.top.cases);
    for (std::size_t d = 0; d < cmp.random.size(); ++d)
      std::printf("random-%d masked (%s)\t%.6f\t%d/%d\n", k, heads(cmp.random[d].heads).c_str(),
                  cmp.random[d].meanLogProb, cmp.random[d].correct, cmp.random[d].cases);
    if (!cmp.random.empty())
      std::printf("random-%d masked, mean of %zu draws\t%.6f\t%d/%zu\n", k, cmp.random.size(),
                  cmp.randomMeanLogProb(), cmp.randomCorrect(),
                  cmp.random.size() * cases.size());
    return 0;
  });
}

}  // namespace attnviz::app
