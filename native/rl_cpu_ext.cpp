// Fused CPU kernels for rl-values as MLX primitives: RMSNorm, silu(g)*u and a masked softmax,
// forward and backward; decode attention (scores, masked softmax and values in one pass over
// the KV cache's view); rotate-half RoPE from cos/sin tables; and the LM head's row statistics
// (log-sum-exp, entropy, the softmax gradient) over (rows, vocabulary chunk) logits; and the
// numpy sampler's inverse-CDF draw per row of logits.
//
// Each op is an mlx::core::Primitive whose eval_cpu enqueues its work on the primitive's CPU
// stream through MLX's command encoder, so it is ordered with the stream's other ops. Inside that
// task the rows are split over a small persistent thread pool (large inputs only), and each row
// loop is compiled twice (x86-64-v3 = AVX2+FMA, and the baseline) with GCC's target_clones; the
// loader picks the clone the CPU supports. float32 only: the Python side calls these only for
// float32 inputs on the CPU backend. No GPU implementation: eval_gpu throws.

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// Inverse-CDF sampling per row of float32 logits z (the numpy sampler's draw, core/sampling.py):
// m = max z, e_j = exp((z_j - m) * inv_t) (0 below exp(-87), so a -inf logit never draws),
// total = sum e in double over 256-token blocks; the token is the first j whose cumulative mass
// exceeds u * total, found over the blocks' running sums and then inside one block; log-prob =
// (z_tok - m) * inv_t - log(total). A row holding NaN or +inf (or only -inf) gets token -1 and
// a NaN total, which the caller reports.
constexpr int64_t kSampleBlock = 256;

RL_CLONES
void draw_rows(const float* z, const double* u, float inv_t, int32_t* tok, float* logp,
                 float* total, int64_t r0, int64_t r1, int64_t n) {
  thread_local std::vector<float> e;
  thread_local std::vector<double> cum;
  const int64_t nb = (n + kSampleBlock - 1) / kSampleBlock;
  e.resize(n);
  cum.resize(nb);
  for (int64_t r = r0; r < r1; ++r) {
    const float* zr = z + r * n;
    float m = -std::numeric_limits<float>::infinity();
    int nans = 0;
#pragma omp simd reduction(max : m) reduction(+ : nans)
    for (int64_t j = 0; j < n; ++j) {
      m = std::max(m, zr[j]);
      nans += zr[j] != zr[j];
    }
    if (nans > 0 || !std::isfinite(m)) {
      tok[r] = -1;
      logp[r] = total[r] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    double acc = 0.0;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t j0 = b * kSampleBlock, j1 = std::min(n, j0 + kSampleBlock);
      float s = 0.0f;
      float* eb = e.data();
#pragma omp simd reduction(+ : s)
      for (int64_t j = j0; j < j1; ++j) {
        const float x = (zr[j] - m) * inv_t;
        const float v = x < -87.0f ? 0.0f : exp_poly(x);
        eb[j] = v;
        s += v;
      }
      acc += s;
      cum[b] = acc;
    }
    const double target = u[r] * acc;
    int64_t b = 0;
    while (b + 1 < nb && cum[b] <= target) ++b;
    double run = b > 0 ? cum[b - 1] : 0.0;
    const int64_t j0 = b * kSampleBlock, j1 = std::min(n, j0 + kSampleBlock);
    int64_t pick = j1 - 1;  // rounding can leave the target at the block's end
    for (int64_t j = j0; j < j1; ++j) {
      run += e[j];
      if (run > target) {
        pick = j;
        break;
      }
    }
    if (e[pick] == 0.0f) {  // the nearest earlier token with mass, else the first one
      int64_t j = pick;
      while (j >= 0 && e[j] == 0.0f) --j;
      if (j < 0) {
        j = pick;
        while (e[j] == 0.0f) ++j;  // the row's max has mass 1, so one exists
      }
      pick = j;
    }
    tok[r] = static_cast<int32_t>(pick);
    logp[r] = static_cast<float>(static_cast<double>((zr[pick] - m) * inv_t) - std::log(acc));
    total[r] = static_cast<float>(acc);
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

// Rotate-half RoPE on one row of hd floats: y = x * c + rot(x) * s, rot(x) = [x[h:], x[:h]],
// with the sign folded into s ([-sin, sin]), as cpu_ops' tables are built. Strides in elements
// (the unit-stride case vectorizes).
RL_CLONES
void rope_row(const float* x, int64_t xe, const float* c, int64_t ce, const float* s, int64_t se,
              float* y, int64_t hd) {
  const int64_t h = hd / 2;
  if (xe == 1 && ce == 1 && se == 1) {
#pragma omp simd
    for (int64_t t = 0; t < h; ++t) y[t] = x[t] * c[t] + x[t + h] * s[t];
#pragma omp simd
    for (int64_t t = h; t < hd; ++t) y[t] = x[t] * c[t] + x[t - h] * s[t];
    return;
  }
  for (int64_t t = 0; t < hd; ++t) {
    int64_t u = t < h ? t + h : t - h;
    y[t] = x[t * xe] * c[t * ce] + x[u * xe] * s[t * se];
  }
}

// Decode attention for one (batch row, kv head) block: the rep * L query rows sharing kv head g
// (row r = i * L + l is query head g * rep + i at query l; rows contiguous, hd floats each) over
// S keys read in place from the cache (key j at k + j * ks, value j at v + j * vs). The scores
// go to `sc` (R x S), become the masked softmax in place (row r's mask entry for key j at
// mask + i * mh + l * mq + j * mk), then out_r = sum_j p[r, j] v_j. Each key and value row is read
// from memory once and reused by the block's R query rows; the next block's rows are prefetched
// while this one computes (the cache's blocks sit `capacity` slots apart, which the hardware
// prefetcher does not guess).
struct AttnBlock {
  const float *q, *k, *v;
  const bool* mask;
  float *out, *sc;
  int64_t ks, vs, mh, mq, mk, rep, L, S, hd;
  float scale;
  const float* next_k;  // the next block's first key row, or null
};

RL_INLINE void prefetch_row(const float* p, int64_t n) {
#if defined(__GNUC__)
  for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
#endif
}

#if defined(__GNUC__) && defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define RL_VEC8 1
#endif
#endif

#ifdef RL_VEC8
// Eight float lanes (GCC/Clang vector extension): one AVX register in the x86-64-v3 clone, two
// SSE registers in the baseline one. The helpers are always inlined, so GCC's note that passing
// such a vector by value has another ABI without AVX (-Wpsabi) never applies.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float v8f __attribute__((vector_size(32)));
RL_INLINE v8f load8(const float* p) {
  v8f x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
// Lane u of the result: the sum of a[u]'s lanes (eight horizontal sums in 7 shuffle-adds).
RL_INLINE v8f hsum8(const v8f* a) {
  v8f x[4], y[2];
  for (int i = 0; i < 4; ++i) {
    x[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
           __builtin_shufflevector(a[2 * i], a[2 * i + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  }
  for (int i = 0; i < 2; ++i) {
    y[i] = __builtin_shufflevector(x[2 * i], x[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
           __builtin_shufflevector(x[2 * i], x[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  return __builtin_shufflevector(y[0], y[1], 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(y[0], y[1], 4, 5, 6, 7, 12, 13, 14, 15);
}
#endif

// sc[r * S + j] = scale * q_r . k_j for keys [j0, S): one dot at a time.
RL_INLINE void attn_scores_plain(const AttnBlock& a, int64_t hd, int64_t j0) {
  const int64_t R = a.rep * a.L;
  for (int64_t j = j0; j < a.S; ++j) {
    const float* kj = a.k + j * a.ks;
    for (int64_t r = 0; r < R; ++r) {
      const float* qr = a.q + r * hd;
      float d = 0.0f;
#pragma omp simd reduction(+ : d)
      for (int64_t t = 0; t < hd; ++t) d += qr[t] * kj[t];
      a.sc[r * a.S + j] = d * a.scale;
    }
  }
}

template <int HD>
RL_INLINE void attn_block(const AttnBlock& a) {
  const int64_t hd = HD > 0 ? HD : a.hd;
  const int64_t R = a.rep * a.L, S = a.S;
  int64_t j0 = 0;
#ifdef RL_VEC8
  if constexpr (HD > 0 && HD % 8 == 0) {
    // Eight keys at a time: eight independent FMA chains per query row, then one transposing
    // horizontal sum, instead of a dependent chain and a scalar sum per dot.
    for (; j0 + 8 <= S; j0 += 8) {
      for (int u = 0; u < 8; ++u) prefetch_row(a.v + (j0 + u) * a.vs, HD);
      for (int64_t r = 0; r < R; ++r) {
        const float* qr = a.q + r * HD;
        v8f acc[8] = {};
        for (int c = 0; c < HD; c += 8) {
          v8f qc = load8(qr + c);
          for (int u = 0; u < 8; ++u) acc[u] += qc * load8(a.k + (j0 + u) * a.ks + c);
        }
        v8f sums = hsum8(acc) * a.scale;
        std::memcpy(a.sc + r * S + j0, &sums, sizeof sums);
      }
    }
  }
#endif
  attn_scores_plain(a, hd, j0);
  for (int64_t r = 0; r < R; ++r) {
    const bool* mrow = a.mask + (r / a.L) * a.mh + (r % a.L) * a.mq;
    float* pr = a.sc + r * S;
    masked_softmax_row(pr, mrow, a.mk, pr, S);
  }
  for (int64_t r = 0; r < R; ++r) {
    const float* pr = a.sc + r * S;
    float* o = a.out + r * hd;
    const float* pf = r == 0 ? a.next_k : nullptr;  // spread over the first row's loop
    // A fixed head dim sums on the stack (kept in registers), the generic one in the output.
    float stack[HD > 0 ? HD : 1];
    float* acc = HD > 0 ? stack : o;
    std::fill(acc, acc + hd, 0.0f);
    for (int64_t j = 0; j < S; ++j) {
      if (pf != nullptr) prefetch_row(pf + j * a.ks, hd);
      const float p = pr[j];
      if (p == 0.0f) continue;  // masked slots (left padding): skipped, never 0 * garbage
      const float* vj = a.v + j * a.vs;
#pragma omp simd
      for (int64_t t = 0; t < hd; ++t) acc[t] += p * vj[t];
    }
    if constexpr (HD > 0) std::memcpy(o, acc, sizeof stack);
  }
}

RL_CLONES void attn_block_64(const AttnBlock& a) { attn_block<64>(a); }
RL_CLONES void attn_block_128(const AttnBlock& a) { attn_block<128>(a); }
RL_CLONES void attn_block_any(const AttnBlock& a) { attn_block<0>(a); }

// ---------------------------------------------------------------------------------------------
// Prefill attention (many queries per row): one task per (batch row, kv head, run of kTile-query
// tiles) in the forward, per (batch row, kv head) in the backward. A tile's scores over the keys
// its mask lets any of its rows see (a causal or left-padded mask rules the rest out) are
// computed as small matrix products in registers, turned into probabilities (exact two-pass
// softmax over the tile's key range, the log-sum-exp kept for the backward), and multiplied by
// the values. The matrix products are one register-tiled loop (`gemm`): 6 rows x 16 columns of
// C in twelve 8-lane accumulators, each step loading two vectors of B and broadcasting six
// scalars of A, so every loaded key or value serves several query rows.

constexpr int64_t kTile = 16;

#ifdef RL_VEC8
template <int MR, int NV>
RL_INLINE void gemm_tile(const float* a, int64_t am, int64_t ak, const float* b, int64_t ldb,
                         float* c, int64_t ldc, int64_t K, bool accumulate) {
  v8f acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int u = 0; u < NV; ++u) acc[i][u] = accumulate ? load8(c + i * ldc + 8 * u) : v8f{};
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    v8f bv[NV];
    for (int u = 0; u < NV; ++u) bv[u] = load8(bk + 8 * u);
    for (int i = 0; i < MR; ++i) {
      const float s = a[i * am + k * ak];
      for (int u = 0; u < NV; ++u) acc[i][u] += s * bv[u];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int u = 0; u < NV; ++u) std::memcpy(c + i * ldc + 8 * u, &acc[i][u], sizeof(v8f));
}

template <int NV>
RL_INLINE void gemm_cols(const float* a, int64_t am, int64_t ak, const float* b, int64_t ldb,
                         float* c, int64_t ldc, int64_t M, int64_t K, bool accumulate) {
  int64_t m = 0;
  for (; m + 6 <= M; m += 6) gemm_tile<6, NV>(a + m * am, am, ak, b, ldb, c + m * ldc, ldc, K, accumulate);
  for (; m + 4 <= M; m += 4) gemm_tile<4, NV>(a + m * am, am, ak, b, ldb, c + m * ldc, ldc, K, accumulate);
  for (; m + 2 <= M; m += 2) gemm_tile<2, NV>(a + m * am, am, ak, b, ldb, c + m * ldc, ldc, K, accumulate);
  for (; m < M; ++m) gemm_tile<1, NV>(a + m * am, am, ak, b, ldb, c + m * ldc, ldc, K, accumulate);
}
#endif

// C (M x N, row stride ldc) = (or +=, with `accumulate`) sum_k A(m, k) B(k, n): A(m, k) at
// a[m * am + k * ak], B's row k at b + k * ldb with unit stride along n.
RL_INLINE void gemm(const float* a, int64_t am, int64_t ak, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t M, int64_t N, int64_t K, bool accumulate) {
  int64_t n = 0;
#ifdef RL_VEC8
  for (; n + 16 <= N; n += 16) gemm_cols<2>(a, am, ak, b + n, ldb, c + n, ldc, M, K, accumulate);
  for (; n + 8 <= N; n += 8) gemm_cols<1>(a, am, ak, b + n, ldb, c + n, ldc, M, K, accumulate);
#endif
  for (int64_t m = 0; m < M; ++m) {
    float* cm = c + m * ldc;
    if (!accumulate) std::fill(cm + n, cm + N, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float s = a[m * am + k * ak];
      const float* bk = b + k * ldb;
#pragma omp simd
      for (int64_t j = n; j < N; ++j) cm[j] += s * bk[j];
    }
  }
}

struct PrefillArgs {
  const float *q, *k, *v;
  const bool* m;
  float *o, *lse;                        // forward outputs (the backward reads them)
  const float *dout, *dlse;              // backward: the cotangents
  float *dq, *dk, *dv;                   // backward outputs
  int64_t B, H, L, hd, Hkv, S, rep;
  std::array<int64_t, 3> kst, vst;       // element strides of k and v over (B, Hkv, S)
  std::array<int64_t, 4> mst;            // the broadcast mask's strides over (B, H, L, S)
  float scale;
  int64_t tiles() const { return (L + kTile - 1) / kTile; }
  const bool* mrow(int64_t b, int64_t h, int64_t l) const {
    return m + b * mst[0] + h * mst[1] + l * mst[2];
  }
};

// [jlo, jhi): the keys some query row in [l0, l0 + lt) of kv head g's query heads may see.
void key_range(const PrefillArgs& p, int64_t b, int64_t g, int64_t l0, int64_t lt, int64_t& jlo,
               int64_t& jhi) {
  jlo = p.S;
  jhi = 0;
  const int64_t heads = p.mst[1] == 0 ? 1 : p.rep, ms = p.mst[3];
  for (int64_t i = 0; i < heads; ++i) {
    for (int64_t l = l0; l < l0 + lt; ++l) {
      const bool* row = p.mrow(b, g * p.rep + i, l);
      int64_t j = 0;
      while (j < jlo && !row[j * ms]) ++j;
      jlo = std::min(jlo, j);
      int64_t e = p.S;
      while (e > jhi && !row[(e - 1) * ms]) --e;
      jhi = std::max(jhi, e);
    }
  }
  if (jhi < jlo) jhi = jlo;
}

// kt (hd rows ld apart) = the transposed keys [j0, j0 + n) of one (row, kv head), zeros in
// columns [n, width).
void transpose_keys(const float* k, int64_t ks, int64_t j0, int64_t n, int64_t hd, float* kt,
                    int64_t ld, int64_t width) {
  for (int64_t d = 0; d < hd; ++d) std::fill(kt + d * ld + n, kt + d * ld + width, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = k + (j0 + j) * ks;
    for (int64_t d = 0; d < hd; ++d) kt[d * ld + j] = kj[d];
  }
}

// keep[j] = 1 where the mask row (entries ms apart) sets key j < n, else 0, up to n8 (a multiple
// of 8): the softmax loops then run whole vectors, with no scalar tail.
RL_INLINE void keep_row(const bool* mrow, int64_t ms, int64_t n, int64_t n8, float* keep) {
  if (ms == 1) {  // MLX's bool is one byte, 0 or 1: a widening conversion, no branch
    const auto* m8 = reinterpret_cast<const uint8_t*>(mrow);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) keep[j] = static_cast<float>(m8[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) keep[j] = mrow[j * ms] ? 1.0f : 0.0f;
  }
  std::fill(keep + n, keep + n8, 0.0f);
}

// Row of n8 scores s (unscaled) -> masked softmax probabilities in place; returns the
// log-sum-exp of the scaled scores, -inf (and zeros) when keep sets no key.
RL_INLINE float softmax_lse_row(float* s, const float* keep, int64_t n8, float scale) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float mx = kNegInf;
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n8; ++j) mx = std::max(mx, keep[j] != 0.0f ? s[j] * scale : kNegInf);
  if (mx == kNegInf) {
    std::fill(s, s + n8, 0.0f);
    return kNegInf;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n8; ++j) {
    float e = keep[j] != 0.0f ? exp_poly(s[j] * scale - mx) : 0.0f;
    s[j] = e;
    sum += e;
  }
  float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n8; ++j) s[j] *= inv;
  return mx + std::log(sum);
}

// P recomputed from the saved log-sum-exp (zeros where masked or where the row has no key).
RL_INLINE void probs_row(float* s, const float* keep, int64_t n8, float scale, float lse) {
  if (lse == -std::numeric_limits<float>::infinity()) {
    std::fill(s, s + n8, 0.0f);
    return;
  }
#pragma omp simd
  for (int64_t j = 0; j < n8; ++j) s[j] = keep[j] != 0.0f ? exp_poly(s[j] * scale - lse) : 0.0f;
}

// Forward task: (row b, kv head g, `per` query tiles from tile t0). The keys are transposed once
// per task (kt, hd x ld) and serve every tile and query head of it.
RL_CLONES void prefill_fwd_task(const PrefillArgs& p, int64_t task, int64_t per) {
  thread_local std::vector<float> kt, sc, keep;
  const int64_t groups = (p.tiles() + per - 1) / per, hd = p.hd, ld = (p.S + 7) / 8 * 8 + 8;
  const int64_t bg = task / groups, b = bg / p.Hkv, g = bg % p.Hkv;
  const int64_t l_begin = (task % groups) * per * kTile;
  const int64_t l_end = std::min(p.L, l_begin + per * kTile);
  const float* kb = p.k + b * p.kst[0] + g * p.kst[1];
  const float* vb = p.v + b * p.vst[0] + g * p.vst[1];
  int64_t klo, khi;  // the keys any tile of this task sees: transposed once
  key_range(p, b, g, l_begin, l_end - l_begin, klo, khi);
  kt.resize(static_cast<size_t>(hd * ld));
  sc.resize(static_cast<size_t>(kTile * ld));
  keep.resize(static_cast<size_t>(ld));
  if (khi > klo) transpose_keys(kb, p.kst[2], klo, khi - klo, hd, kt.data() + klo, ld, ld - klo);
  for (int64_t l0 = l_begin; l0 < l_end; l0 += kTile) {
    const int64_t lt = std::min(kTile, l_end - l0);
    int64_t jlo, jhi;
    key_range(p, b, g, l0, lt, jlo, jhi);
    const int64_t W = jhi - jlo, Wp = (W + 7) / 8 * 8;
    for (int64_t i = 0; i < p.rep; ++i) {
      const int64_t h = g * p.rep + i, row0 = (b * p.H + h) * p.L + l0;
      float* o = p.o + row0 * hd;
      float* lse = p.lse + row0;
      if (W == 0) {
        std::fill(o, o + lt * hd, 0.0f);
        std::fill(lse, lse + lt, -std::numeric_limits<float>::infinity());
        continue;
      }
      gemm(p.q + row0 * hd, hd, 1, kt.data() + jlo, ld, sc.data(), Wp, lt, Wp, hd, false);
      for (int64_t r = 0; r < lt; ++r) {
        keep_row(p.mrow(b, h, l0 + r) + jlo * p.mst[3], p.mst[3], W, Wp, keep.data());
        lse[r] = softmax_lse_row(sc.data() + r * Wp, keep.data(), Wp, p.scale);
      }
      gemm(sc.data(), Wp, 1, vb + jlo * p.vst[2], p.vst[2], o, hd, lt, hd, W, false);
    }
  }
}

// Backward task: (row b, kv head g), every query tile in turn, so dK and dV of this kv head are
// summed here over its query heads and queries without another thread's help.
RL_CLONES void prefill_bwd_task(const PrefillArgs& p, int64_t bg) {
  thread_local std::vector<float> kt, vt, sc, dp, qt, dot, dd, keep;
  const int64_t hd = p.hd, b = bg / p.Hkv, g = bg % p.Hkv, rep = p.rep;
  const int64_t ld = (p.S + 7) / 8 * 8 + 8;  // every column range [jlo, jlo + round8(W)) fits
  const float* kb = p.k + b * p.kst[0] + g * p.kst[1];
  const float* vb = p.v + b * p.vst[0] + g * p.vst[1];
  float* dk = p.dk + bg * p.S * hd;
  float* dv = p.dv + bg * p.S * hd;
  std::fill(dk, dk + p.S * hd, 0.0f);
  std::fill(dv, dv + p.S * hd, 0.0f);
  kt.resize(static_cast<size_t>(hd * ld));
  vt.resize(static_cast<size_t>(hd * ld));
  transpose_keys(kb, p.kst[2], 0, p.S, hd, kt.data(), ld, ld);
  transpose_keys(vb, p.vst[2], 0, p.S, hd, vt.data(), ld, ld);
  const int64_t R = rep * kTile;
  sc.resize(static_cast<size_t>(R * ld));
  dp.resize(static_cast<size_t>(R * ld));
  qt.resize(static_cast<size_t>(R * hd));
  dot.resize(static_cast<size_t>(R * hd));
  dd.resize(static_cast<size_t>(R));
  keep.resize(static_cast<size_t>(ld));
  for (int64_t l0 = 0; l0 < p.L; l0 += kTile) {
    const int64_t lt = std::min(kTile, p.L - l0);
    int64_t jlo, jhi;
    key_range(p, b, g, l0, lt, jlo, jhi);
    const int64_t W = jhi - jlo, Wp = (W + 7) / 8 * 8;
    for (int64_t i = 0; i < rep; ++i) {
      const int64_t h = g * rep + i, row0 = (b * p.H + h) * p.L + l0;
      float* dq = p.dq + row0 * hd;
      if (W == 0) {
        std::fill(dq, dq + lt * hd, 0.0f);
        continue;
      }
      // this head's rows, stacked at i * lt in the tile's scratch (R = rep * lt rows)
      float* qi = qt.data() + i * lt * hd;
      float* di = dot.data() + i * lt * hd;
      float* si = sc.data() + i * lt * Wp;
      float* pi = dp.data() + i * lt * Wp;
      std::memcpy(qi, p.q + row0 * hd, sizeof(float) * lt * hd);
      std::memcpy(di, p.dout + row0 * hd, sizeof(float) * lt * hd);
      for (int64_t r = 0; r < lt; ++r) {  // D_r = dO_r . O_r - dlse_r
        const float* o = p.o + (row0 + r) * hd;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t d = 0; d < hd; ++d) s += di[r * hd + d] * o[d];
        dd[i * lt + r] = s - p.dlse[row0 + r];
      }
      gemm(qi, hd, 1, kt.data() + jlo, ld, si, Wp, lt, Wp, hd, false);  // scores
      gemm(di, hd, 1, vt.data() + jlo, ld, pi, Wp, lt, Wp, hd, false);  // dP = dO V^T
      for (int64_t r = 0; r < lt; ++r) {
        float* s = si + r * Wp;
        float* d = pi + r * Wp;
        keep_row(p.mrow(b, h, l0 + r) + jlo * p.mst[3], p.mst[3], W, Wp, keep.data());
        probs_row(s, keep.data(), Wp, p.scale, p.lse[row0 + r]);
        const float c = dd[i * lt + r];
#pragma omp simd
        for (int64_t j = 0; j < Wp; ++j) d[j] = s[j] * (d[j] - c) * p.scale;  // dS, scaled
      }
      gemm(pi, Wp, 1, kb + jlo * p.kst[2], p.kst[2], dq, hd, lt, hd, W, false);  // dQ = dS K
    }
    if (W == 0) continue;
    // dV += P^T dO and dK += dS^T Q over the tile's rep * lt rows at once.
    const int64_t rows = rep * lt;
    gemm(sc.data(), 1, Wp, dot.data(), hd, dv + jlo * hd, hd, W, hd, rows, true);
    gemm(dp.data(), 1, Wp, qt.data(), hd, dk + jlo * hd, hd, W, hd, rows, true);
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

class SampleRows : public CpuPrimitive {
 public:
  SampleRows(mx::Stream s, float inv_t) : CpuPrimitive(s), inv_t_(inv_t) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  const char* name() const override { return "RLSampleRows"; }
  bool is_equivalent(const mx::Primitive&) const override { return false; }  // a draw each

 private:
  float inv_t_;
};

class SoftmaxGrad : public CpuPrimitive {
 public:
  explicit SoftmaxGrad(mx::Stream s) : CpuPrimitive(s) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  const char* name() const override { return "RLSoftmaxGrad"; }
};

class DecodeAttention : public CpuPrimitive {
 public:
  DecodeAttention(mx::Stream s, float scale) : CpuPrimitive(s), scale_(scale) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  std::vector<mx::array> vjp(const std::vector<mx::array>& primals,
                             const std::vector<mx::array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<mx::array>& outputs) override;
  const char* name() const override { return "RLDecodeAttention"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return scale_ == static_cast<const DecodeAttention&>(other).scale_;
  }

 private:
  float scale_;
};

class PrefillAttention : public CpuPrimitive {
 public:
  PrefillAttention(mx::Stream s, float scale) : CpuPrimitive(s), scale_(scale) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  std::vector<mx::array> vjp(const std::vector<mx::array>& primals,
                             const std::vector<mx::array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<mx::array>& outputs) override;
  const char* name() const override { return "RLPrefillAttention"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return scale_ == static_cast<const PrefillAttention&>(other).scale_;
  }

 private:
  float scale_;
};

class PrefillAttentionVJP : public CpuPrimitive {
 public:
  PrefillAttentionVJP(mx::Stream s, float scale) : CpuPrimitive(s), scale_(scale) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  const char* name() const override { return "RLPrefillAttentionVJP"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    return scale_ == static_cast<const PrefillAttentionVJP&>(other).scale_;
  }

 private:
  float scale_;
};

class Rope : public CpuPrimitive {
 public:
  explicit Rope(mx::Stream s) : CpuPrimitive(s) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override;
  std::vector<mx::array> vjp(const std::vector<mx::array>& primals,
                             const std::vector<mx::array>& cotangents,
                             const std::vector<int>& argnums,
                             const std::vector<mx::array>& outputs) override;
  const char* name() const override { return "RLRope"; }
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

// Checks q (B, H, L, hd), k and v (B, Hkv, S, hd) with H a multiple of Hkv and a boolean mask
// broadcastable to (B, H, L, S); returns the mask broadcast (a strided view, never copied).
mx::array attention_mask_view(const mx::array& q, const mx::array& k, const mx::array& v,
                              const mx::array& mask, const char* op, mx::Stream st) {
  for (auto* a : {&q, &k, &v}) check_f32(*a, op);
  if (mask.dtype() != mx::bool_) throw std::invalid_argument(std::string(op) + ": mask must be bool");
  if (q.ndim() != 4 || k.ndim() != 4 || v.shape() != k.shape() || q.shape(0) != k.shape(0) ||
      q.shape(3) != k.shape(3) || k.shape(1) == 0 || q.shape(1) % k.shape(1) != 0) {
    throw std::invalid_argument(
        std::string(op) + ": want q (B, H, L, hd), k and v (B, Hkv, S, hd) with H a multiple of "
        "Hkv");
  }
  mx::Shape full = {q.shape(0), q.shape(1), q.shape(2), k.shape(2)};
  bool fits = mask.ndim() <= 4;
  for (int i = 1; fits && i <= mask.ndim(); ++i) {
    fits = mask.shape(-i) == 1 || mask.shape(-i) == full[4 - i];
  }
  if (!fits) {
    throw std::invalid_argument(
        std::string(op) + ": mask must broadcast to (B, H, L, S) = (" + std::to_string(full[0]) +
        ", " + std::to_string(full[1]) + ", " + std::to_string(full[2]) + ", " +
        std::to_string(full[3]) + "); pass one mask entry per cache slot read");
  }
  return mx::broadcast_to(mask, full, st);
}

// Masked GQA attention: q (B, H, L, hd), k and v (B, Hkv, S, hd) with H a multiple of Hkv (query
// head h reads kv head h / (H / Hkv)), mask bool broadcastable to (B, H, L, S). k and v are read
// in place with their strides (a cache buffer's [:, :, :S] view is not copied); q is made
// contiguous (it is small at decode). For few queries (decode): every query row is one dot per key.
mx::array decode_attention(const mx::array& q, const mx::array& k, const mx::array& v,
                           const mx::array& mask, float scale, mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  auto m = attention_mask_view(q, k, v, mask, "decode_attention", st);
  return mx::array(q.shape(), mx::float32, std::make_shared<DecodeAttention>(st, scale),
                   {mx::contiguous(q, false, st), k, v, m});
}

// The same contract as decode_attention, for many queries per row: [out (B, H, L, hd), the
// log-sum-exp of each query's scaled, masked scores (B, H, L)]. A query with no key set gives
// zeros, a log-sum-exp of -inf and zero gradients. Differentiable in q, k and v (both outputs).
std::vector<mx::array> prefill_attention(const mx::array& q, const mx::array& k,
                                         const mx::array& v, const mx::array& mask, float scale,
                                         mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  auto m = attention_mask_view(q, k, v, mask, "prefill_attention", st);
  return mx::array::make_arrays({q.shape(), {q.shape(0), q.shape(1), q.shape(2)}},
                                {mx::float32, mx::float32},
                                std::make_shared<PrefillAttention>(st, scale),
                                {mx::contiguous(q, false, st), k, v, m});
}

// Rotate-half RoPE: x (..., hd) float32 with hd even, cos and the sign-folded sin broadcastable
// to x (cpu_ops' (B, 1, L, hd) tables against (B, H, L, hd)); all read in place with their
// strides (the transposed projections are not copied), the output contiguous.
mx::array rope(const mx::array& x, const mx::array& cos, const mx::array& sin,
               mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  for (auto* a : {&x, &cos, &sin}) check_f32(*a, "rope");
  if (x.ndim() < 1 || x.ndim() > 4 || x.shape(-1) % 2 != 0) {
    throw std::invalid_argument("rope: x must have 1 to 4 axes and an even last axis");
  }
  if (cos.ndim() > x.ndim() || sin.ndim() > x.ndim() || cos.shape(-1) != x.shape(-1) ||
      sin.shape(-1) != x.shape(-1)) {
    throw std::invalid_argument("rope: cos and sin must broadcast to x with x's last axis");
  }
  auto c = mx::broadcast_to(cos, x.shape(), st);
  auto sn = mx::broadcast_to(sin, x.shape(), st);
  return mx::array(x.shape(), mx::float32, std::make_shared<Rope>(st), {x, c, sn});
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

// [tokens int32, log-probs float32, totals float32] per row of float32 (rows, cols) logits
// drawn with uniforms u (rows,) float64 in [0, 1) at temperature 1 / inv_t. No autodiff.
std::vector<mx::array> sample_rows(const mx::array& z, const mx::array& u, float inv_t,
                                   mx::StreamOrDevice s = {}) {
  auto st = cpu_stream(s);
  check_rows(z, "sample_rows");
  if (u.dtype() != mx::float64 || u.ndim() != 1 || u.shape(0) != z.shape(0)) {
    throw std::invalid_argument("sample_rows: u must be float64 (rows,)");
  }
  if (!(inv_t > 0.0f) || !std::isfinite(inv_t)) {
    throw std::invalid_argument("sample_rows: inv_t must be positive and finite");
  }
  auto zc = mx::contiguous(z, false, st);
  auto uc = mx::contiguous(u, false, st);
  mx::Shape rows = {z.shape(0)};
  return mx::array::make_arrays({rows, rows, rows}, {mx::int32, mx::float32, mx::float32},
                                std::make_shared<SampleRows>(st, inv_t), {zc, uc});
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

void SampleRows::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& z = in[0];
  auto& u = in[1];
  for (auto& o : out) alloc(o);
  auto& enc = mx::cpu::get_command_encoder(stream());
  enc.set_input_array(z);
  enc.set_input_array(u);
  for (auto& o : out) enc.set_output_array(o);
  int64_t rows = z.shape(0), n = z.shape(1);
  enc.dispatch([zp = z.data<float>(), up = u.data<double>(), tp = out[0].data<int32_t>(),
                lp = out[1].data<float>(), sp = out[2].data<float>(), rows, n, inv_t = inv_t_]() {
    parallel_rows(rows, n, [&](int64_t r0, int64_t r1, int) {
      draw_rows(zp, up, inv_t, tp, lp, sp, r0, r1, n);
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

// Element offset of row r (an index over all axes but the last) in a strided array.
int64_t row_offset(int64_t r, const std::vector<int64_t>& shape, const std::vector<int64_t>& st) {
  int64_t off = 0;
  for (int64_t a = static_cast<int64_t>(shape.size()) - 1; a >= 0; --a) {
    off += (r % shape[a]) * st[a];
    r /= shape[a];
  }
  return off;
}

void Rope::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& y = out[0];
  alloc(y);
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (auto& a : in) enc.set_input_array(a);
  enc.set_output_array(y);
  int64_t hd = y.shape(-1), rows = hd ? static_cast<int64_t>(y.size()) / hd : 0;
  std::vector<int64_t> shape(y.shape().begin(), y.shape().end() - 1);
  auto lead = [](const mx::array& a) {
    return std::vector<int64_t>(a.strides().begin(), a.strides().end() - 1);
  };
  enc.dispatch([xp = in[0].data<float>(), cp = in[1].data<float>(), sp = in[2].data<float>(),
                yp = y.data<float>(), xe = in[0].strides().back(), ce = in[1].strides().back(),
                se = in[2].strides().back(), xs = lead(in[0]), cs = lead(in[1]),
                ss = lead(in[2]), shape = std::move(shape), rows, hd]() {
    parallel_rows(rows, hd, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) {
        rope_row(xp + row_offset(r, shape, xs), xe, cp + row_offset(r, shape, cs), ce,
                 sp + row_offset(r, shape, ss), se, yp + r * hd, hd);
      }
    });
  });
}

// dx = rope(g, cos, -sin) (the inverse rotation); d cos = g x and d sin = g rot(x), which the
// broadcast's own vjp sums back to the tables' shapes (nothing here differentiates them).
std::vector<mx::array> Rope::vjp(const std::vector<mx::array>& primals,
                                 const std::vector<mx::array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<mx::array>&) {
  auto st = stream();
  auto& x = primals[0];
  auto g = mx::astype(cotangents[0], mx::float32, st);
  std::vector<mx::array> res;
  for (int a : argnums) {
    if (a == 0) {
      res.push_back(mx::array(x.shape(), mx::float32, std::make_shared<Rope>(st),
                              {g, primals[1], mx::negative(primals[2], st)}));
    } else if (a == 1) {
      res.push_back(mx::multiply(g, x, st));
    } else {
      int h = x.shape(-1) / 2, n = x.ndim();
      mx::Shape lo(n, 0), mid = x.shape(), hi = x.shape();
      mid.back() = h;
      lo.back() = h;
      auto rot = mx::concatenate({mx::slice(x, lo, hi, st), mx::slice(x, mx::Shape(n, 0), mid, st)},
                                 -1, st);
      res.push_back(mx::multiply(g, rot, st));
    }
  }
  return res;
}

// A 4-D view of k or v with last stride 1 is read in place; anything else is gathered into a
// contiguous buffer first (inside the task, once its data is ready).
struct View4 {
  const float* data;
  std::array<int64_t, 4> shape, strides;
  bool direct() const { return shape[3] <= 1 || strides[3] == 1; }
  // Element strides over (B, Hkv, S) of what the kernel reads: the view's, or the gathered copy's.
  std::array<int64_t, 3> read_strides() const {
    if (direct()) return {strides[0], strides[1], strides[2]};
    return {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3]};
  }
  const float* read(std::vector<float>& buf) const {
    if (direct()) return data;
    buf.resize(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]));
    size_t i = 0;
    for (int64_t a = 0; a < shape[0]; ++a)
      for (int64_t b = 0; b < shape[1]; ++b)
        for (int64_t c = 0; c < shape[2]; ++c)
          for (int64_t d = 0; d < shape[3]; ++d)
            buf[i++] = data[a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]];
    return buf.data();
  }
};

View4 view4(const mx::array& a) {
  return {a.data<float>(),
          {a.shape(0), a.shape(1), a.shape(2), a.shape(3)},
          {a.strides(0), a.strides(1), a.strides(2), a.strides(3)}};
}

void DecodeAttention::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  auto& q = in[0];
  auto& m = in[3];
  auto& o = out[0];
  alloc(o);
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (auto& a : in) enc.set_input_array(a);
  enc.set_output_array(o);
  int64_t B = q.shape(0), H = q.shape(1), L = q.shape(2), hd = q.shape(3);
  int64_t Hkv = in[1].shape(1), S = in[1].shape(2), rep = H / Hkv;
  std::array<int64_t, 4> mst = {m.strides(0), m.strides(1), m.strides(2), m.strides(3)};
  enc.dispatch([qp = q.data<float>(), kv = view4(in[1]), vv = view4(in[2]), mp = m.data<bool>(),
                op = o.data<float>(), B, H, L, hd, Hkv, S, rep, mst, scale = scale_]() {
    std::vector<float> kbuf, vbuf;
    const float* kp = kv.read(kbuf);
    const float* vp = vv.read(vbuf);
    auto kst = kv.read_strides(), vst = vv.read_strides();
    auto block = hd == 64 ? attn_block_64 : hd == 128 ? attn_block_128 : attn_block_any;
    parallel_rows(B * Hkv, S * hd, [&](int64_t b0, int64_t b1, int) {
      std::vector<float> sc(static_cast<size_t>(rep * L * S));
      for (int64_t bg = b0; bg < b1; ++bg) {
        int64_t b = bg / Hkv, g = bg % Hkv, nb = (bg + 1) / Hkv, ng = (bg + 1) % Hkv;
        int64_t rows = (b * H + g * rep) * L * hd;  // this block's first query row
        bool last = bg + 1 == b1;
        block({qp + rows, kp + b * kst[0] + g * kst[1], vp + b * vst[0] + g * vst[1],
               mp + b * mst[0] + g * rep * mst[1], op + rows, sc.data(), kst[2], vst[2], mst[1],
               mst[2], mst[3], rep, L, S, hd, scale,
               last ? nullptr : kp + nb * kst[0] + ng * kst[1]});
      }
    });
  });
}

// The gradient through the plain formula (scores by matmul, this file's masked softmax and its
// backward): decode never asks for it, but a caller under autodiff gets the right values.
std::vector<mx::array> DecodeAttention::vjp(const std::vector<mx::array>& primals,
                                            const std::vector<mx::array>& cotangents,
                                            const std::vector<int>& argnums,
                                            const std::vector<mx::array>&) {
  auto st = stream();
  auto &q = primals[0], &k = primals[1], &v = primals[2], &m = primals[3];
  int B = q.shape(0), H = q.shape(1), L = q.shape(2), hd = q.shape(3);
  int Hkv = k.shape(1), S = k.shape(2), rep = H / Hkv;
  auto qg = mx::reshape(q, {B, Hkv, rep * L, hd}, st);
  auto kt = mx::swapaxes(k, -1, -2, st);
  auto s = mx::multiply(mx::matmul(qg, kt, st), mx::array(scale_), st);  // (B, Hkv, rep*L, S)
  auto p = mx::array(s.shape(), mx::float32, std::make_shared<MaskedSoftmax>(st),
                     {mx::contiguous(s, false, st), mx::reshape(m, {B, Hkv, rep * L, S}, st)});
  auto c = mx::astype(cotangents[0], mx::float32, st);
  auto cg = mx::reshape(c, {B, Hkv, rep * L, hd}, st);
  auto dp = mx::contiguous(mx::matmul(cg, mx::swapaxes(v, -1, -2, st), st), false, st);
  auto ds = mx::multiply(
      mx::array(s.shape(), mx::float32, std::make_shared<SoftmaxVJP>(st), {p, dp}),
      mx::array(scale_), st);
  std::vector<mx::array> res;
  for (int a : argnums) {
    if (a == 0) {
      res.push_back(mx::reshape(mx::matmul(ds, k, st), q.shape(), st));
    } else if (a == 1) {
      res.push_back(mx::matmul(mx::swapaxes(ds, -1, -2, st), qg, st));
    } else if (a == 2) {
      res.push_back(mx::matmul(mx::swapaxes(p, -1, -2, st), cg, st));
    } else {
      res.push_back(mx::zeros_like(m, st));
    }
  }
  return res;
}

// Runs fn(task) for task in [0, n) over the pool (tasks taken one at a time, so uneven tiles
// balance), or on the stream's thread when `work` (multiply-adds) is too small to share.
template <class F>
void run_tasks(int64_t n, int64_t work, F&& fn) {
  if (work < (int64_t{1} << 20) || n <= 1) {
    for (int64_t t = 0; t < n; ++t) fn(t);
    return;
  }
  pool().run(static_cast<int>(n), [&](int t) { fn(t); });
}

PrefillArgs prefill_args(const std::vector<mx::array>& in, const View4& kv, const View4& vv,
                         float scale) {
  auto& q = in[0];
  auto& m = in[3];
  PrefillArgs p{};
  p.B = q.shape(0);
  p.H = q.shape(1);
  p.L = q.shape(2);
  p.hd = q.shape(3);
  p.Hkv = in[1].shape(1);
  p.S = in[1].shape(2);
  p.rep = p.H / p.Hkv;
  p.mst = {m.strides(0), m.strides(1), m.strides(2), m.strides(3)};
  p.kst = kv.read_strides();
  p.vst = vv.read_strides();
  p.scale = scale;
  return p;
}

void PrefillAttention::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  alloc(out[0]);
  alloc(out[1]);
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (auto& a : in) enc.set_input_array(a);
  enc.set_output_array(out[0]);
  enc.set_output_array(out[1]);
  auto kv = view4(in[1]), vv = view4(in[2]);
  PrefillArgs p = prefill_args(in, kv, vv, scale_);
  p.q = in[0].data<float>();
  p.m = in[3].data<bool>();
  p.o = out[0].data<float>();
  p.lse = out[1].data<float>();
  enc.dispatch([p, kv, vv]() mutable {
    std::vector<float> kbuf, vbuf;
    p.k = kv.read(kbuf);
    p.v = vv.read(vbuf);
    // Tiles per task: all of a (row, kv head)'s when there are enough of those to share out,
    // else fewer, so a single row still spreads over the threads.
    const int64_t nt = p.tiles(), want = 8 * pool().size();
    const int64_t groups = std::clamp<int64_t>((want + p.B * p.Hkv - 1) / (p.B * p.Hkv), 1, nt);
    const int64_t per = (nt + groups - 1) / groups;
    run_tasks(p.B * p.Hkv * ((nt + per - 1) / per), p.B * p.H * p.L * p.S * p.hd,
              [&](int64_t t) { prefill_fwd_task(p, t, per); });
  });
}

void PrefillAttentionVJP::eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
  for (auto& a : out) alloc(a);
  auto& enc = mx::cpu::get_command_encoder(stream());
  for (auto& a : in) enc.set_input_array(a);
  for (auto& a : out) enc.set_output_array(a);
  auto kv = view4(in[1]), vv = view4(in[2]);
  PrefillArgs p = prefill_args(in, kv, vv, scale_);
  p.q = in[0].data<float>();
  p.m = in[3].data<bool>();
  p.o = const_cast<float*>(in[4].data<float>());
  p.lse = const_cast<float*>(in[5].data<float>());
  p.dout = in[6].data<float>();
  p.dlse = in[7].data<float>();
  p.dq = out[0].data<float>();
  p.dk = out[1].data<float>();
  p.dv = out[2].data<float>();
  enc.dispatch([p, kv, vv]() mutable {
    std::vector<float> kbuf, vbuf;
    p.k = kv.read(kbuf);
    p.v = vv.read(vbuf);
    run_tasks(p.B * p.Hkv, p.B * p.H * p.L * p.S * p.hd,
              [&](int64_t t) { prefill_bwd_task(p, t); });
  });
}

// One backward primitive gives dq, dk and dv (dk and dv summed over the query heads sharing a
// kv head); the log-sum-exp's cotangent (zeros unless a caller uses it) enters as dS += P dlse.
std::vector<mx::array> PrefillAttention::vjp(const std::vector<mx::array>& primals,
                                             const std::vector<mx::array>& cotangents,
                                             const std::vector<int>& argnums,
                                             const std::vector<mx::array>& outputs) {
  auto st = stream();
  auto &q = primals[0], &k = primals[1], &v = primals[2];
  auto f32 = [&](const mx::array& a) {
    return mx::contiguous(mx::astype(a, mx::float32, st), false, st);
  };
  auto dout = f32(cotangents[0]);
  auto dlse = f32(cotangents.size() > 1 ? cotangents[1] : mx::zeros_like(outputs[1], st));
  auto grads = mx::array::make_arrays(
      {q.shape(), k.shape(), v.shape()}, {mx::float32, mx::float32, mx::float32},
      std::make_shared<PrefillAttentionVJP>(st, scale_),
      {q, k, v, primals[3], outputs[0], outputs[1], dout, dlse});
  std::vector<mx::array> res;
  for (int a : argnums) res.push_back(a < 3 ? grads[a] : mx::zeros_like(primals[3], st));
  return res;
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
  m.def("sample_rows", &rl::sample_rows, "z"_a, "u"_a, "inv_t"_a, nb::kw_only(),
        "stream"_a = nb::none(),
        "[tokens int32, log-probs, totals] per row of float32 (rows, cols) logits: the first "
        "token whose cumulative mass of exp((z - max) * inv_t) exceeds u * total (u float64 "
        "(rows,) in [0, 1)); log-prob under the tempered full softmax. A row with NaN or +inf "
        "gets token -1 and a NaN total. No autodiff.");
  m.def("decode_attention", &rl::decode_attention, "q"_a, "k"_a, "v"_a, "mask"_a, "scale"_a,
        nb::kw_only(), "stream"_a = nb::none(),
        "masked GQA attention for few queries: q (B, H, L, hd), k and v (B, Hkv, S, hd) read in "
        "place, mask bool broadcastable to (B, H, L, S); scores, masked softmax and values in one "
        "pass per (row, kv head); a query with no key set gives zeros. float32, CPU; the "
        "gradient goes through the plain formula.");
  m.def("prefill_attention", &rl::prefill_attention, "q"_a, "k"_a, "v"_a, "mask"_a, "scale"_a,
        nb::kw_only(), "stream"_a = nb::none(),
        "masked GQA attention for many queries, as decode_attention; returns [out, log-sum-exp "
        "(B, H, L)]; a query with no key set gives zeros, -inf and zero gradients. float32, CPU; "
        "native backward.");
  m.def("rope", &rl::rope, "x"_a, "cos"_a, "sin"_a, nb::kw_only(), "stream"_a = nb::none(),
        "rotate-half RoPE x * cos + [x[h:], x[:h]] * sin with the sign folded into sin; cos and "
        "sin broadcast to x; float32, CPU");
  m.def("threads", [] { return rl::pool().size(); }, "threads an op may use");
  m.def("simd_level", &rl::simd_level, "the CPU level the kernels were dispatched for");
}
