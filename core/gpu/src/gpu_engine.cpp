// attnviz GPU backend: the engine. See attnviz/gpu_engine.h for the contract and
// shaders/matmul.comp and shaders/softmax.comp for the kernels.
#include "attnviz/gpu/gpu_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "egl_context.h"
#include "gl_objects.h"

namespace attnviz {

namespace {

using gpu::GlBuffer;
using gpu::GlProgram;

constexpr int kMaxGroups = 65535;  // the minimum GL guarantees per dispatch dimension
// Bound ranges are capped so that every in-range float index fits a GLSL int.
constexpr std::size_t kMaxBindBytes = std::size_t{1} << 30;

// Workgroup shape of matmul.comp: WG_X x WG_Y invocations, each computing an 8 x 8 block, make
// a (8 WG_Y) x (8 WG_X) tile of C; K is consumed BK at a time.
struct MatmulShape {
  int wgX, wgY, bk;
  std::string defines() const {
    return "#define WG_X " + std::to_string(wgX) + "\n#define WG_Y " + std::to_string(wgY) +
           "\n#define BK " + std::to_string(bk) + "\n";
  }
};

int envInt(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e && *e ? std::atoi(e) : fallback;
}

int ceilDiv(long long a, long long b) { return int((a + b - 1) / b); }

class GpuEngineImpl final : public GpuEngine {
 public:
  explicit GpuEngineImpl(std::unique_ptr<gpu::EglContext> ctx) : ctx_(std::move(ctx)) {
    GLint major = 0, minor = 0;
    const GLubyte* version = glGetString(GL_VERSION);
    if (version == nullptr) throw std::runtime_error("no current OpenGL context");
    glGetIntegerv(GL_MAJOR_VERSION, &major);
    glGetIntegerv(GL_MINOR_VERSION, &minor);
    if (major * 10 + minor < 43) {
      throw std::runtime_error("OpenGL 4.3 needed for compute shaders, the context has " +
                               std::string(reinterpret_cast<const char*>(version)));
    }
    const GLubyte* r = glGetString(GL_RENDERER);
    renderer_ = r ? reinterpret_cast<const char*>(r) : "unknown renderer";
    GLint64 maxBlock = 0;
    glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &maxBlock);
    GLint align = 4;
    glGetIntegerv(GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT, &align);
    align_ = std::size_t(std::max(align, 4));
    maxBind_ = std::min<std::size_t>(std::size_t(std::max<GLint64>(maxBlock, 0)), kMaxBindBytes);
    // Tests lower the limit to exercise the row tiling at small sizes.
    if (const char* env = std::getenv("ATTNVIZ_GPU_MAX_BIND_BYTES"); env && *env) {
      const long long v = std::atoll(env);
      if (v > 0) maxBind_ = std::min(maxBind_, std::size_t(v));
    }
    // A range starting at an aligned-down offset can be up to align_ - 4 bytes longer.
    if (maxBind_ <= align_ + 1024) {
      throw std::runtime_error("GL_MAX_SHADER_STORAGE_BLOCK_SIZE is only " +
                               std::to_string(maxBlock) + " bytes");
    }
    maxBind_ -= align_;
    GLint groups = 0;
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, 0, &groups);
    maxGroupsX_ = std::max(1, std::min(groups, kMaxGroups));
    glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, 1, &groups);
    maxGroupsY_ = std::max(1, std::min(groups, kMaxGroups));

    // Kernel shapes. A CPU rasterizer (llvmpipe) runs a workgroup on one core in 8-lane SIMD
    // chunks and switches between the chunks at every barrier, so it gets small workgroups:
    // 8-wide softmax rows (5-8x faster than 256 there) and 8 x 8 GEMM workgroups with BK 32
    // (about 1.5x faster than 16 x 16). GPUs get 256-wide rows and the classic 16 x 16 x (8 x 8)
    // SGEMM tile. ATTNVIZ_GPU_MATMUL and ATTNVIZ_GPU_SOFTMAX_WG override them for tuning.
    const bool cpuRasterizer = isSoftwareRenderer(renderer_);
    MatmulShape mm = cpuRasterizer ? MatmulShape{8, 8, 32} : MatmulShape{16, 16, 16};
    if (const char* e = std::getenv("ATTNVIZ_GPU_MATMUL"); e && *e) {  // "WG_X,WG_Y,BK"
      if (std::sscanf(e, "%d,%d,%d", &mm.wgX, &mm.wgY, &mm.bk) != 3 || mm.wgX < 1 || mm.wgY < 1 ||
          mm.bk < 1) {
        throw std::runtime_error("ATTNVIZ_GPU_MATMUL must be WG_X,WG_Y,BK, got '" + std::string(e) +
                                 "'");
      }
    }
    const int softmaxWg = envInt("ATTNVIZ_GPU_SOFTMAX_WG", cpuRasterizer ? 8 : 256);
    if (softmaxWg < 1 || (softmaxWg & (softmaxWg - 1)) != 0) {
      throw std::runtime_error("ATTNVIZ_GPU_SOFTMAX_WG must be a power of two");
    }
    scoresProg_ = GlProgram::compute(
        "matmul.comp", "#define B_TRANSPOSED 1\n#define CHECK_FINITE 1\n" + mm.defines());
    outputProg_ = GlProgram::compute("matmul.comp", mm.defines());
    softmaxProg_ =
        GlProgram::compute("softmax.comp", "#define WG " + std::to_string(softmaxWg) + "\n");
    tileRows_ = 8 * mm.wgY;
    tileCols_ = 8 * mm.wgX;
    dummy_ = GlBuffer(16, "placeholder buffer");
  }

  ~GpuEngineImpl() override {
    // GL objects are deleted on the engine's own context.
    if (ctx_) {
      try {
        ctx_->makeCurrent();
      } catch (...) {
      }
    }
  }

  std::string name() const override { return "GPU (" + renderer_ + ")"; }
  std::string renderer() const override { return renderer_; }
  unsigned weightsBuffer() const override { return weightsReady_ ? w_.id() : 0u; }
  Dims dims() const override { return dims_; }

  void setInputs(const Tensor3& q, const Tensor3& k, const Tensor3& v) override {
    current();
    const Dims d = validateInputs(q, k, v);
    const std::size_t tk4 = std::size_t(d.Tk) * 4;
    if (tk4 > maxBind_) {
      throw InputError("GPU backend: one row of scores (T_k = " + std::to_string(d.Tk) +
                       ") exceeds GL_MAX_SHADER_STORAGE_BLOCK_SIZE");
    }
    const std::size_t kHead = std::size_t(d.Tk) * std::size_t(std::max(d.dk, d.dv)) * 4;
    if (kHead > maxBind_) {
      throw InputError("GPU backend: one head of K or V (" + std::to_string(kHead >> 20) +
                       " MiB) exceeds GL_MAX_SHADER_STORAGE_BLOCK_SIZE (" +
                       std::to_string(maxBind_ >> 20) + " MiB)");
    }
    if (std::size_t(d.dk) * 4 > maxBind_ || std::size_t(d.dv) * 4 > maxBind_) {
      throw InputError("GPU backend: d_k or d_v exceeds GL_MAX_SHADER_STORAGE_BLOCK_SIZE");
    }
    const std::size_t hq = std::size_t(d.H) * std::size_t(d.Tq);
    // Until every buffer is in place the engine holds no inputs: a failed allocation leaves it
    // refusing softmax()/output() rather than reading buffers of the old shape.
    dims_ = Dims{};
    weightsReady_ = false;
    res_ = AttentionResult{};
    ensure(q_, q.size() * 4, "Q");
    ensure(k_, k.size() * 4, "K");
    ensure(v_, v.size() * 4, "V");
    ensure(s_, hq * std::size_t(d.Tk) * 4, "the scores S");
    ensure(w_, hq * std::size_t(d.Tk) * 4, "the weights A");
    ensure(o_, hq * std::size_t(d.dv) * 4, "the output O");
    ensure(rows_, hq * 16, "the row stats");
    ensure(overflow_, std::size_t(d.H) * 4, "the overflow flags");
    const GLuint zero = 0;
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, overflow_.id());
    glClearBufferSubData(GL_SHADER_STORAGE_BUFFER, GL_R32UI, 0, GLsizeiptr(d.H) * 4, GL_RED_INTEGER,
                         GL_UNSIGNED_INT, &zero);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    q_.upload(q.data.data(), q.size() * 4);
    k_.upload(k.data.data(), k.size() * 4);
    v_.upload(v.data.data(), v.size() * 4);
    dims_ = d;
    res_.dims = d;

    // Row tiles: a tile of S (rows x T_k) must fit one binding, and its rows one dispatch.
    rowTile_ = int(std::min<std::size_t>(
        {std::size_t(d.Tq), maxBind_ / tk4, maxBind_ / (std::size_t(d.dk) * 4 + 1),
         maxBind_ / (std::size_t(d.dv) * 4 + 1), std::size_t(kMaxGroups)}));
    rowTile_ = std::min(rowTile_, std::min(maxGroupsX_, maxGroupsY_ * tileRows_));
    rowTile_ = std::max(rowTile_, 1);

    // S = Q K^T / sqrt(d_k), head by head, in tiles of query rows.
    glUseProgram(scoresProg_.id());
    const float scale = 1.0f / std::sqrt(float(d.dk));
    glUniform1i(1, d.Tk);
    glUniform1i(2, d.dk);
    glUniform1f(3, scale);
    const int colGroups = ceilDiv(d.Tk, tileCols_);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 3, overflow_.id());
    for (int h = 0; h < d.H; ++h) {
      const int kOff = bind(1, k_, std::size_t(h) * d.Tk * d.dk, std::size_t(d.Tk) * d.dk);
      glUniform1i(5, kOff);
      glUniform1i(7, h);
      for (int r0 = 0; r0 < d.Tq; r0 += rowTile_) {
        const int rows = std::min(rowTile_, d.Tq - r0);
        const std::size_t qRow = std::size_t(h) * d.Tq + r0;
        glUniform1i(0, rows);
        glUniform1i(4, bind(0, q_, qRow * d.dk, std::size_t(rows) * d.dk));
        glUniform1i(6, bind(2, s_, qRow * d.Tk, std::size_t(rows) * d.Tk));
        dispatchTiles(colGroups, ceilDiv(rows, tileRows_));
      }
    }
    glMemoryBarrier(GL_ALL_BARRIER_BITS);  // readers may be shaders, copies or readback
    glUseProgram(0);                       // leave a shared (GUI) context as it was

    // Finite inputs can still overflow float32 in Q K^T; refuse as the CPU engine does. This
    // reads back H flags, so setInputs() waits for the GEMM.
    std::vector<std::uint32_t> flags(std::size_t(d.H));
    overflow_.download(flags.data(), flags.size() * 4);
    for (int h = 0; h < d.H; ++h) {
      if (flags[std::size_t(h)] != 0) {
        dims_ = Dims{};
        res_ = AttentionResult{};
        throw InputError("Q K^T overflows float32 in head " + std::to_string(h) +
                         " (inputs too large; rescale Q or K)");
      }
    }
  }

  void softmax(const AttentionParams& p, const std::vector<int>& heads) override {
    current();
    const Dims d = dims_;
    if (d.H == 0) throw InputError("GPU backend: softmax() before setInputs()");
    validateParams(p, d.H, d.Tq, d.Tk);
    const MaskSpec& m = p.mask;
    int customKind = 0;
    if (m.customKind == MaskSpec::Custom::Allow) customKind = 1;
    if (m.customKind == MaskSpec::Custom::Bias) customKind = 2;
    if (customKind != 0) {
      ensure(custom_, m.custom.size() * 4, "the custom mask");
      custom_.upload(m.custom.data.data(), m.custom.size() * 4);
    }
    const std::vector<float> slopes = m.alibi ? alibiSlopes(d.H) : std::vector<float>{};
    // Documents: one id per key. The expression: its grid as 0/1 floats, uploaded when it changes.
    if (!m.docs.empty()) {
      ensure(docs_, m.docs.size() * 4, "the document ids");
      docs_.upload(m.docs.data(), m.docs.size() * 4);
    }
    const ExprGrid* grid = exprGrid(m, d.H, d.Tq, d.Tk);
    if (grid && grid != exprUploaded_.get()) {
      const std::vector<float> cells(grid->allowed.begin(), grid->allowed.end());
      ensure(expr_, cells.size() * 4, "the expression mask");
      expr_.upload(cells.data(), cells.size() * 4);
      exprUploaded_ = m.exprCache;
    }

    glUseProgram(softmaxProg_.id());
    glUniform1i(0, d.Tq);
    glUniform1i(1, d.Tk);
    // As the CPU: multiply by 1/tau unless it overflows, then divide by tau.
    const float invTau = 1.0f / p.temperature;
    const bool divide = !std::isfinite(invTau);
    glUniform1f(7, divide ? 1.0f : invTau);
    glUniform1f(16, p.temperature);
    glUniform1i(17, divide ? 1 : 0);
    glUniform1i(8, m.causal ? 1 : 0);
    glUniform1i(9, m.window);
    glUniform1i(10, m.prefix);
    glUniform1i(11, m.sink);
    glUniform1i(12, m.pad);
    glUniform1i(13, m.alibi ? 1 : 0);
    glUniform1i(15, customKind);
    glUniform1i(18, m.chunk);
    glUniform1f(19, m.softcap);
    glUniform1i(20, m.docs.empty() ? 0 : 1);
    glUniform1i(21, grid ? 1 : 0);
    if (!m.docs.empty()) {
      glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 4, docs_.id(), 0, GLsizeiptr(m.docs.size() * 4));
    } else {
      glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 4, dummy_.id(), 0, 16);
    }
    for (int h : headList(heads)) {
      glUniform1f(14, m.alibi ? slopes[std::size_t(h)] : 0.0f);
      const int ch = (customKind != 0 && m.custom.heads > 1) ? h : 0;
      for (int r0 = 0; r0 < d.Tq; r0 += rowTile_) {
        const int rows = std::min(rowTile_, d.Tq - r0);
        const std::size_t row = std::size_t(h) * d.Tq + r0;
        const std::size_t n = std::size_t(rows) * d.Tk;
        glUniform1i(2, r0);
        glUniform1i(3, bind(0, s_, row * d.Tk, n));
        glUniform1i(4, bind(1, w_, row * d.Tk, n));
        if (customKind != 0) {
          glUniform1i(5, bind(2, custom_, (std::size_t(ch) * d.Tq + r0) * d.Tk, n));
        } else {
          glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 2, dummy_.id(), 0, 16);
          glUniform1i(5, 0);
        }
        if (grid) {
          const int eh = grid->heads == 1 ? 0 : h;
          glUniform1i(22, bind(5, expr_, (std::size_t(eh) * d.Tq + r0) * d.Tk, n));
        } else {
          glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 5, dummy_.id(), 0, 16);
          glUniform1i(22, 0);
        }
        glUniform1i(6, bind(3, rows_, row * 4, std::size_t(rows) * 4));
        glDispatchCompute(GLuint(rows), 1, 1);
      }
    }
    glMemoryBarrier(GL_ALL_BARRIER_BITS);  // readers may be shaders, copies or readback
    glUseProgram(0);                       // leave a shared (GUI) context as it was
    weightsReady_ = true;
  }

  void output(const std::vector<int>& heads) override {
    current();
    const Dims d = dims_;
    if (d.H == 0) throw InputError("GPU backend: output() before setInputs()");
    glUseProgram(outputProg_.id());
    glUniform1i(1, d.dv);
    glUniform1i(2, d.Tk);
    glUniform1f(3, 1.0f);
    const int colGroups = ceilDiv(d.dv, tileCols_);
    for (int h : headList(heads)) {
      glUniform1i(5, bind(1, v_, std::size_t(h) * d.Tk * d.dv, std::size_t(d.Tk) * d.dv));
      for (int r0 = 0; r0 < d.Tq; r0 += rowTile_) {
        const int rows = std::min(rowTile_, d.Tq - r0);
        const std::size_t row = std::size_t(h) * d.Tq + r0;
        glUniform1i(0, rows);
        glUniform1i(4, bind(0, w_, row * d.Tk, std::size_t(rows) * d.Tk));
        glUniform1i(6, bind(2, o_, row * d.dv, std::size_t(rows) * d.dv));
        dispatchTiles(colGroups, ceilDiv(rows, tileRows_));
      }
    }
    glMemoryBarrier(GL_ALL_BARRIER_BITS);  // readers may be shaders, copies or readback
    glUseProgram(0);                       // leave a shared (GUI) context as it was
  }

  const AttentionResult& result(unsigned stages) override {
    current();
    const Dims d = dims_;
    res_.dims = d;
    const std::size_t hq = std::size_t(d.H) * d.Tq;
    if (d.H == 0) return res_;
    auto fetch = [&](Tensor3& t, const GlBuffer& b, int cols) {
      if (!(t.heads == d.H && t.rows == d.Tq && t.cols == cols)) t = Tensor3(d.H, d.Tq, cols);
      b.download(t.data.data(), t.size() * 4);
    };
    if (stages & kStageScaled) fetch(res_.scaled, s_, d.Tk);
    if (stages & kStageWeights) fetch(res_.weights, w_, d.Tk);
    if (stages & kStageOutput) fetch(res_.output, o_, d.dv);
    if (stages & kStageRows) {
      std::vector<float> raw(hq * 4);
      rows_.download(raw.data(), raw.size() * 4);
      res_.rows.assign(hq, RowStats{});
      for (std::size_t r = 0; r < hq; ++r) {
        RowStats& st = res_.rows[r];
        std::int32_t arg;
        std::memcpy(&arg, &raw[r * 4 + 2], 4);
        st.argmax = arg;
        st.fullyMasked = arg < 0;
        st.sum = raw[r * 4 + 0];
        st.max = raw[r * 4 + 1];
        st.entropy = raw[r * 4 + 3];
      }
    }
    return res_;
  }

 private:
  void current() {
    if (ctx_) ctx_->makeCurrent();
  }

  void ensure(GlBuffer& b, std::size_t bytes, const char* what) {
    if (b.id() != 0 && b.bytes() >= bytes) return;
    b = GlBuffer();
    b = GlBuffer(bytes, what);
  }

  // Binds `count` floats of `buf` from float `offset` to SSBO `binding`. The range starts at the
  // aligned-down byte offset; the returned shift (in floats) locates `offset` inside it.
  int bind(GLuint binding, const GlBuffer& buf, std::size_t offset, std::size_t count) {
    const std::size_t byteOff = offset * 4;
    const std::size_t start = byteOff / align_ * align_;
    const std::size_t size = byteOff + std::max<std::size_t>(count, 1) * 4 - start;
    glBindBufferRange(GL_SHADER_STORAGE_BUFFER, binding, buf.id(), GLintptr(start),
                      GLsizeiptr(size));
    return int((byteOff - start) / 4);
  }

  void dispatchTiles(int gx, int gy) {
    if (gx > maxGroupsX_) {
      throw InputError("GPU backend: " + std::to_string(gx) +
                       " column tiles exceed GL_MAX_COMPUTE_WORK_GROUP_COUNT");
    }
    glDispatchCompute(GLuint(gx), GLuint(gy), 1);
  }

  std::vector<int> headList(const std::vector<int>& heads) const {
    std::vector<int> out;
    if (heads.empty()) {
      for (int h = 0; h < dims_.H; ++h) out.push_back(h);
      return out;
    }
    for (int h : heads) {
      if (h < 0 || h >= dims_.H) {
        throw InputError("GPU backend: head " + std::to_string(h) + " out of range [0, " +
                         std::to_string(dims_.H) + ")");
      }
      out.push_back(h);
    }
    return out;
  }

  // Declared first so that it is destroyed last, after every GL object below.
  std::unique_ptr<gpu::EglContext> ctx_;
  std::string renderer_;
  std::size_t align_ = 4;
  std::size_t maxBind_ = 0;
  int maxGroupsX_ = kMaxGroups, maxGroupsY_ = kMaxGroups;
  GlProgram scoresProg_, outputProg_, softmaxProg_;
  GlBuffer dummy_;
  GlBuffer q_, k_, v_;                            // [H,T_q,d_k], [H,T_k,d_k], [H,T_k,d_v]
  GlBuffer s_, w_;                                // [H,T_q,T_k]
  GlBuffer o_;                                    // [H,T_q,d_v]
  GlBuffer rows_;                                 // [H*T_q, 4]
  GlBuffer custom_;                               // [1 or H, T_q, T_k]
  GlBuffer docs_;                                 // [T_k] int: document ids
  GlBuffer expr_;                                 // [1 or H, T_q, T_k] 0/1: the expression's grid
  std::shared_ptr<const ExprGrid> exprUploaded_;  // the grid expr_ holds
  GlBuffer overflow_;                             // [H] uint: Q K^T overflowed in that head
  Dims dims_;
  int rowTile_ = 1;
  int tileRows_ = 64, tileCols_ = 64;  // BM, BN of matmul.comp as compiled
  bool weightsReady_ = false;
  AttentionResult res_;
};

}  // namespace

std::unique_ptr<GpuEngine> makeGpuEngineOnCurrentContext() {
  return std::make_unique<GpuEngineImpl>(nullptr);
}

std::unique_ptr<GpuEngine> makeGpuEngineHeadless() {
  auto ctx = gpu::EglContext::create();
  return std::make_unique<GpuEngineImpl>(std::move(ctx));
}

bool isSoftwareRenderer(const std::string& r) {
  return r.find("llvmpipe") != std::string::npos || r.find("softpipe") != std::string::npos ||
         r.find("SwiftShader") != std::string::npos;
}

}  // namespace attnviz
