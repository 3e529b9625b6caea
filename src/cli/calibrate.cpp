// See calibrate.h. Each point is the throughput over a window of calls (the mean time per call), and the
// median of that over passes (a busy machine's typical speed; `gpt bench` reports a median too).
#include "src/cli/calibrate.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <map>
#include <vector>

#include "kernels/adamw_params.h"
#include "kernels/cpu/ops.h"
#include "src/cli/cold_copies.h"
#include "src/backend/device_info.h"
#include "src/backend/peak_flops.h"
#include "src/core/check.h"
#include "src/dist/comm_ledger.h"
#include "src/io/atomic_file.h"
#include "src/io/json_min.h"
#include "src/plan/collectives.h"
#include "src/plan/gemm_shape.h"
#include "src/plan/hardware.h"
#include "src/runtime/peak_cache.h"
#include "src/util/log.h"

namespace gpt {

namespace {

// The mean time per call over a window: throughput, which is what a rank gets when it shares its cores
// (a short call timed alone would show the speed of a core while the rank holds it).
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Seconds per call of f: one warm-up call, then repeats until `min_total` seconds and `min_reps` calls.
template <typename F>
std::vector<double> time_calls(F&& f, int min_reps, double min_total) {
  f();
  std::vector<double> t;
  const double start = now_seconds();
  while ((int)t.size() < min_reps || (now_seconds() - start < min_total && t.size() < 200)) {
    const double t0 = now_seconds();
    f();
    t.push_back(now_seconds() - t0);
  }
  return t;
}

// Products spanning M*N*K on the calibration's own shapes (src/plan/gemm_shape.h).
std::vector<GemmShape> gemm_shapes(bool quick) {
  std::vector<GemmShape> s;
  const int n_pts = quick ? 6 : 15;
  const double lo = 1e4, hi = 3e9;
  for (int i = 0; i < n_pts; i++) {
    const GemmShape sh = calibration_gemm_shape(lo * std::pow(hi / lo, (double)i / (n_pts - 1)));
    if (s.empty() || sh.mnk() > s.back().mnk()) s.push_back(sh);
  }
  return s;
}

// Products with a short side, what fits the edges: d against two of 1024, on each side in turn, and the
// classifier's shapes (a few hundred tokens, C channels, a vocabulary of outputs) at C = 128 to 384. Sides
// of 64 and up, as in a training step (a side of 32 was measured to cost more as the rows than as the other
// two: 1.7x the reference against 1.2x, which would pull the one edge of the three sides away from a step's).
std::vector<GemmShape> skinny_gemm_shapes(bool quick) {
  std::vector<GemmShape> s;
  for (int d : quick ? std::vector<int>{64} : std::vector<int>{64, 128})
    for (const GemmShape sh : {GemmShape{d, 1024, 1024}, GemmShape{1024, d, 1024}, GemmShape{1024, 1024, d}})
      s.push_back(sh);
  for (int C : quick ? std::vector<int>{128, 384} : std::vector<int>{128, 256, 384}) s.push_back({256, 32768, C});
  if (!quick) s.push_back({64, 32768, 256});
  return s;
}

// Rates merged per x (equal x from two shapes: their mean), as a curve.
RateCurve curve_of(const std::vector<std::pair<double, double>>& pts) {
  std::map<double, std::vector<double>> by_x;
  for (const auto& [x, y] : pts) by_x[x].push_back(y);
  RateCurve c;
  for (const auto& [x, ys] : by_x) {
    double m = 0;
    for (double y : ys) m += y;
    c.points.push_back({x, m / ys.size()});
  }
  return c;
}

// One measured point of a curve: x (M*N*K, bytes or elements), the work per call (flops, bytes or elements)
// and the call; `setup` allocates its buffers right before it is timed (and frees them after).
struct Point {
  std::string curve;
  double x = 0, work = 0;
  std::function<std::function<void()>()> setup;
};

// The backend's forward product (no bias: the plain sgemm) and its backward call, the weight (and its
// gradient) cold as in a step (cold_copies) while the activations are warm (written just before).
Point forward_point(const std::string& curve, GemmShape sh) {
  const size_t wn = (size_t)sh.n * sh.k;  // weight (n, k) elements
  return {curve, sh.mnk(), 2 * sh.mnk(), [sh, wn] {
            auto a = std::make_shared<std::vector<float>>((size_t)sh.m * sh.k, 0.5f);  // (m, k)
            const ColdCopies w = cold_buffers(cold_copies(wn * 4), wn, 0.25f);        // copies x (n, k)
            auto c = std::make_shared<std::vector<float>>((size_t)sh.m * sh.n);      // (m, n)
            auto next = std::make_shared<size_t>(0);
            return std::function<void()>([=] {
              cpu::matmul_forward(c->data(), a->data(), w.at((*next)++), nullptr, sh.m, sh.k, sh.n);
            });
          }};
}

Point backward_point(const std::string& curve, GemmShape sh) {
  const size_t wn = (size_t)sh.n * sh.k;
  return {curve, sh.mnk(), 4 * sh.mnk(), [sh, wn] {
            auto in = std::make_shared<std::vector<float>>((size_t)sh.m * sh.k, 0.5f);    // (m, k)
            auto dout = std::make_shared<std::vector<float>>((size_t)sh.m * sh.n, 0.1f);  // (m, n)
            auto dinp = std::make_shared<std::vector<float>>((size_t)sh.m * sh.k);        // (m, k)
            const int copies = cold_copies(2 * wn * 4);
            const ColdCopies w = cold_buffers(copies, wn, 0.25f);   // copies x (n, k)
            const ColdCopies dw = cold_buffers(copies, wn, 0.0f);  // copies x (n, k)
            auto next = std::make_shared<size_t>(0);
            return std::function<void()>([=] {
              const size_t i = (*next)++;
              cpu::matmul_backward(dinp->data(), dw.at(i), nullptr, dout->data(), in->data(), w.at(i), sh.m, sh.k,
                                   sh.n);
            });
          }};
}

// Products on the curve's shapes; attention-like single-threaded tasks side by side.
void product_points(std::vector<Point>& pts, bool quick, int threads) {
  for (const GemmShape& sh : gemm_shapes(quick)) {
    pts.push_back(forward_point("gemm", sh));
    pts.push_back(backward_point("gemm_backward", sh));
  }
  // attention-like tasks: 64 x n x 64 and 64 x 64 x n, 8 per thread, single-threaded each
  for (int n : quick ? std::vector<int>{64, 512} : std::vector<int>{32, 64, 128, 256, 512, 1024}) {
    for (const GemmShape sh : {GemmShape{64, n, 64}, GemmShape{64, 64, n}}) {
      const int ntask = 8 * threads;
      pts.push_back({"gemm_tasks", sh.mnk(), 2 * sh.mnk() * ntask, [sh, ntask] {
                       auto a = std::make_shared<std::vector<float>>((size_t)ntask * sh.m * sh.k, 0.5f);
                       auto b = std::make_shared<std::vector<float>>((size_t)ntask * sh.k * sh.n, 0.25f);
                       auto c = std::make_shared<std::vector<float>>((size_t)ntask * sh.m * sh.n);
                       return std::function<void()>([=] {
#pragma omp parallel for schedule(dynamic)
                         for (int j = 0; j < ntask; j++)
                           cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sh.m, sh.n, sh.k, 1.0f,
                                       a->data() + (size_t)j * sh.m * sh.k, sh.k, b->data() + (size_t)j * sh.k * sh.n, sh.n,
                                       0.0f, c->data() + (size_t)j * sh.m * sh.n, sh.n);
                       });
                     }});
    }
  }
}

// stream: out = a + b (the residual kernel, 12 bytes per element); copy: memcpy
void memory_points(std::vector<Point>& pts, bool quick) {
  for (size_t n = 1024; n <= (quick ? (size_t)1 << 20 : (size_t)16 << 20); n *= 4)
    pts.push_back({"stream", 12.0 * n, 12.0 * n, [n] {
                     auto a = std::make_shared<std::vector<float>>(n, 1.0f), b = std::make_shared<std::vector<float>>(n, 2.0f);
                     auto o = std::make_shared<std::vector<float>>(n);
                     return std::function<void()>([=] { cpu::residual_forward(o->data(), a->data(), b->data(), n); });
                   }});
  for (size_t n = 4096; n <= (quick ? (size_t)4 << 20 : (size_t)64 << 20); n *= 4)
    pts.push_back({"copy", (double)n, (double)n, [n] {
                     auto a = std::make_shared<std::vector<char>>(n, 1), b = std::make_shared<std::vector<char>>(n);
                     return std::function<void()>([=] { std::memcpy(b->data(), a->data(), n); });
                   }});
}

// Kernel families, by elements: layernorm rows of C = 512, GELU and AdamW over a segment.
void kernel_points(std::vector<Point>& pts, bool quick) {
  const int C = 512;
  for (int rows : quick ? std::vector<int>{64, 1024} : std::vector<int>{16, 64, 256, 1024, 4096}) {
    const double n = (double)rows * C;
    pts.push_back({"layernorm_forward", n, n, [rows, C] {
                     auto x = std::make_shared<std::vector<float>>((size_t)rows * C, 0.3f);
                     auto o = std::make_shared<std::vector<float>>((size_t)rows * C);
                     auto st = std::make_shared<std::vector<float>>(2 * (size_t)rows + 2 * (size_t)C, 1.0f);
                     return std::function<void()>([=] {
                       float* s = st->data();
                       cpu::layernorm_forward(o->data(), s, s + rows, x->data(), s + 2 * rows, s + 2 * rows + C, rows, C);
                     });
                   }});
    pts.push_back({"layernorm_backward", n, n, [rows, C] {
                     auto x = std::make_shared<std::vector<float>>((size_t)rows * C, 0.3f);
                     auto d = std::make_shared<std::vector<float>>((size_t)rows * C, 0.1f);
                     auto o = std::make_shared<std::vector<float>>((size_t)rows * C);
                     auto st = std::make_shared<std::vector<float>>(2 * (size_t)rows + 4 * (size_t)C, 1.0f);
                     return std::function<void()>([=] {
                       float* s = st->data();
                       cpu::layernorm_backward(o->data(), s + 2 * rows + C, s + 2 * rows + 2 * C, d->data(), x->data(),
                                               s + 2 * rows, s, s + rows, rows, C);
                     });
                   }});
  }
  for (size_t n = 4096; n <= (quick ? (size_t)1 << 20 : (size_t)8 << 20); n *= 4) {
    pts.push_back({"gelu_forward", (double)n, (double)n, [n] {
                     auto a = std::make_shared<std::vector<float>>(n, 0.3f), o = std::make_shared<std::vector<float>>(n);
                     return std::function<void()>([=] { cpu::gelu_forward(o->data(), a->data(), n); });
                   }});
    pts.push_back({"gelu_backward", (double)n, (double)n, [n] {
                     auto a = std::make_shared<std::vector<float>>(n, 0.3f), d = std::make_shared<std::vector<float>>(n, 0.1f);
                     auto o = std::make_shared<std::vector<float>>(n);
                     return std::function<void()>([=] { cpu::gelu_backward(o->data(), a->data(), d->data(), n); });
                   }});
    pts.push_back({"adamw", (double)n, (double)n, [n] {
                     auto buf = std::make_shared<std::vector<float>>(4 * n, 0.01f);
                     return std::function<void()>([=] {
                       AdamWParams hp;
                       hp.weight_decay = 0.1f;
                       float* b = buf->data();
                       cpu::adamw_update(b, b + n, b + 2 * n, b + 3 * n, nullptr, n, hp);
                     });
                   }});
  }
}

// The classifier over GPT-2's vocabulary, forward-only (evaluation) and training's single backward pass.
void classifier_points(std::vector<Point>& pts, bool quick) {
  const int V = 50257, Vp = 50304;
  for (int rows : quick ? std::vector<int>{8, 64} : std::vector<int>{4, 16, 64, 256}) {
    const double n = (double)rows * V;
    for (const bool bwd : {false, true})
      pts.push_back({bwd ? "classifier_backward" : "classifier_forward", n, n, [rows, V, Vp, bwd] {
                       auto logits = std::make_shared<std::vector<float>>((size_t)rows * Vp, 0.1f);
                       auto losses = std::make_shared<std::vector<float>>(rows);
                       auto tg = std::make_shared<std::vector<int>>(rows);
                       for (int i = 0; i < rows; i++) (*tg)[i] = (i * 97) % V;
                       return std::function<void()>([=] {
                         if (bwd)
                           cpu::classifier_backward(logits->data(), losses->data(), nullptr, tg->data(), 1e-3f, rows, V, Vp);
                         else
                           cpu::classifier_forward(losses->data(), logits->data(), tg->data(), rows, V, Vp);
                       });
                     }});
  }
}

// The edge's products, each alternated call by call with its reference (the curve's shape of the same
// M*N*K, cold weights as on the curve): both are timed in the same moments, so a busy machine's drift
// between two windows does not enter their ratio. Per call of each, the median.
std::vector<GemmSample> measure_shape_samples(Communicator& world, bool quick) {
  std::vector<GemmSample> out;
  const double window = quick ? 0.02 : 0.3;
  for (const GemmShape& sh : skinny_gemm_shapes(quick))
    for (const bool bwd : {false, true}) {
      const GemmShape ref = calibration_gemm_shape(sh.mnk());
      const auto call = bwd ? backward_point("", sh).setup() : forward_point("", sh).setup();
      const auto call_ref = bwd ? backward_point("", ref).setup() : forward_point("", ref).setup();
      call();
      call_ref();
      world.barrier();
      std::vector<double> t, t_ref;
      const double start = now_seconds();
      while (t.size() < 3 || now_seconds() - start < window) {
        const double t0 = now_seconds();
        call();
        const double t1 = now_seconds();
        call_ref();
        t.push_back(t1 - t0);
        t_ref.push_back(now_seconds() - t1);
      }
      out.push_back({sh, bwd, median(t), median(t_ref)});
    }
  return out;
}

// The profile; *shape_note: each of the edge's products, its time over its reference's.
ComputeProfile measure_compute(Communicator& world, bool quick, int threads, std::string* shape_note) {
  ComputeProfile p;
  p.ranks = world.world();
  p.threads = threads;
  const int passes = quick ? 1 : 3;
  // Every rank loops over a point for the same wall-clock window (after a barrier), so that with R ranks the
  // rates are those of R ranks computing at once, as they do in a training step.
  const double min_t = quick ? 0.01 : 0.06;
  const int min_reps = quick ? 2 : 3;
  std::vector<Point> pts;
  product_points(pts, quick, threads);
  memory_points(pts, quick);
  kernel_points(pts, quick);
  classifier_points(pts, quick);

  std::vector<std::vector<double>> per_call(pts.size());
  for (int pass = 0; pass < passes; pass++) {
    for (size_t i = 0; i < pts.size(); i++) {
      std::function<void()> call = pts[i].setup();
      world.barrier();
      per_call[i].push_back(mean(time_calls(call, min_reps, min_t)));
    }
  }
  std::map<std::string, std::vector<std::pair<double, double>>> curves;
  for (size_t i = 0; i < pts.size(); i++)
    curves[pts[i].curve].push_back({pts[i].x, pts[i].work / median(per_call[i])});
  p.gemm = curve_of(curves["gemm"]);
  p.gemm_backward = curve_of(curves["gemm_backward"]);
  const std::vector<GemmSample> skinny = measure_shape_samples(world, quick);
  p.has_gemm_edge = true;
  p.gemm_edge = fit_gemm_edge(skinny, false);
  p.gemm_backward_edge = fit_gemm_edge(skinny, true);
  for (const GemmSample& g : skinny)
    *shape_note += str(shape_note->empty() ? "" : "; ", g.shape.m, "x", g.shape.n, "x", g.shape.k,
                       g.backward ? " backward " : " ", g.seconds / g.reference_seconds);
  p.gemm_tasks = curve_of(curves["gemm_tasks"]);
  p.stream = curve_of(curves["stream"]);
  p.copy = curve_of(curves["copy"]);
  for (const std::string& fam : kernel_families())
    if (!curves[fam].empty()) p.kernels[fam] = curve_of(curves[fam]);
  return p;
}

// time = latency * steps + bytes / bandwidth, least squares weighted by 1/t (between absolute error, where
// the largest transfers would decide alone, and relative error, where the smallest would); both kept >= 0.
Link fit_link(const std::vector<double>& steps, const std::vector<double>& bytes, const std::vector<double>& t) {
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
  for (size_t i = 0; i < t.size(); i++) {
    const double w = 1 / t[i];
    a11 += w * steps[i] * steps[i];
    a12 += w * steps[i] * bytes[i];
    a22 += w * bytes[i] * bytes[i];
    b1 += w * steps[i] * t[i];
    b2 += w * bytes[i] * t[i];
  }
  const double det = a11 * a22 - a12 * a12;
  double alpha = det != 0 ? (b1 * a22 - b2 * a12) / det : 0, inv_beta = det != 0 ? (a11 * b2 - a12 * b1) / det : 0;
  if (alpha < 0) {
    alpha = 0;
    inv_beta = b2 / a22;
  }
  if (inv_beta <= 0) {
    inv_beta = 1e-15;
    alpha = b1 / a11;
  }
  Link l;
  l.latency = alpha;
  l.bandwidth = 1 / inv_beta;
  return l;
}

// One collective's alpha-beta fit: the median of `reps` calls at each element count, the slowest rank's.
// The buffers are floats; a bf16 call reads them as twice as many 16-bit words and uses the first `count`.
Link fit_collective(Communicator& world, CollKind kind, DType dt, const std::vector<size_t>& counts, int reps,
                    std::string* raw) {
  const int N = world.world();
  std::vector<double> steps, bytes, t;
  for (size_t c : counts) {
    std::vector<float> big(c * N, 1.0f), small(c, 1.0f);  // (c*N), (c) elements of dt at most
    std::vector<double> ts;
    for (int r = 0; r < reps + 1; r++) {
      world.barrier();
      const double t0 = now_seconds();
      WorkPtr w;
      if (kind == CollKind::all_gather) w = world.all_gather_async(big.data(), small.data(), c, dt);
      if (kind == CollKind::reduce_scatter) w = world.reduce_scatter_async(small.data(), big.data(), c, dt, ReduceOp::avg);
      if (kind == CollKind::all_reduce) w = world.all_reduce_async(big.data(), c * N, dt, ReduceOp::avg);
      w->wait();
      if (r > 0) ts.push_back(now_seconds() - t0);
    }
    const double tm = world.all_reduce_max(median(ts));  // done when the slowest rank is
    const size_t count = kind == CollKind::all_reduce ? c * N : c;
    steps.push_back(collective_steps(kind, N));
    bytes.push_back((double)collective_bytes(kind, count, dt, N));
    t.push_back(tm);
  }
  *raw += str(raw->empty() ? "" : "; ", collkind_name(kind), dt == DType::BF16 ? " bf16" : "", ":");
  for (size_t i = 0; i < t.size(); i++) *raw += str(" ", (int64_t)bytes[i], " B ", t[i] * 1e3, " ms");
  return fit_link(steps, bytes, t);
}

// The three collectives in fp32, and the two reductions again in bf16 (--reduce-dtype bf16: MPI sums those
// in a user-defined op, src/dist/comm_mpi.cpp, at its own speed; a bf16 all-gather only moves bytes).
MeasuredNetwork measure_network(Communicator& world, bool quick, std::string* raw) {
  MeasuredNetwork m;
  m.ranks = world.world();
  const std::vector<size_t> counts = quick ? std::vector<size_t>{1024, 262144}
                                           : std::vector<size_t>{256, 65536, 1048576, 4194304, 16777216};
  const int reps = quick ? 2 : 5;
  m.links.all_gather = fit_collective(world, CollKind::all_gather, DType::F32, counts, reps, raw);
  m.links.reduce_scatter = fit_collective(world, CollKind::reduce_scatter, DType::F32, counts, reps, raw);
  m.links.all_reduce = fit_collective(world, CollKind::all_reduce, DType::F32, counts, reps, raw);
  m.reduce_scatter_bf16 = fit_collective(world, CollKind::reduce_scatter, DType::BF16, counts, reps, raw);
  m.all_reduce_bf16 = fit_collective(world, CollKind::all_reduce, DType::BF16, counts, reps, raw);
  m.has_bf16 = true;
  return m;
}

// The peak for MFU, measured as a run's start-up measures it (every rank at once, src/backend/peak_flops.h)
// but over the longest span, for the cache (src/runtime/peak_cache.h); rank 0's is the one kept.
CachedPeak measure_mfu_peak(Communicator& world, bool quick) {
  world.barrier();
  const BurstPeak b = measure_burst_peak(quick ? kStartupPeak : kCalibratePeak, sgemm_probe());
  CachedPeak c;
  c.key = this_cpu_peak_key();
  c.flops = b.flops;
  c.bursts = b.bursts;
  c.span_s = b.span_s;
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  c.measured = date;
  return c;
}

HardwareSpec new_cpu_file(int cores, const ComputeProfile& prof);
void merge_measurement(HardwareSpec& h, const ComputeProfile& prof, int N, const MeasuredNetwork& net,
                       const std::string& raw, const std::string& shape_note);
void print_calibration(const std::string& out, int N, int threads, double seconds, const ComputeProfile& prof,
                       const MeasuredNetwork& net, bool json, const CachedPeak& peak, const std::string& cache);

}  // namespace

void run_calibration(Communicator& world, const std::string& out, bool quick, bool json) {
  GPT_CHECK(!out.empty(), "gpt bench --calibrate: give --out FILE (the hardware file to write or update)");
  GPT_CHECK(!std::filesystem::is_directory(out), "gpt bench --calibrate --out ", out, ": is a directory; give a file path");
  const int N = world.world();
  const int threads = cpu::max_threads();
  const int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  HardwareSpec h;
  bool have = false;
  if (world.rank() == 0 && std::filesystem::exists(out)) {
    h = load_hardware(out);  // merge: keep the profiles and fits of other rank counts
    GPT_CHECK(h.kind == "cpu", "gpt bench --calibrate --out ", out, ": the file describes a ", h.kind,
              "; calibration writes cpu files (give a new path)");
    have = true;
  }
  auto loadavg_now = [] {
    std::string l;
    std::ifstream f("/proc/loadavg");
    std::getline(f, l);
    return l.substr(0, l.find(' ', l.find(' ', l.find(' ') + 1) + 1));  // the 1, 5 and 15 minute averages
  };
  const std::string load = loadavg_now();
  const double t0 = now_seconds();
  log_rank0(world, "calibrating ", N, " rank(s) x ", threads, " thread(s) on ", cores, " cores",
            quick ? " (quick)" : "", "...");
  std::string shape_note;
  ComputeProfile prof = measure_compute(world, quick, threads, &shape_note);
  const CachedPeak peak = measure_mfu_peak(world, quick);
  MeasuredNetwork net;
  std::string raw;
  if (N > 1) net = measure_network(world, quick, &raw);
  const std::string loadavg = loadavg_now();
  if (world.rank() != 0) return;

  if (!have) h = new_cpu_file(cores, prof);
  merge_measurement(h, prof, N, net, raw, shape_note);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M", std::localtime(&now));
  h.sources.push_back(str("gpt bench --calibrate", quick ? " --quick" : "", " at ", N, " rank(s) x ", threads,
                          " thread(s), ", cpu_blas_name(), ", ", date, ", load average before/after: ", load, " / ", loadavg, ", ",
                          now_seconds() - t0, " s"));
  const std::string text = hardware_to_json(h);
  parse_hardware(text, out);  // what we write must read back
  write_file_atomic(out, text.data(), text.size());
  const std::string cache = peak_cache_file();
  const std::string note = write_cached_peak(cache, peak);
  if (!note.empty()) std::fprintf(stderr, "warning: %s\n", note.c_str());
  print_calibration(out, N, threads, now_seconds() - t0, prof, net, json, peak, cache);
}

namespace {

// A fresh cpu hardware file for this machine: placeholders for the links until collectives are measured.
HardwareSpec new_cpu_file(int cores, const ComputeProfile& prof) {
  HardwareSpec h;
  const std::string model = cpu_model_name();
  h.name = str("this machine: ", model.empty() ? std::string("CPU") : model, ", ", cores, " cores (gpt bench --calibrate)");
  h.kind = "cpu";
  h.dtype = DType::F32;
  h.cores = cores;
  h.overlap = false;
  h.devices_per_node = 1 << 16;  // every rank of a CPU run is on this machine
  h.intra.bandwidth = prof.copy.max_y();
  h.intra.latency = 2e-5;
  h.inter = h.intra;
  h.notes.push_back("network.intra and inter are placeholders (memcpy bandwidth, 20 us): measured fits replace them "
                    "for the rank counts in network.measured (mpirun -n R gpt bench --calibrate --out this file)");
  h.notes.push_back("network.overlap false: OpenMPI progresses nonblocking collectives only inside MPI calls "
                    "(src/dist/comm_mpi.cpp), so the model exposes every collective");
  return h;
}

// The file's note that starts with `tag`, replaced by tag + text.
void replace_note(HardwareSpec& h, const std::string& tag, const std::string& text) {
  h.notes.erase(std::remove_if(h.notes.begin(), h.notes.end(), [&](const std::string& n) { return n.rfind(tag, 0) == 0; }),
                h.notes.end());
  h.notes.push_back(tag + text);
}

// Replaces the profile (and at N > 1 the collective fits) of this rank count; the file's peak and bandwidths
// follow.
void merge_measurement(HardwareSpec& h, const ComputeProfile& prof, int N, const MeasuredNetwork& net,
                       const std::string& raw, const std::string& shape_note) {
  h.profiles.erase(std::remove_if(h.profiles.begin(), h.profiles.end(),
                                  [&](const ComputeProfile& p) { return p.ranks == prof.ranks && p.threads == prof.threads; }),
                   h.profiles.end());
  h.profiles.push_back(prof);
  std::sort(h.profiles.begin(), h.profiles.end(),
            [](const ComputeProfile& a, const ComputeProfile& b) { return a.ranks != b.ranks ? a.ranks < b.ranks : a.threads < b.threads; });
  replace_note(h, str("products with a short side at ", prof.ranks, " rank(s) x ", prof.threads,
                      " thread(s), time over the curve's shape of the same M*N*K (gemm_edge's fit): "),
               shape_note);
  if (N > 1) {
    h.measured.erase(std::remove_if(h.measured.begin(), h.measured.end(), [&](const MeasuredNetwork& m) { return m.ranks == N; }),
                     h.measured.end());
    h.measured.push_back(net);
    replace_note(h, str("measured collectives at ", N, " ranks (bytes sent per rank, median time): "), raw);
    std::sort(h.measured.begin(), h.measured.end(), [](const MeasuredNetwork& a, const MeasuredNetwork& b) { return a.ranks < b.ranks; });
  }
  h.peak_flops = 0;
  for (const ComputeProfile& p : h.profiles)
    if (p.ranks == 1) h.peak_flops = std::max(h.peak_flops, p.gemm.max_y());
  if (h.peak_flops == 0) h.peak_flops = prof.gemm.max_y();
  h.host_bandwidth = std::max(h.host_bandwidth, prof.stream.max_y());
  h.pcie_bandwidth = std::max(h.pcie_bandwidth, prof.copy.max_y());
}

void print_calibration(const std::string& out, int N, int threads, double seconds, const ComputeProfile& prof,
                       const MeasuredNetwork& net, bool json, const CachedPeak& peak, const std::string& cache) {
  if (json) {
    std::printf("{\"calibrated\": \"%s\", \"ranks\": %d, \"threads\": %d, \"peak_gflops\": %.2f, \"stream_gbps\": %.2f, "
                "\"gemm_edge\": %.4g, \"gemm_backward_edge\": %.4g, \"seconds\": %.1f, \"mfu_peak_gflops\": %.2f, \"mfu_peak_bursts\": %d, \"mfu_peak_span_s\": %.2f, "
                "\"peak_cache\": %s}\n",
                out.c_str(), N, threads, prof.gemm.max_y() / 1e9, prof.stream.max_y() / 1e9, prof.gemm_edge, prof.gemm_backward_edge, seconds,
                peak.flops / 1e9,
                peak.bursts, peak.span_s, json_quote(cache).c_str());
  } else {
    std::printf("calibrated %d rank(s) x %d thread(s) in %.1f s: sgemm up to %.1f GFLOP/s (a product's side of d "
                "runs at d / (d + e), e = %.4g, %.4g in backward), stream up to %.2f GB/s, memcpy up to %.2f GB/s\n",
                N, threads, seconds, prof.gemm.max_y() / 1e9, prof.gemm_edge, prof.gemm_backward_edge, prof.stream.max_y() / 1e9,
                prof.copy.max_y() / 1e9);
    if (N > 1) {
      std::printf("network at %d ranks: all_gather %.3g GB/s + %.3g us/step, reduce_scatter %.3g GB/s + %.3g us/step, "
                  "all_reduce %.3g GB/s + %.3g us/step\n",
                  N, net.links.all_gather.bandwidth / 1e9, net.links.all_gather.latency * 1e6,
                  net.links.reduce_scatter.bandwidth / 1e9, net.links.reduce_scatter.latency * 1e6,
                  net.links.all_reduce.bandwidth / 1e9, net.links.all_reduce.latency * 1e6);
      std::printf("network at %d ranks in bf16: reduce_scatter %.3g GB/s + %.3g us/step, all_reduce %.3g GB/s + %.3g us/step\n",
                  N, net.reduce_scatter_bf16.bandwidth / 1e9, net.reduce_scatter_bf16.latency * 1e6,
                  net.all_reduce_bf16.bandwidth / 1e9, net.all_reduce_bf16.latency * 1e6);
    }
    std::printf("peak for MFU: %.1f GFLOP/s per rank (sgemm, best of %d bursts over %.2f s), cached in %s\n",
                peak.flops / 1e9, peak.bursts, peak.span_s, cache.c_str());
    std::printf("wrote %s\n", out.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

}  // namespace gpt
