// attnviz session: the pooled view of a head too large to materialise (long contexts).
//
// Above a size (PooledPolicy) the session never asks the engine for S or A. The weights of the
// shown head are streamed (streaming.h) and pooled onto pixel grids instead, as a pyramid:
//
//   * the coarse level: the whole [T_q, T_k] at the smallest power-of-two pool factor whose grid
//     fits `coarsePixels` along both axes, computed once per input, parameter or head change;
//     its pass also yields every row's softmax statistics (max logit, sum of exp);
//   * refined tiles: a window around what is on screen at the pool factor the zoom needs (a
//     power of two, down to 1 cell = 1 token), computed from those statistics, so a tile costs
//     only its own cells.
//
// All of it runs on one worker thread; the frame asks `pick` for the best tile it has (the
// coarse level stands in while a finer one is computed) and never waits. Tiles are kept (least
// recently used first out, within a byte budget), so panning back is instant.
#pragma once

#include "attnviz/engine/engine.h"
#include "attnviz/engine/streaming.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace attnviz {

// When the session pools: Auto above maxCells cells of one head (T_q * T_k), On always (tests,
// --pooled on), Off never. A session starts Off (`attnviz compute` and `export` decide streaming
// for themselves, streamed_export.h); the GUI sets Auto. Auto's 4096 x 4096 keeps every view the
// materialised engine drew before and pools what would need over 64 MiB of scores a head (plus
// as much again for the weights, for every head).
//
// Below that size Auto still decides by memory: when the scores and weights of every head
// (8 bytes a cell, H x T_q x T_k cells) would pass `maxBytes`, only the shown head is
// materialised (Session::headsStreamed) and the other heads are computed one at a time for
// their thumbnails and outputs, never held together.
struct PooledPolicy {
  enum class Mode { Auto, On, Off } mode = Mode::Off;
  std::size_t maxCells = std::size_t(4096) * 4096;
  std::size_t maxBytes = std::size_t(512) << 20;  // the memory budget for every head's S and A
  bool pools(int Tq, int Tk) const {
    if (mode != Mode::Auto) return mode == Mode::On;
    return std::size_t(Tq) * std::size_t(Tk) > maxCells;
  }
  // Materialise only the shown head: Auto, more than one head, and every head's S and A over
  // the budget (checked after pools(): a pooled source materialises nothing).
  bool oneHead(int H, int Tq, int Tk) const {
    if (mode != Mode::Auto || H <= 1) return false;
    return double(H) * double(Tq) * double(Tk) * 8.0 > double(maxBytes);
  }
};

// One pooled grid of the pyramid: `w` covers the region w.r0..w.r1 x w.c0..w.c1 at
// w.poolQ x w.poolK cells a pixel (square: poolQ == poolK).
struct PooledTile {
  PooledWeights w;
  std::uint64_t id = 0;      // unique per tile (texture uploads key on it)
  std::uint64_t source = 0;  // the PooledSource::key it was computed for
  int pool() const { return w.poolQ; }
  bool contains(int r0, int r1, int c0, int c1) const {
    return w.r0 <= r0 && r1 <= w.r1 && w.c0 <= c0 && c1 <= w.c1;
  }
  std::size_t bytes() const { return w.max.size() * 4 + w.mean.size() * 4 + w.masked.size(); }
};

// What the pyramid is of: Q and K (shared with the worker, never copied per tile), the head, the
// parameters and whether the mean is wanted too. A new key drops every tile.
struct PooledSource {
  std::shared_ptr<const Tensor3> q, k;
  int head = 0;
  AttentionParams params;
  bool mean = false;
  std::uint64_t key = 0;
};

class PooledPyramid {
 public:
  explicit PooledPyramid(int coarsePixels = 1024, std::size_t cacheBytes = std::size_t(192) << 20);
  ~PooledPyramid();  // cancels the running job and joins the worker
  PooledPyramid(const PooledPyramid&) = delete;
  PooledPyramid& operator=(const PooledPyramid&) = delete;

  // Starts over for a new source (its key must differ from the last one's): the running job is
  // cancelled, every tile dropped, and the coarse level queued.
  void setSource(PooledSource src);
  // Forgets the source (the session left pooled mode): frees the tiles and the tensors.
  void clear();
  std::uint64_t sourceKey() const;

  // The coarse level's pool factor for a T_q x T_k matrix: the smallest power of two with
  // ceil(T / pool) <= coarsePixels along both axes.
  int coarsePool(int Tq, int Tk) const;
  // The pool factor that draws `cellsPerPixel` cells a screen pixel with at least one texel a
  // pixel: the largest power of two <= cellsPerPixel (1 when zoomed in past one cell a pixel).
  static int poolFor(double cellsPerPixel);

  struct Pick {
    // Null until a coarse level is done; while a new source's coarse level is computed, the
    // last source's stands in (exact = false).
    std::shared_ptr<const PooledTile> tile;
    bool exact = false;  // at the wanted pool (or finer); false: a coarser stand-in is shown
  };
  // The best tile for the visible window (queries [r0, r1), keys [c0, c1)) at `pool`: a cached
  // tile at that pool or finer that contains it, else the finest one that does (the coarse
  // level at worst), and then a refined tile around the window is queued (replacing any queued
  // before it). Never waits.
  Pick pick(int r0, int r1, int c0, int c1, int pool);

  // The coarse level and the row statistics, once computed (null before).
  std::shared_ptr<const PooledTile> coarse() const;
  std::shared_ptr<const SoftmaxStats> stats() const;
  // Bumped when the coarse level arrives (the session rebuilds its row flags then).
  std::uint64_t coarseVersion() const;
  bool busy() const;  // a job is queued or running
  void wait();        // until no job is queued or running (scripted runs, tests)
  // The worker's last error (e.g. scores that overflow), "" when none; cleared when read.
  std::string takeError();
  std::size_t tilesCached() const;
  // Milliseconds the last coarse level and the last refined tile took on the worker.
  double lastCoarseMs() const;
  double lastTileMs() const;

 private:
  struct Job {
    PoolRegion region;
    bool coarse = false;
  };
  void run();
  void insert(std::shared_ptr<const PooledTile> t);

  const int coarsePixels_;
  const std::size_t cacheBytes_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::thread worker_;
  bool stop_ = false;
  bool running_ = false;
  std::atomic<bool> cancel_{false};
  std::shared_ptr<const PooledSource> source_;
  std::optional<Job> queued_;
  std::optional<PoolRegion> runningRegion_;
  std::shared_ptr<const PooledTile> coarse_;
  std::shared_ptr<const PooledTile> previous_;  // the last source's coarse level, until the new
  std::shared_ptr<const SoftmaxStats> stats_;
  std::list<std::shared_ptr<const PooledTile>> tiles_;  // most recently used first
  std::uint64_t nextId_ = 1, coarseVersion_ = 0;
  std::string error_;
  double coarseMs_ = 0, tileMs_ = 0;
};

}  // namespace attnviz
