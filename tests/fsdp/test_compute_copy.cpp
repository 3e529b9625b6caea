// The engine's bf16 parameter paths on CPU ranks, through a test backend whose compute dtype is bf16 (its
// memory, copies, conversions and optimizer are the cpu backend's; it has no model ops, so nothing here runs
// a model). What a unit's acquire returns must be the bf16 rounding of its fp32 parameters after loading
// (set_unit_from_host, shard_from_host), after an AdamW step (adamw_step: with the compute copy the update
// writes it through ShardSegment::param_out) and after loading again: under --shard none (G = 1: the compute
// copy, no gather slots) and, as the controls, under --shard full (gathers through slots; at one rank G = 1
// and the compute copy again), --offload optimizer (the gather input refreshed by refresh_device_copy) and
// --offload params (staged and converted at each gather).
// The engine's allocations must be exactly the geometry's buffers (engine_buffer_specs) and the plan's (gpt memplan) figures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "src/core/check.h"
#include "src/core/dtype.h"
#include "src/fsdp/engine.h"
#include "src/fsdp/engine_buffers.h"
#include "src/plan/memplan.h"
#include "src/train/optimizer.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

// bf16 compute on host memory: what the engine needs of a backend (memory, copies, conversions, sums,
// AdamW), nothing of the model's. AdamW's param_out gets the updated parameters rounded to bf16, as the cuda
// kernel writes them.
class Bf16EngineBackend final : public Backend {
 public:
  std::string name() const override { return "bf16 test"; }
  DeviceKind kind() const override { return DeviceKind::cpu; }
  DType compute_dtype() const override { return DType::BF16; }
  struct Info : DeviceInfo {
    PeakFlops peak_flops() const override { return PeakFlops{1.0, "none"}; }
  };
  DeviceInfo& device_info() const override { return info_; }
  mutable Info info_;

  void zero(void* p, size_t bytes) override { cpu_->zero(p, bytes); }
  void copy_d2d(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_h2d(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_d2h(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void synchronize() override {}
  void f32_to_compute(void* dst, const float* src, size_t n) override { cpu_->f32_to_bf16(dst, src, n); }
  void compute_to_f32(float* dst, const void* src, size_t n) override { cpu_->bf16_to_f32(dst, src, n); }
  void f32_to_bf16(void* dst, const float* src, size_t n) override { cpu_->f32_to_bf16(dst, src, n); }
  void bf16_to_f32(float* dst, const void* src, size_t n) override { cpu_->bf16_to_f32(dst, src, n); }

  void adamw_update(float* param, const float* grad, float* m, float* v, void* param_out, size_t n,
                    const AdamWParams& hp) override {
    cpu_->adamw_update(param, grad, m, v, nullptr, n, hp);
    if (param_out) cpu_->f32_to_bf16(param_out, param, n);
  }
  double sum_squares(const float* x, size_t n) override { return cpu_->sum_squares(x, n); }
  void accumulate_f32(float* y, const float* x, size_t n, float divisor) override {
    cpu_->accumulate_f32(y, x, n, divisor);
  }

  // No model ops here.
  void encoder_forward(void*, const int*, const void*, const void*, int, int, int) override { none(); }
  void encoder_backward(float*, float*, const void*, const int*, int, int, int) override { none(); }
  void layernorm_forward(void*, float*, float*, const void*, const void*, const void*, int, int) override { none(); }
  void layernorm_backward(void*, float*, float*, const void*, const void*, const void*, const float*, const float*,
                          int, int) override {
    none();
  }
  void residual_layernorm_forward(void*, void*, float*, float*, const void*, const void*, const void*, const void*,
                                  int, int) override {
    none();
  }
  void layernorm_backward_residual(void*, float*, float*, const void*, const void*, const void*, const float*,
                                   const float*, int, int) override {
    none();
  }
  void matmul_forward(void*, const void*, const void*, const void*, int, int, int) override { none(); }
  void matmul_gelu_forward(void*, void*, const void*, const void*, const void*, int, int, int) override { none(); }
  void matmul_backward(void*, float*, float*, const void*, const void*, const void*, int, int, int) override {
    none();
  }
  void gelu_matmul_backward(void*, float*, float*, const void*, const void*, const void*, const void*, int, int,
                            int) override {
    none();
  }
  size_t attention_state_bytes(int, int, int) const override { return 0; }
  void attention_forward(void*, void*, const void*, int, int, int, int) override { none(); }
  void attention_backward(void*, const void*, const void*, const void*, const void*, int, int, int, int) override {
    none();
  }
  void attention_cached_forward(void*, void*, void*, const void*, int, int, int, int, int, int) override { none(); }
  void gelu_forward(void*, const void*, size_t) override { none(); }
  void gelu_backward(void*, const void*, const void*, size_t) override { none(); }
  void residual_forward(void*, const void*, const void*, size_t) override { none(); }
  void residual_backward(void*, const void*, size_t) override { none(); }
  void classifier_forward(float*, const void*, const int*, int, int, int) override { none(); }
  void classifier_backward(void*, float*, double*, const int*, float, int, int, int) override { none(); }
  void embedding_slice_forward(void*, const int*, const void*, int, int, int, int) override { none(); }
  void embedding_slice_backward(float*, const void*, const int*, int, int, int, int) override { none(); }
  void position_forward(void*, const void*, int, int, int, int) override { none(); }
  void position_backward(float*, const void*, int, int, int, int) override { none(); }
  void bias_forward(void*, const void*, int, int) override { none(); }
  void bias_backward(float*, const void*, int, int) override { none(); }
  void classifier_slice_stats(float*, float*, const void*, const int*, int, int, int, int, int) override { none(); }
  void classifier_slice_sumexp(float*, const void*, const float*, int, int, int) override { none(); }
  void classifier_slice_backward(void*, float*, double*, const float*, const float*, const float*, const int*, int, int,
                                 float, int, int) override {
    none();
  }

 protected:
  void* raw_alloc(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void raw_free(void* p) override { std::free(p); }
  void* raw_alloc_host(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void raw_free_host(void* p) override { std::free(p); }

 private:
  [[noreturn]] static void none() { fail("the bf16 engine test backend has no model ops"); }
  std::unique_ptr<Backend> cpu_ = make_backend("cpu");
};

GPTConfig shape() { return tiny_config(2, 2, 32, 8, 61); }

FsdpOptions options(ShardStrategy st, OffloadMode off) {
  FsdpOptions o;
  o.strategy = st;
  o.offload = off;
  return o;
}

// Deterministic values for unit u's n elements (salt picks the set).
std::vector<float> values(int u, int64_t n, int salt, float scale) {
  std::vector<float> v((size_t)n);
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = (uint64_t)(u + 1) * 2654435761ULL + (uint64_t)i * 40503ULL + (uint64_t)salt * 97ULL;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 32;
    v[(size_t)i] = scale * ((float)(x % 20001) / 10000.0f - 1.0f);
  }
  return v;
}

// Every unit, in a forward pass: what acquire returns (its first numel bf16 words) against the bf16
// rounding of its fp32 parameters (gathered to the host: collective). Returns the mismatches.
int64_t acquired_mismatches(FsdpEngine& e, Backend& be) {
  int64_t bad = 0;
  for (int u : e.layout().pass_order(Pass::forward)) {
    const std::vector<float> full = e.gather_unit_to_host(u);
    const void* p = e.acquire(u, Pass::forward);
    std::vector<uint16_t> got(full.size());
    be.copy_d2h(got.data(), p, got.size() * sizeof(uint16_t));
    e.release(u, Pass::forward);
    for (size_t i = 0; i < full.size(); i++) bad += got[i] != bf16_round(full[i]);
  }
  return bad;
}

std::string label(const FsdpOptions& o) {
  return str("shard=", FsdpOptions::name(o.strategy), " offload=", FsdpOptions::name(o.offload),
             " N=", world().world());
}

TEST(ComputeCopy, AcquireReadsTheBf16ParamsAfterLoadUpdateAndReload) {
  Communicator& w = world();
  const Layout layout(shape());
  for (ShardStrategy st : {ShardStrategy::none, ShardStrategy::full}) {
    for (OffloadMode off : {OffloadMode::none, OffloadMode::optimizer, OffloadMode::params}) {
      const FsdpOptions o = options(st, off);
      Bf16EngineBackend be;
      FsdpEngine e(be, w, layout, o);
      const EngineGeometry& g = e.geometry();
      EXPECT_EQ(g.compute_copy, g.group == 1 && off == OffloadMode::none) << label(o);
      EXPECT_FALSE(g.direct_params) << label(o);
      EXPECT_EQ(acquired_mismatches(e, be), 0) << label(o) << ": fresh (zeros)";
      for (int u = 0; u < layout.num_units(); u++) {
        const std::vector<float> full = values(u, layout.unit(u).numel, 1, 0.5f);
        e.set_unit_from_host(u, full.data());
      }
      EXPECT_EQ(acquired_mismatches(e, be), 0) << label(o) << ": after set_unit_from_host";
      // Gradients straight into the shards (no backward runs here), then one AdamW step that moves every
      // parameter by about lr.
      for (int u = 0; u < layout.num_units(); u++)
        e.shard_from_host(u, ShardState::grad, values(u, e.shard(u).shard_numel, 2, 1.0f));
      // The gradient norm goes through Backend::sum_squares_all (this backend keeps the default). Every rank
      // of a group set the same values, so the sum is G times one rank's (exact squares in long double).
      long double ref = 0;
      for (int u = 0; u < layout.num_units(); u++)
        for (float f : values(u, e.shard(u).shard_numel, 2, 1.0f)) ref += static_cast<long double>(f) * f;
      ref *= g.group;
      const double sumsq = e.grad_sumsq();
      EXPECT_NEAR(sumsq, static_cast<double>(ref), 1e-12 * static_cast<double>(ref)) << label(o);
      const double norm = std::sqrt(sumsq);
      EXPECT_GT(norm, 0) << label(o);
      std::vector<std::vector<float>> before;
      for (int u = 0; u < layout.num_units(); u++) before.push_back(e.gather_unit_to_host(u));
      OptimizerConfig oc;
      adamw_step(e, oc, 1e-2f, 1, norm);
      int64_t moved = 0;
      for (int u = 0; u < layout.num_units(); u++) {
        const std::vector<float> after = e.gather_unit_to_host(u);
        for (size_t i = 0; i < after.size(); i++) moved += bf16_round(after[i]) != bf16_round(before[u][i]);
      }
      EXPECT_GT(moved, layout.total_numel() / 4) << label(o) << ": the step should change most bf16 params";
      EXPECT_EQ(acquired_mismatches(e, be), 0) << label(o) << ": after an AdamW step";
      for (int u = 0; u < layout.num_units(); u++)
        e.shard_from_host(u, ShardState::param, values(u, e.shard(u).shard_numel, 3, 0.25f));
      EXPECT_EQ(acquired_mismatches(e, be), 0) << label(o) << ": after shard_from_host";
    }
  }
}

// The engine allocates exactly the geometry's buffers, and the plan states the same bytes for every category
// the engine alone fills (activations and the cuda workspace come from elsewhere): under the compute copy, the
// copy in gathered_param (2 bytes per padded element) and no slot, no staging.
TEST(ComputeCopy, AllocationsAreTheGeometryAndThePlan) {
  Communicator& w = world();
  const GPTConfig cfg = shape();
  const Layout layout(cfg);
  for (ShardStrategy st : {ShardStrategy::none, ShardStrategy::full}) {
    for (OffloadMode off : {OffloadMode::none, OffloadMode::optimizer, OffloadMode::params}) {
      const FsdpOptions o = options(st, off);
      Bf16EngineBackend be;
      FsdpEngine e(be, w, layout, o);
      const EngineGeometry& g = e.geometry();
      int64_t listed[kMemDomains][kMemCats] = {};
      for (const BufferSpec& b : engine_buffer_specs(g)) listed[(int)b.domain][(int)b.cat] += b.bytes;
      MemPlanInput in;
      in.cfg = cfg;
      in.world = w.world();
      in.fsdp = o;
      in.compute = DType::BF16;
      in.B = 1;
      in.T = cfg.max_seq_len;
      const MemPlan p = plan_memory(in);
      for (int d = 0; d < kMemDomains; d++) {
        for (int c = 0; c < kMemCats; c++) {
          const auto dom = (MemDomain)d;
          const auto cat = (MemCat)c;
          EXPECT_EQ(be.ledger().current(dom, cat), listed[d][c])
              << label(o) << ": " << memdomain_name(dom) << "/" << memcat_name(cat);
          if (cat != MemCat::activation && cat != MemCat::workspace) {
            EXPECT_EQ(p.at(dom, cat), listed[d][c])
                << label(o) << ": " << memdomain_name(dom) << "/" << memcat_name(cat);
          }
        }
      }
      if (g.compute_copy) {
        int64_t padded = 0;
        for (const UnitGeometry& ug : g.units) padded += ug.padded;
        EXPECT_EQ(be.ledger().current(MemDomain::device, MemCat::gathered_param), 2 * padded) << label(o);
        EXPECT_EQ(be.ledger().current(MemDomain::device, MemCat::workspace), 0) << label(o) << ": no staging";
        EXPECT_EQ(g.gather_slots(), 0) << label(o);
      }
    }
  }
}

}  // namespace
}  // namespace gpt::test
