// Fused CPU kernels for rl-values as MLX primitives: RMSNorm, silu(g)*u and a masked softmax,
// forward and backward, and the LM head's row statistics (log-sum-exp, entropy, the softmax
// gradient) over (rows, vocabulary chunk) logits.
//
// Each op is an mlx::core::Primitive whose eval_cpu enqueues its work on the primitive's CPU
// stream through MLX's command encoder, so it is ordered with the stream's other ops. Inside that
// task the rows are split over a small persistent thread pool (large inputs only), and each row
// loop is compiled twice (x86-64-v3 = AVX2+FMA, and the baseline) with GCC's target_clones; the
// loader picks the clone the CPU supports. float32 only: the Python side calls these only for
// float32 inputs on the CPU backend. No GPU implementation: eval_gpu throws.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace mx = mlx::core;
namespace nb = nanobind;
using namespace nb::literals;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__APPLE__)
#define RL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define RL_CLONES
#endif

namespace rl {

// ---------------------------------------------------------------------------------------------
// Thread pool: the calling thread plus (cores - 1) workers, woken per parallel_for.

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) {
      threads_.emplace_back([this] { loop(); });
    }
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs fn(task) for task in [0, n_tasks). A second caller while a job runs (another CPU
  // stream) does its tasks on its own thread instead of waiting.
  void run(int n_tasks, const std::function<void(int)>& fn) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock() || threads_.empty() || n_tasks <= 1) {
      for (int t = 0; t < n_tasks; ++t) fn(t);
      return;
    }
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &fn;
      n_tasks_ = n_tasks;
      next_.store(0);
      active_ = static_cast<int>(threads_.size());
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [this] { return active_ == 0; });
    job_ = nullptr;
  }

 private:
  void work() {
    for (int t = next_.fetch_add(1); t < n_tasks_; t = next_.fetch_add(1)) (*job_)(t);
  }
  void loop() {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      work();
      {
        std::lock_guard<std::mutex> lk(m_);
        if (--active_ == 0) done_cv_.notify_one();
      }
    }
  }

  std::vector<std::thread> threads_;
  std::mutex m_, busy_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<int> next_{0};
  int n_tasks_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int pool_threads() {
  if (const char* env = std::getenv("RL_VALUES_CPU_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
  static Pool p(pool_threads() - 1);
  return p;
}

// Below this many elements an op runs on the stream's thread alone: waking a worker costs more.
constexpr int64_t kParallelMin = 1 << 16;

// fn(row_begin, row_end, task) over [0, rows) in at most pool().size() contiguous ranges.
template <class F>
void parallel_rows(int64_t rows, int64_t cols, F&& fn) {
  int n_tasks = (rows * cols < kParallelMin) ? 1 : static_cast<int>(std::min<int64_t>(pool().size(), rows));
  if (n_tasks <= 1) {
    fn(int64_t{0}, rows, 0);
    return;
  }
  int64_t per = (rows + n_tasks - 1) / n_tasks;
  pool().run(n_tasks, [&](int t) {
    int64_t r0 = t * per, r1 = std::min(rows, r0 + per);
    if (r0 < r1) fn(r0, r1, t);
  });
}

// ---------------------------------------------------------------------------------------------
// Row kernels (vectorized by the compiler: omp simd reductions, a polynomial exp without calls).

// exp(x) for float32: 2^n by exponent bits times a degree-7 Taylor polynomial for 2^f, with n
// the nearest integer (the 1.5 * 2^23 rounding trick) and f in [-0.5, 0.5]. Relative error
// ~1e-7 after rounding; the exponent is clamped to [-126, 126]. Branch-free so the loops that
// call it vectorize (with -fno-trapping-math the clamps become min/max instructions).
#if defined(__GNUC__)
#define RL_INLINE inline __attribute__((always_inline))
#else
#define RL_INLINE inline
#endif

RL_INLINE float exp_poly(float x) {
  float t = x * 1.4426950408889634f;
  t = t < -126.0f ? -126.0f : t;
  t = t > 126.0f ? 126.0f : t;
  float n = (t + 12582912.0f) - 12582912.0f;
  float f = t - n;
  float p = 1.5252733804059840e-05f;
  p = p * f + 1.5403530393381609e-04f;
  p = p * f + 1.3333558146428443e-03f;
  p = p * f + 9.6181291076284772e-03f;
  p = p * f + 5.5504108664821580e-02f;
  p = p * f + 2.4022650695910071e-01f;
  p = p * f + 6.9314718055994531e-01f;
  p = p * f + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

RL_CLONES
void rms_rows(const float* x, const float* w, float* y, int64_t r0, int64_t r1, int64_t d,
              float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
    float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * w[i];
  }
}

// dx = inv * (g*w - xn * mean(g*w*xn)), xn = x * inv; dw_part += g * xn.
RL_CLONES
void rms_bwd_rows(const float* x, const float* w, const float* g, float* dx, float* dw_part,
                  int64_t r0, int64_t r1, int64_t d, float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * d;
    const float* gr = g + r * d;
    float* dxr = dx + r * d;
    float ss = 0.0f, gwx = 0.0f;
#pragma omp simd reduction(+ : ss, gwx)
    for (int64_t i = 0; i < d; ++i) {
      ss += xr[i] * xr[i];
      gwx += gr[i] * w[i] * xr[i];
    }
    float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
    // dx_i = inv * g_i w_i - x_i * inv^3 * mean(g w x)
    float c = gwx * inv * inv / static_cast<float>(d);
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) dxr[i] = inv * (gr[i] * w[i] - xr[i] * c);
    if (dw_part != nullptr) {
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) dw_part[i] += gr[i] * xr[i] * inv;
    }
  }
}

RL_CLONES
void silu_mul_span(const float* g, const float* u, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] * u[i] / (1.0f + exp_poly(-g[i]));
}

RL_CLONES
void silu_mul_bwd_span(const float* g, const float* u, const float* c, float* dg, float* du,
                       int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float s = 1.0f / (1.0f + exp_poly(-g[i]));
    dg[i] = c[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    du[i] = c[i] * g[i] * s;
  }
}

// softmax over the keys where mask is set, 0 elsewhere; a row with no key set is all zeros.
// mrow[j * ms] reads the (possibly broadcast, strided) mask.
RL_CLONES
void masked_softmax_row(const float* s, const bool* mrow, int64_t ms, float* p, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float mx = kNegInf;
  if (ms == 1) {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, mrow[j] ? s[j] : kNegInf);
  } else {
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, mrow[j * ms] ? s[j] : kNegInf);
  }
  if (mx == kNegInf) {
    std::fill(p, p + n, 0.0f);
    return;
  }
  float sum = 0.0f;
  if (ms == 1) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      float e = mrow[j] ? exp_poly(s[j] - mx) : 0.0f;
      p[j] = e;
      sum += e;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      float e = mrow[j * ms] ? exp_poly(s[j] - mx) : 0.0f;
      p[j] = e;
      sum += e;
    }
  }
  float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
}

// ds = p * (c - sum(c * p)) per row.
RL_CLONES
void softmax_bwd_rows(const float* p, const float* c, float* ds, int64_t r0, int64_t r1,
                      int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* pr = p + r * n;
    const float* cr = c + r * n;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < n; ++j) dot += pr[j] * cr[j];
    float* dr = ds + r * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (cr[j] - dot);
  }
}

// Per row of z: lse = m + log s, ent = log s + sum(e (m - z)) / s, e = exp(z - m), s = sum e.
RL_CLONES
void lse_entropy_rows(const float* z, float* lse, float* ent, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* zr = z + r * n;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) m = std::max(m, zr[j]);
    float sum = 0.0f, wsum = 0.0f;
    if (ent != nullptr) {
#pragma omp simd reduction(+ : sum, wsum)
      for (int64_t j = 0; j < n; ++j) {
        float e = exp_poly(zr[j] - m);
        sum += e;
        wsum += e * (m - zr[j]);
      }
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) sum += exp_poly(zr[j] - m);
    }
    float log_s = std::log(sum);
    lse[r] = m + log_s;
    if (ent != nullptr) ent[r] = log_s + wsum / sum;
  }
}

// out = exp(z - lse) * (c - gh * (z - lse)) per row (gh = 0: the plain softmax times c).
RL_CLONES
void softmax_grad_rows(const float* z, const float* lse, const float* c, const float* gh,
                       float* out, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* zr = z + r * n;
    float* o = out + r * n;
    float l = lse[r], cr = c[r], g = gh[r];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      float d = zr[j] - l;
      o[j] = exp_poly(d) * (cr - g * d);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Primitives

void check_f32(const mx::array& a, const char* op) {
  if (a.dtype() != mx::float32) {
    throw std::invalid_argument(std::string(op) + ": float32 inputs only");
  }
}

void alloc(mx::array& out) { out.set_data(mx::allocator::malloc(out.nbytes())); }

// Every primitive here runs on the CPU only and, unless it has parameters, is equivalent to any
// other of its class (so MLX's graph simplification may merge two identical calls).
class CpuPrimitive : public mx::Primitive {
 public:
  using mx::Primitive::Primitive;
  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error(std::string("rl_cpu_ext.") + name() + " has no GPU implementation");
  }
  bool is_equivalent(const mx::Primitive&) const override { return true; }
};

class RMSNorm : public CpuPrimitive {
 public:
  RMSNorm(mx::Stream s, float eps) : CpuPrimitive(s), eps_(eps) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  std::vector<mx::array> vjp(const std::vector<mx::array>& primals,
                             const std::vector<mx::array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<mx::array>& outputs) override;
  const char* name() const override { return "RLRMSNorm"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return eps_ == static_cast<const RMSNorm&>(other).eps_;
  }

 private:
  float eps_;
};

class RMSNormVJP : public CpuPrimitive {
 public:
  RMSNormVJP(mx::Stream s, float eps, bool want_dw) : CpuPrimitive(s), eps_(eps), want_dw_(want_dw) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  const char* name() const override { return "RLRMSNormVJP"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    auto& o = static_cast<const RMSNormVJP&>(other);
    return eps_ == o.eps_ && want_dw_ == o.want_dw_;
  }

 private:
  float eps_;
  bool want_dw_;
};

class SiluMul : public CpuPrimitive {
 public:
  explicit SiluMul(mx::Stream s) : CpuPrimitive(s) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  std::vector<mx::array> vjp(const std::vector<mx::array>& primals,
                             const std::vector<mx::array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<mx::array>& outputs) override;
  const char* name() const override { return "RLSiluMul"; }
};

class SiluMulVJP : public CpuPrimitive {
 public:
  explicit SiluMulVJP(mx::Stream s) : CpuPrimitive(s) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  const char* name() const override { return "RLSiluMulVJP"; }
};

class MaskedSoftmax : public CpuPrimitive {
 public:
  explicit MaskedSoftmax(mx::Stream s) : CpuPrimitive(s) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  std::vector<mx::array> vjp(const std::vector<mx::array>& primals,
                             const std::vector<mx::array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<mx::array>& outputs) override;
  const char* name() const override { return "RLMaskedSoftmax"; }
};

class SoftmaxVJP : public CpuPrimitive {
 public:
  explicit SoftmaxVJP(mx::Stream s) : CpuPrimitive(s) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  const char* name() const override { return "RLSoftmaxVJP"; }
};

class LseEntropy : public CpuPrimitive {
 public:
  LseEntropy(mx::Stream s, bool want_ent) : CpuPrimitive(s), want_ent_(want_ent) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  const char* name() const override { return "RLLseEntropy"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return want_ent_ == static_cast<const LseEntropy&>(other).want_ent_;
  }

 private:
  bool want_ent_;
};

class SoftmaxGrad : public CpuPrimitive {
 public:
  explicit SoftmaxGrad(mx::Stream s) : CpuPrimitive(s) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  const char* name() const override { return "RLSoftmaxGrad"; }
};

// ---- ops (graph building): inputs made row-contiguous float32 on the CPU stream

mx::Stream cpu_stream(mx::StreamOrDevice s) {
  mx::Stream st = mx::to_stream(s);
  if (st.device != mx::Device::cpu) {
    throw std::invalid_argument("rl_cpu_ext ops run on the CPU only");
  }
  return st;
}

mx::array rms_norm(const mx::array& x, const mx::array& w, float eps, mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  check_f32(x, "rms_norm");
  check_f32(w, "rms_norm");
  if (w.ndim() != 1 || x.ndim() < 1 || x.shape(-1) != w.shape(0)) {
    throw std::invalid_argument("rms_norm: weight must be 1-D with x.shape[-1] entries");
  }
  auto xc = mx::contiguous(x, false, st);
  auto wc = mx::contiguous(w, false, st);
  return mx::array(x.shape(), mx::float32, std::make_shared<RMSNorm>(st, eps), {xc, wc});
}

mx::array silu_mul(const mx::array& g, const mx::array& u, mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  check_f32(g, "silu_mul");
  check_f32(u, "silu_mul");
  if (g.shape() != u.shape()) throw std::invalid_argument("silu_mul: g and u shapes differ");
  auto gc = mx::contiguous(g, false, st);
  auto uc = mx::contiguous(u, false, st);
  return mx::array(g.shape(), mx::float32, std::make_shared<SiluMul>(st), {gc, uc});
}

// The mask is broadcast (a strided view, no copy) to the scores' shape.
mx::array masked_softmax(const mx::array& scores, const mx::array& mask,
                         mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  check_f32(scores, "masked_softmax");
  if (mask.dtype() != mx::bool_) throw std::invalid_argument("masked_softmax: mask must be bool");
  if (scores.ndim() < 1) throw std::invalid_argument("masked_softmax: scores need an axis");
  auto sc = mx::contiguous(scores, false, st);
  auto m = mx::broadcast_to(mask, scores.shape(), st);
  return mx::array(scores.shape(), mx::float32, std::make_shared<MaskedSoftmax>(st), {sc, m});
}

void check_rows(const mx::array& z, const char* op) {
  check_f32(z, op);
  if (z.ndim() != 2) throw std::invalid_argument(std::string(op) + ": z must be (rows, cols)");
}

void check_per_row(const mx::array& a, const mx::array& z, const char* op) {
  check_f32(a, op);
  if (a.ndim() != 1 || a.shape(0) != z.shape(0)) {
    throw std::invalid_argument(std::string(op) + ": per-row inputs must be (rows,)");
  }
}

// (lse, entropy) per row of float32 (rows, cols) logits; entropy is zeros unless want_ent.
std::vector<mx::array> lse_entropy(const mx::array& z, bool want_ent, mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  check_rows(z, "lse_entropy");
  auto zc = mx::contiguous(z, false, st);
  mx::Shape rows = {z.shape(0)};
  return mx::array::make_arrays({rows, rows}, {mx::float32, mx::float32},
                                std::make_shared<LseEntropy>(st, want_ent), {zc});
}

// exp(z - lse) * (c - gh * (z - lse)), lse, c and gh per row.
mx::array softmax_grad(const mx::array& z, const mx::array& lse, const mx::array& c,
                       const mx::array& gh, mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  check_rows(z, "softmax_grad");
  for (auto* a : {&lse, &c, &gh}) check_per_row(*a, z, "softmax_grad");
  std::vector<mx::array> in = {mx::contiguous(z, false, st), mx::contiguous(lse, false, st),
                               mx::contiguous(c, false, st), mx::contiguous(gh, false, st)};
  return mx::array(z.shape(), mx::float32, std::make_shared<SoftmaxGrad>(st), std::move(in));
}

// ---- eval_cpu

void RMSNorm::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& x = in[0];
  auto& w = in[1];
  auto& y = out[0];
  alloc(y);
  auto& enc = mx::cpu::get_command_encoder(stream());
  enc.set_input_array(x);
  enc.set_input_array(w);
  enc.set_output_array(y);
  int64_t d = x.shape(-1), rows = d ? static_cast<int64_t>(x.size()) / d : 0;
  enc.dispatch([xp = x.data<float>(), wp = w.data<float>(), yp = y.data<float>(), rows, d,
                eps = eps_]() {
    parallel_rows(rows, d, [&](int64_t r0, int64_t r1, int) { rms_rows(xp, wp, yp, r0, r1, d, eps); });
  });
}

void RMSNormVJP::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& x = in[0];
  auto& w = in[1];
  auto& g = in[2];
  auto& dx = out[0];
  auto& dw = out[1];
  alloc(dx);
  alloc(dw);
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (auto& a : in) enc.set_input_array(a);
  enc.set_output_array(dx);
  enc.set_output_array(dw);
  int64_t d = x.shape(-1), rows = d ? static_cast<int64_t>(x.size()) / d : 0;
  enc.dispatch([xp = x.data<float>(), wp = w.data<float>(), gp = g.data<float>(),
                dxp = dx.data<float>(), dwp = dw.data<float>(), rows, d, eps = eps_,
                want_dw = want_dw_]() {
    int tasks = pool().size();
    std::vector<float> parts(want_dw ? static_cast<size_t>(tasks) * d : 0, 0.0f);
    parallel_rows(rows, d, [&](int64_t r0, int64_t r1, int t) {
      rms_bwd_rows(xp, wp, gp, dxp, want_dw ? parts.data() + t * d : nullptr, r0, r1, d, eps);
    });
    std::fill(dwp, dwp + d, 0.0f);
    if (want_dw) {
      for (int t = 0; t < tasks; ++t)
        for (int64_t i = 0; i < d; ++i) dwp[i] += parts[t * d + i];
    }
  });
}

std::vector<mx::array> RMSNorm::vjp(const std::vector<mx::array>& primals,
                                    const std::vector<mx::array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<mx::array>&) {
  bool want_dw = std::find(argnums.begin(), argnums.end(), 1) != argnums.end();
  auto st = stream();
  auto g = mx::contiguous(mx::astype(cotangents[0], mx::float32, st), false, st);
  auto outs = mx::array::make_arrays({primals[0].shape(), primals[1].shape()},
                                     {mx::float32, mx::float32},
                                     std::make_shared<RMSNormVJP>(st, eps_, want_dw),
                                     {primals[0], primals[1], g});
  std::vector<mx::array> res;
  for (int a : argnums) res.push_back(outs[a == 0 ? 0 : 1]);
  return res;
}

void SiluMul::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& g = in[0];
  auto& u = in[1];
  auto& y = out[0];
  alloc(y);
  auto& enc = mx::cpu::get_command_encoder(stream());
  enc.set_input_array(g);
  enc.set_input_array(u);
  enc.set_output_array(y);
  int64_t n = static_cast<int64_t>(y.size());
  enc.dispatch([gp = g.data<float>(), up = u.data<float>(), yp = y.data<float>(), n]() {
    constexpr int64_t kSpan = 4096;
    int64_t spans = (n + kSpan - 1) / kSpan;
    parallel_rows(spans, kSpan, [&](int64_t s0, int64_t s1, int) {
      int64_t i0 = s0 * kSpan, i1 = std::min(n, s1 * kSpan);
      silu_mul_span(gp + i0, up + i0, yp + i0, i1 - i0);
    });
  });
}

void SiluMulVJP::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& g = in[0];
  auto& u = in[1];
  auto& c = in[2];
  alloc(out[0]);
  alloc(out[1]);
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (auto& a : in) enc.set_input_array(a);
  enc.set_output_array(out[0]);
  enc.set_output_array(out[1]);
  int64_t n = static_cast<int64_t>(g.size());
  enc.dispatch([gp = g.data<float>(), up = u.data<float>(), cp = c.data<float>(),
                dgp = out[0].data<float>(), dup = out[1].data<float>(), n]() {
    constexpr int64_t kSpan = 4096;
    int64_t spans = (n + kSpan - 1) / kSpan;
    parallel_rows(spans, kSpan, [&](int64_t s0, int64_t s1, int) {
      int64_t i0 = s0 * kSpan, i1 = std::min(n, s1 * kSpan);
      silu_mul_bwd_span(gp + i0, up + i0, cp + i0, dgp + i0, dup + i0, i1 - i0);
    });
  });
}

void MaskedSoftmax::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& sc = in[0];
  auto& m = in[1];
  auto& p = out[0];
  alloc(p);
  auto& enc = mx::cpu::get_command_encoder(stream());
  enc.set_input_array(sc);
  enc.set_input_array(m);
  enc.set_output_array(p);
  int64_t n = sc.shape(-1), rows = n ? static_cast<int64_t>(sc.size()) / n : 0;
  std::vector<int64_t> shape(m.shape().begin(), m.shape().end() - 1);
  std::vector<int64_t> strides(m.strides().begin(), m.strides().end() - 1);
  int64_t ms = m.strides().back();
  enc.dispatch([sp = sc.data<float>(), mp = m.data<bool>(), pp = p.data<float>(), rows, n, ms,
                shape = std::move(shape), strides = std::move(strides)]() {
    parallel_rows(rows, n, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t off = 0, rest = r;  // the mask row's offset: r's index over the leading axes
        for (int64_t a = static_cast<int64_t>(shape.size()) - 1; a >= 0; --a) {
          off += (rest % shape[a]) * strides[a];
          rest /= shape[a];
        }
        masked_softmax_row(sp + r * n, mp + off, ms, pp + r * n, n);
      }
    });
  });
}

void SoftmaxVJP::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& p = in[0];
  auto& c = in[1];
  auto& ds = out[0];
  alloc(ds);
  auto& enc = mx::cpu::get_command_encoder(stream());
  enc.set_input_array(p);
  enc.set_input_array(c);
  enc.set_output_array(ds);
  int64_t n = p.shape(-1), rows = n ? static_cast<int64_t>(p.size()) / n : 0;
  enc.dispatch([pp = p.data<float>(), cp = c.data<float>(), dp = ds.data<float>(), rows, n]() {
    parallel_rows(rows, n, [&](int64_t r0, int64_t r1, int) { softmax_bwd_rows(pp, cp, dp, r0, r1, n); });
  });
}

std::vector<mx::array> MaskedSoftmax::vjp(const std::vector<mx::array>& primals,
                                          const std::vector<mx::array>& cotangents,
                                          const std::vector<int>& argnums,
                                          const std::vector<mx::array>& outputs) {
  auto st = stream();
  std::vector<mx::array> res;
  for (int a : argnums) {
    if (a == 1) {
      res.push_back(mx::zeros_like(primals[1], st));
      continue;
    }
    auto c = mx::contiguous(mx::astype(cotangents[0], mx::float32, st), false, st);
    res.push_back(mx::array(outputs[0].shape(), mx::float32, std::make_shared<SoftmaxVJP>(st),
                            {outputs[0], c}));
  }
  return res;
}

void LseEntropy::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& z = in[0];
  alloc(out[0]);
  alloc(out[1]);
  auto& enc = mx::cpu::get_command_encoder(stream());
  enc.set_input_array(z);
  enc.set_output_array(out[0]);
  enc.set_output_array(out[1]);
  int64_t rows = z.shape(0), n = z.shape(1);
  enc.dispatch([zp = z.data<float>(), lp = out[0].data<float>(), ep = out[1].data<float>(), rows,
                n, want = want_ent_]() {
    if (!want) std::fill(ep, ep + rows, 0.0f);
    parallel_rows(rows, n, [&](int64_t r0, int64_t r1, int) {
      lse_entropy_rows(zp, lp, want ? ep : nullptr, r0, r1, n);
    });
  });
}

void SoftmaxGrad::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& z = in[0];
  alloc(out[0]);
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (auto& a : in) enc.set_input_array(a);
  enc.set_output_array(out[0]);
  int64_t rows = z.shape(0), n = z.shape(1);
  enc.dispatch([zp = z.data<float>(), lp = in[1].data<float>(), cp = in[2].data<float>(),
                gp = in[3].data<float>(), op = out[0].data<float>(), rows, n]() {
    parallel_rows(rows, n, [&](int64_t r0, int64_t r1, int) {
      softmax_grad_rows(zp, lp, cp, gp, op, r0, r1, n);
    });
  });
}

std::vector<mx::array> SiluMul::vjp(const std::vector<mx::array>& primals,
                                    const std::vector<mx::array>& cotangents,
                                    const std::vector<int>& argnums,
                                    const std::vector<mx::array>&) {
  auto st = stream();
  auto c = mx::contiguous(mx::astype(cotangents[0], mx::float32, st), false, st);
  auto outs = mx::array::make_arrays({primals[0].shape(), primals[1].shape()},
                                     {mx::float32, mx::float32},
                                     std::make_shared<SiluMulVJP>(st), {primals[0], primals[1], c});
  std::vector<mx::array> res;
  for (int a : argnums) res.push_back(outs[a]);
  return res;
}

// Which clone the loader picked, for the record.
std::string simd_level() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "x86-64-v3" : "baseline";
#else
  return "baseline";
#endif
}

}  // namespace rl

NB_MODULE(rl_cpu_ext, m) {
  m.doc() = "rl-values fused CPU kernels (MLX primitives with eval_cpu)";
  m.def("rms_norm", &rl::rms_norm, "x"_a, "weight"_a, "eps"_a, nb::kw_only(),
        "stream"_a = nb::none(), "x / sqrt(mean(x^2, -1) + eps) * weight, float32, CPU");
  m.def("silu_mul", &rl::silu_mul, "g"_a, "u"_a, nb::kw_only(), "stream"_a = nb::none(),
        "silu(g) * u, float32, CPU");
  m.def("masked_softmax", &rl::masked_softmax, "scores"_a, "mask"_a, nb::kw_only(),
        "stream"_a = nb::none(),
        "softmax over the last axis where mask (bool, broadcastable) is set; 0 elsewhere and "
        "in rows with no key set; float32, CPU");
  m.def("lse_entropy", &rl::lse_entropy, "z"_a, "want_ent"_a, nb::kw_only(),
        "stream"_a = nb::none(),
        "[log-sum-exp, entropy of the softmax] per row of float32 (rows, cols) logits; the "
        "entropy is zeros unless want_ent. No autodiff.");
  m.def("softmax_grad", &rl::softmax_grad, "z"_a, "lse"_a, "c"_a, "gh"_a, nb::kw_only(),
        "stream"_a = nb::none(),
        "exp(z - lse) * (c - gh * (z - lse)) with lse, c, gh per row; float32. No autodiff.");
  m.def("threads", [] { return rl::pool().size(); }, "threads an op may use");
  m.def("simd_level", &rl::simd_level, "the CPU level the kernels were dispatched for");
}
