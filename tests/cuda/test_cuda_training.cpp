// Whole training steps on the GPU against the CPU backend: a d2-shaped model (L2, NH2, C128, hs 64) trained
// for 10 AdamW steps from the same seed on the same batches, once per attention path. Skips without a GPU.
//
// Two checks, each with its bound derived here.
//
// 1. Loss curve: |loss_cuda - loss_cpu| <= 2e-2 * loss_cpu per step. Every activation is rounded to bf16
//    (relative 2^-8 = 3.9e-3) about a dozen times between the embedding and the logits of a 2-layer model;
//    the cross-entropy moves by at most the logits' absolute error, which stays below 5 such roundings of
//    logits of size O(1) against a loss of ~5.5 nats at the start: 2e-2 relative leaves room for the growth of
//    that difference over 10 updates and still fails on any real bug (a wrong gradient changes the loss curve
//    by far more after a few steps at lr 3e-3). The loss must also fall (step 10 < step 1 - 0.5 nats on this
//    learnable stream) on both, so two runs that do not train cannot pass by agreeing.
//
// 2. Direction of the updates, per unit. Comparing final parameters within a fraction of the distance moved
//    fails falsely: Adam's first steps move every element by about lr * sign(g), so an element whose
//    gradient is mostly rounding noise moves the full step either way. Instead:
//    a) Take out weight decay, which both runs apply alike: p_T = F p_0 - A with F = prod_t (1 - lr_t wd) (wd
//       only on matrices and embeddings), so A = F p_0 - p_T = sum_t lr_t F_t r_t, F_t = prod_{s>t} (1 - lr_s
//       wd) in (0, 1], r_t = m_t^ / (sqrt(v_t^) + eps) the Adam ratio of step t.
//    b) Noise model: the cuda gradient of element i at step t is the cpu one plus an error of at most
//       e_t = rho * rms_t (rms_t: the cpu gradient's root mean square over the unit), rho = K * 2^-8 with
//       K = 24 bf16 roundings on the path (a dozen in forward as above, as many in backward). This is a
//       statistical model of accumulated rounding (independent errors add like a root mean square), not a
//       worst-case bound: hence the safety factor below.
//    c) Settled elements: the cpu gradient keeps one sign over all steps and |g_t| >= e_t / q at every step,
//       q = 0.1. For those the cuda gradient is g_t (1 + d_t) with |d_t| <= q, so its m_t is within [1-q, 1+q]
//       of the cpu m_t (same signs: no cancellation), sqrt(v_t) within [1-q, 1+q], and r_t (eps only helps)
//       within [a, b] = [(1-q)/(1+q), (1+q)/(1-q)] times the cpu r_t, with the same sign. A is a positive
//       combination of the r_t, so A_cuda = k_i A_cpu elementwise with k_i in [a, b], and by the Polya-Szego
//       inequality cos(A_cuda, A_cpu) >= 2 sqrt(ab) / (a + b) = (1 - q^2) / (1 + q^2) over the settled
//       elements. The test asserts that bound for q_eff = 3q (the model's safety factor): cos >= 0.835. A
//       wrong gradient sends those updates elsewhere (cosine near 0 or negative).
//    d) All elements: Adam's ratio is bounded whatever the gradients (Cauchy-Schwarz on m against v),
//       |r_t| <= R_t = (1-b1)/(1-b1^t) * sqrt((1-b2^t)/(1-b2)) * sqrt(sum_{k<t} (b1^2/b2)^k), so every element
//       moves at most D = sum_t lr_t F_t R_t. With the settled part s and the rest n (at most D each, any
//       direction): cos(A_cuda, A_cpu) >= (c a |A_s|^2 - D sqrt(n) |A_n|) / (sqrt(b^2 |A_s|^2 + n D^2) |A|),
//       c the settled bound; asserted where it is positive (else it says nothing and is only printed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/common/test_paths.h"
#include "src/core/rng.h"
#include "src/dist/comm_world.h"
#include "src/io/data_loader.h"
#include "src/train/trainer.h"
#include "tests/common/learnable_shard.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

constexpr int kRoundings = 24;            // K of the noise model (b)
constexpr double kQ = 0.1;                // settled: |g| >= e / q (c)
constexpr double kSafety = 3.0;           // q_eff = kSafety * q for the asserted bound (c)

TrainOptions d2_options(const std::string& dir, const std::string& device, const std::string& attention) {
  TrainOptions o;
  o.model = tiny_config(2, 2, 128, 128, 257);
  o.config_name = "custom";
  o.train_pattern = write_learnable_shard(dir, 257, 60000, 7);
  o.B = 4;
  o.T = 128;
  o.steps = 10;
  o.lr = 3e-3f;
  o.warmup = 2;
  o.device = device;
  o.attention = attention;
  o.quiet = true;
  o.tokenizer = "none";
  o.peak_tflops = 1;
  return o;
}

struct Run {
  std::vector<float> losses, lrs;
  std::vector<std::vector<float>> init, final;      // per unit, fp32 master weights
  std::vector<std::vector<std::vector<float>>> grads;  // [step][unit], the reduced gradient of the step
};

Run train(const TrainOptions& o, bool keep_grads) {
  auto comm = make_single_communicator();
  Trainer t(o, *comm);
  Run r;
  const int units = t.engine().num_units();
  for (int u = 0; u < units; u++) r.init.push_back(t.engine().gather_unit_to_host(u));
  for (int i = 0; i < o.steps; i++) {
    const StepStats s = t.step();
    r.losses.push_back(s.loss);
    r.lrs.push_back(s.lr);
    if (!keep_grads) continue;
    r.grads.emplace_back();
    for (int u = 0; u < units; u++) {
      std::vector<float> g;
      t.engine().shard_to_host(u, ShardState::grad, g);  // one rank: the shard is the whole unit
      g.resize(r.init[u].size());
      r.grads.back().push_back(std::move(g));
    }
  }
  for (int u = 0; u < units; u++) r.final.push_back(t.engine().gather_unit_to_host(u));
  return r;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

void check_cuda_matches_cpu(const std::string& attention) {
  if (!gpt::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  const std::string dir = scratch_dir();
  const TrainOptions cpu_opt = d2_options(dir, "cpu", "simple");
  const Run cpu = train(cpu_opt, true);
  const Run gpu = train(d2_options(dir, "cuda", attention), false);

  // 1. loss curves
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); i++)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 2e-2 * cpu.losses[i]) << attention << " step " << i + 1;
  EXPECT_LT(cpu.losses.back(), cpu.losses.front() - 0.5f) << "the cpu run does not learn";
  EXPECT_LT(gpu.losses.back(), gpu.losses.front() - 0.5f) << "the cuda run does not learn";
  ASSERT_EQ(gpu.init, cpu.init) << "both runs must start from the same fp32 master weights";
  ASSERT_EQ(gpu.lrs, cpu.lrs);

  // 2. update directions
  const OptimizerConfig& oc = cpu_opt.optim;
  const double b1 = oc.beta1, b2 = oc.beta2, wd = oc.weight_decay;
  const int steps = cpu_opt.steps;
  const double rho = kRoundings / 256.0, qe = kSafety * kQ;
  const double a = (1 - qe) / (1 + qe), b = 1 / a, c_settled = (1 - qe * qe) / (1 + qe * qe);
  const Layout layout(cpu_opt.model);
  for (int u = 0; u < layout.num_units(); u++) {
    const size_t n = cpu.init[u].size();
    std::vector<double> decay(n, 0.0);  // wd of each element's tensor
    for (const TensorSpec& t : layout.unit(u).tensors)
      for (int64_t i = 0; i < t.numel; i++) decay[t.offset + i] = t.weight_decay ? wd : 0.0;
    // F (a) and D (d) for each of the two decay classes (0 or wd), then per element
    auto decay_terms = [&](double w, double& F, double& Dmax) {
      F = 1, Dmax = 0;
      for (int t = steps - 1; t >= 0; t--) {  // F_t = the product over later steps, built from the end
        const int step = t + 1;
        double geo = 0;
        for (int k = 0; k < step; k++) geo += std::pow(b1 * b1 / b2, k);
        const double R = (1 - b1) / (1 - std::pow(b1, step)) * std::sqrt((1 - std::pow(b2, step)) / (1 - b2)) * std::sqrt(geo);
        Dmax += cpu.lrs[t] * F * R;
        F *= 1 - cpu.lrs[t] * w;
      }
    };
    double F0, D0, Fw, Dw;
    decay_terms(0.0, F0, D0);
    decay_terms(wd, Fw, Dw);
    std::vector<double> A_cpu(n), A_gpu(n), D(n);
    for (size_t i = 0; i < n; i++) {
      const double F = decay[i] > 0 ? Fw : F0;
      D[i] = decay[i] > 0 ? Dw : D0;
      A_cpu[i] = F * cpu.init[u][i] - cpu.final[u][i];
      A_gpu[i] = F * gpu.init[u][i] - gpu.final[u][i];
    }
    // settled elements (c)
    std::vector<double> rms(steps);
    for (int t = 0; t < steps; t++) {
      double ss = 0;
      for (float g : cpu.grads[t][u]) ss += double(g) * g;
      rms[t] = std::sqrt(ss / n);
    }
    std::vector<double> sc, sg;  // settled A, cpu and cuda
    double an2 = 0, Dn2 = 0;     // |A_n|^2 of the rest and sum of D^2 over it
    size_t settled = 0;
    for (size_t i = 0; i < n; i++) {
      bool ok = true;
      const double sign = cpu.grads[0][u][i] >= 0 ? 1 : -1;
      for (int t = 0; t < steps && ok; t++) {
        const double g = cpu.grads[t][u][i];
        ok = g * sign > 0 && std::fabs(g) >= rho * rms[t] / kQ;
      }
      if (ok) {
        sc.push_back(A_cpu[i]), sg.push_back(A_gpu[i]), settled++;
      } else {
        an2 += A_cpu[i] * A_cpu[i], Dn2 += D[i] * D[i];
      }
    }
    const std::string name = attention + " unit " + layout.unit(u).name;
    const double all_cos = dot(A_gpu, A_cpu) / std::sqrt(dot(A_gpu, A_gpu) * dot(A_cpu, A_cpu));
    std::printf("[  update  ] %s: %zu of %zu elements settled, cosine all %.4f", name.c_str(), settled, n, all_cos);
    if (settled > 0) {
      const double s_cos = dot(sg, sc) / std::sqrt(dot(sg, sg) * dot(sc, sc));
      std::printf(", settled %.4f (bound %.4f)", s_cos, c_settled);
      EXPECT_GE(s_cos, c_settled) << name << ": the settled elements' updates point elsewhere on cuda";
      const double as2 = dot(sc, sc);
      const double lower =
          (c_settled * a * as2 - std::sqrt(Dn2) * std::sqrt(an2)) / (std::sqrt(b * b * as2 + Dn2) * std::sqrt(dot(A_cpu, A_cpu)));
      std::printf(", all-element bound %.4f%s", lower, lower > 0 ? "" : " (vacuous)");
      if (lower > 0) {
        EXPECT_GE(all_cos, lower) << name;
      }
    }
    std::printf("\n");
  }
}

TEST(CudaTraining, D2TenStepsMatchCpuSimpleAttention) { check_cuda_matches_cpu("simple"); }
TEST(CudaTraining, D2TenStepsMatchCpuFusedAttention) { check_cuda_matches_cpu("fused"); }

}  // namespace
}  // namespace gpt::test
