// attnviz session: the pooled pyramid's worker, cache and choice of tile.
#include "attnviz/session/pooled_view.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

namespace attnviz {

namespace {

// A refined tile reaches this far past the visible window on each side (a fraction of the
// window), so that a small pan stays inside it.
constexpr double kMargin = 0.125;
// Tile corners snap outward to multiples of pool * kSnap cells, so nearby windows share tiles.
constexpr int kSnap = 64;

int snapDown(int v, int step) { return (v / step) * step; }
int snapUp(int v, int step) { return ((v + step - 1) / step) * step; }

}  // namespace

PooledPyramid::PooledPyramid(int coarsePixels, std::size_t cacheBytes)
    : coarsePixels_(std::max(1, coarsePixels)), cacheBytes_(cacheBytes) {}

PooledPyramid::~PooledPyramid() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    cancel_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

int PooledPyramid::coarsePool(int Tq, int Tk) const {
  int pool = 1;
  while ((std::max(Tq, Tk) + pool - 1) / pool > coarsePixels_) pool *= 2;
  return pool;
}

int PooledPyramid::poolFor(double cellsPerPixel) {
  int pool = 1;
  while (pool * 2 <= cellsPerPixel && pool < (1 << 24)) pool *= 2;
  return pool;
}

void PooledPyramid::setSource(PooledSource src) {
  const int Tq = src.q->rows, Tk = src.k->rows;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancel_ = true;
    if (coarse_) previous_ = coarse_;
    source_ = std::make_shared<const PooledSource>(std::move(src));
    tiles_.clear();
    coarse_.reset();
    stats_.reset();
    const int pool = coarsePool(Tq, Tk);
    queued_ = Job{PoolRegion{0, Tq, 0, Tk, pool, pool}, true};
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
  }
  wake_.notify_all();
}

void PooledPyramid::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancel_ = true;
  source_.reset();
  queued_.reset();
  tiles_.clear();
  coarse_.reset();
  previous_.reset();
  stats_.reset();
  idle_.notify_all();
}

std::uint64_t PooledPyramid::sourceKey() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return source_ ? source_->key : 0;
}

PooledPyramid::Pick PooledPyramid::pick(int r0, int r1, int c0, int c1, int pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  Pick out;
  if (!coarse_) {
    out.tile = previous_;  // the last source's coarse level stands in (a slider is moving)
    return out;
  }
  if (pool >= coarse_->pool()) return {coarse_, true};
  // The closest cached tile at the wanted pool or finer that covers the window.
  auto best = tiles_.end();
  for (auto it = tiles_.begin(); it != tiles_.end(); ++it)
    if ((*it)->pool() <= pool && (*it)->contains(r0, r1, c0, c1) &&
        (best == tiles_.end() || (*it)->pool() > (*best)->pool()))
      best = it;
  if (best != tiles_.end()) {
    tiles_.splice(tiles_.begin(), tiles_, best);
    return {tiles_.front(), true};
  }
  // A stand-in: the finest coarser tile that covers the window, the coarse level at worst.
  out.tile = coarse_;
  for (const auto& t : tiles_)
    if (t->pool() < out.tile->pool() && t->contains(r0, r1, c0, c1)) out.tile = t;
  // Queue the refined tile, unless the one running or queued will cover the window.
  auto covers = [&](const PoolRegion& g) {
    return g.poolQ == pool && g.r0 <= r0 && r1 <= g.r1 && g.c0 <= c0 && c1 <= g.c1;
  };
  if ((runningRegion_ && covers(*runningRegion_)) || (queued_ && !queued_->coarse &&
                                                      covers(queued_->region)))
    return out;
  if (queued_ && queued_->coarse) return out;
  const int Tq = coarse_->w.Tq, Tk = coarse_->w.Tk, snap = pool * kSnap;
  const int mr = int(std::ceil((r1 - r0) * kMargin)), mc = int(std::ceil((c1 - c0) * kMargin));
  PoolRegion g;
  g.r0 = std::max(0, snapDown(r0 - mr, snap));
  g.r1 = std::min(Tq, snapUp(r1 + mr, snap));
  g.c0 = std::max(0, snapDown(c0 - mc, snap));
  g.c1 = std::min(Tk, snapUp(c1 + mc, snap));
  g.poolQ = g.poolK = pool;
  if (g.r1 <= g.r0 || g.c1 <= g.c0) return out;
  queued_ = Job{g, false};
  wake_.notify_all();
  return out;
}

void PooledPyramid::insert(std::shared_ptr<const PooledTile> t) {
  tiles_.push_front(std::move(t));
  std::size_t total = 0;
  for (auto it = tiles_.begin(); it != tiles_.end();) {
    total += (*it)->bytes();
    // The newest tile always stays; older ones go once the budget is spent.
    if (total > cacheBytes_ && it != tiles_.begin())
      it = tiles_.erase(it);
    else
      ++it;
  }
}

void PooledPyramid::run() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || queued_.has_value(); });
    if (stop_) return;
    const Job job = *queued_;
    queued_.reset();
    const std::shared_ptr<const PooledSource> src = source_;
    const std::shared_ptr<const SoftmaxStats> stats = stats_;
    if (!src || (!job.coarse && !stats)) {
      if (!queued_) idle_.notify_all();
      continue;
    }
    running_ = true;
    if (!job.coarse) runningRegion_ = job.region;
    cancel_ = false;
    lock.unlock();
    const auto t0 = Clock::now();
    std::shared_ptr<PooledTile> tile;
    auto found = std::make_shared<SoftmaxStats>();
    std::string error;
    try {
      StreamOptions opt;
      opt.cancel = &cancel_;
      tile = std::make_shared<PooledTile>();
      tile->w = streamPooledRegion(*src->q, *src->k, src->head, src->params, job.region, opt,
                                   src->mean, job.coarse ? nullptr : stats.get(),
                                   job.coarse ? found.get() : nullptr);
      tile->source = src->key;
    } catch (const std::exception& e) {
      error = e.what();
      tile.reset();
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    lock.lock();
    running_ = false;
    runningRegion_.reset();
    if (!cancel_ && source_ == src) {
      if (!error.empty()) {
        error_ = error;
      } else if (job.coarse) {
        tile->id = nextId_++;
        coarse_ = std::move(tile);
        stats_ = std::move(found);
        previous_.reset();
        ++coarseVersion_;
        coarseMs_ = ms;
      } else {
        tile->id = nextId_++;
        insert(std::move(tile));
        tileMs_ = ms;
      }
    }
    if (!queued_) idle_.notify_all();
  }
}

std::shared_ptr<const PooledTile> PooledPyramid::coarse() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return coarse_;
}

std::shared_ptr<const SoftmaxStats> PooledPyramid::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::uint64_t PooledPyramid::coarseVersion() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return coarseVersion_;
}

bool PooledPyramid::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_ || queued_.has_value();
}

void PooledPyramid::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return !running_ && !queued_; });
}

std::string PooledPyramid::takeError() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(error_, std::string());
}

std::size_t PooledPyramid::tilesCached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tiles_.size();
}

double PooledPyramid::lastCoarseMs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return coarseMs_;
}

double PooledPyramid::lastTileMs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tileMs_;
}

}  // namespace attnviz
