// The memory planner without running anything: ZeRO's Table 1 (arXiv 1910.02054) from its closed forms
// and from the paper's printed values, our own 16-bytes-per-owned-parameter accounting, bf16 (cuda) plans
// worked out by hand from the allocation sites (one rank: the compute copy instead of gather slots, also as
// pure geometry), the budget search and its errors, byte-size parsing,
// and `gpt memplan`'s flag errors and output. The plan against real runs' ledgers is in
// tests/fsdp/test_memplan_measured.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/backend/backend.h"
#include "src/cli/commands.h"
#include "src/core/check.h"
#include "src/dist/comm_world.h"
#include "src/fsdp/engine_buffers.h"
#include "src/fsdp/geometry.h"
#include "src/model/layout.h"
#include "src/plan/memplan.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

constexpr double kPsi = 7.5e9;  // ZeRO's example model
constexpr double GB = 1e9;

TEST(ZeroTable, MatchesTheClosedFormsAtEveryDegree) {
  for (int N : {1, 4, 16, 64, 1024}) {
    const ZeroRow z = zero_table(kPsi, N);
    EXPECT_DOUBLE_EQ(z.baseline, (2 + 2 + 12) * kPsi) << N;
    EXPECT_DOUBLE_EQ(z.stage1, 4 * kPsi + 12 * kPsi / N) << N;
    EXPECT_DOUBLE_EQ(z.stage2, 2 * kPsi + 14 * kPsi / N) << N;
    EXPECT_DOUBLE_EQ(z.stage3, 16 * kPsi / N) << N;
  }
}

TEST(ZeroTable, ReproducesThePapersRowForFourRanks) {
  const ZeroRow z = zero_table(kPsi, 4);
  EXPECT_DOUBLE_EQ(z.baseline / GB, 120.0);
  EXPECT_DOUBLE_EQ(z.stage1 / GB, 52.5);
  EXPECT_DOUBLE_EQ(z.stage2 / GB, 41.25);  // printed as 41.3
  EXPECT_DOUBLE_EQ(z.stage3 / GB, 30.0);
}

// Table 1 as printed (GB, rounded to the digits shown): each value within half a unit of its last digit.
TEST(ZeroTable, ReproducesThePapersPrintedColumns) {
  struct Row { int N; double s1, s2, s3, s3_digit; };  // stages 1 and 2 are printed to 0.1
  const Row rows[] = {{4, 52.5, 41.3, 30, 0.1}, {16, 35.6, 21.6, 7.5, 0.1}, {64, 31.4, 16.6, 1.88, 0.01},
                      {1024, 30.1, 15.1, 0.12, 0.01}};
  for (const Row& r : rows) {
    const ZeroRow z = zero_table(kPsi, r.N);
    EXPECT_NEAR(z.baseline / GB, 120, 1e-9) << r.N;
    EXPECT_NEAR(z.stage1 / GB, r.s1, 0.05 + 1e-9) << r.N;
    EXPECT_NEAR(z.stage2 / GB, r.s2, 0.05 + 1e-9) << r.N;
    EXPECT_NEAR(z.stage3 / GB, r.s3, r.s3_digit / 2 + 1e-9) << r.N;
  }
}

GPTConfig tiny(int L, int NH, int C, int max_seq_len = 64) {
  GPTConfig c = tiny_config(L, NH, C, max_seq_len, 257);
  return c;
}

// Our accounting: 16 bytes (fp32 param, grad, m, v) per owned parameter, units padded to a multiple of G.
TEST(MemPlanOurAccounting, SixteenBytesPerOwnedParameter) {
  const GPTConfig c = tiny(3, 3, 96);
  // the root unit: wte, wpe and the final layernorm
  const int64_t C = 96, root = 384 * C + 64 * C + 2 * C, block = 12 * C * C + 13 * C;
  for (int N : {1, 2, 3, 4, 7}) {
    MemPlanInput in;
    in.cfg = c;
    in.world = N;
    const MemPlan p = plan_memory(in);
    const int64_t owned = (root + N - 1) / N + 3 * ((block + N - 1) / N);
    EXPECT_EQ(p.psi, root + 3 * block);
    EXPECT_EQ(p.model_state_bytes(), 16 * owned) << N;
    EXPECT_EQ(p.at(MemDomain::device, MemCat::param_shard) + p.at(MemDomain::device, MemCat::grad_shard) +
                  p.at(MemDomain::device, MemCat::optim_state),
              16 * owned)
        << N;
    EXPECT_LE(16.0 * p.psi / N, (double)p.model_state_bytes());
    EXPECT_LT((double)p.model_state_bytes(), 16.0 * (p.psi / N + 5));  // padding: < 1 element per unit
  }
}

// The depth family member nearest ZeRO's 7.5B with GPT-2's vocabulary: Psi(L) with C = 64L, by hand.
TEST(MemPlanOurAccounting, ClosestFamilyMemberToSevenPointFiveBillion) {
  GPTConfig base;
  base.finalize();
  auto psi = [](int64_t L) {
    const int64_t C = 64 * L;
    return 50304 * C + 1024 * C + L * (12 * C * C + 13 * C) + 2 * C;
  };
  EXPECT_EQ(depth_family_config(53, base).num_params(), psi(53));
  EXPECT_EQ(closest_family_depth(kPsi, base), 53);
  EXPECT_LT(std::abs(psi(53) - (int64_t)kPsi), std::abs(psi(52) - (int64_t)kPsi));
  EXPECT_LT(std::abs(psi(53) - (int64_t)kPsi), std::abs(psi(54) - (int64_t)kPsi));
}

// A bf16 (cuda backend) plan worked out by hand from the allocation sites: d2-shaped (L2 NH2 C128,
// V257 -> Vp384, maxT 64), 2 ranks, full shard, 2 gather slots, B=1, T=8.
TEST(MemPlanBF16, HandComputedDeviceBytes) {
  MemPlanInput in;
  in.cfg = tiny(2, 2, 128);
  in.world = 2;
  in.B = 1;
  in.T = 8;
  in.compute = DType::BF16;
  const MemPlan p = plan_memory(in);
  // units: root 384*128 + 64*128 + 2*128 (wte, wpe, the final layernorm) = 57600, block 12*128^2 + 13*128 =
  // 198272; all even, so shards 28800, 99136 (x2): 227072 owned elements
  EXPECT_EQ(p.at(MemDomain::device, MemCat::param_shard), 4 * 227072);
  EXPECT_EQ(p.at(MemDomain::device, MemCat::grad_shard), 4 * 227072);
  EXPECT_EQ(p.at(MemDomain::device, MemCat::optim_state), 8 * 227072);
  // bf16 gather slots: root 57600 + 2 x 198272
  EXPECT_EQ(p.at(MemDomain::device, MemCat::gathered_param), 2 * (57600 + 2 * 198272));
  // grad slots: 3 full fp32 (57600 + 2 x 198272) + 3 fp32 reduce-scatter outputs (28800 + 2 x 99136)
  EXPECT_EQ(p.at(MemDomain::device, MemCat::gathered_grad), 4 * (57600 + 2 * 198272) + 4 * (28800 + 2 * 99136));
  // activations, N = 8 rows: per layer ln1 2048 + stats 64 + qkv 6144 + atty 2048 + probs 2*8*8*2 = 256 + res2
  // 2048 + ln2 2048 + stats 64 + fch 8192 + gelu 8192 = 31104; fixed: resid 3*2048, lnf 2048 + 64, logits
  // 8*384*2 = 6144, losses/inputs/targets 96, dres 2048, dwide 2*8192, dnarrow 2*2048, the fp64 loss total 8
  EXPECT_EQ(p.at(MemDomain::device, MemCat::activation),
            2 * 31104 + 3 * 2048 + 2048 + 64 + 6144 + 96 + 2048 + 2 * 8192 + 2 * 2048 + 8);
  // host: the pinned staging of inputs and targets, 2 x 8 int32
  EXPECT_EQ(p.at(MemDomain::host, MemCat::activation), 64);
  // workspace: bf16 staging of the shard per slot (28800 + 2 x 99136), cuBLASLt 32 MiB, scratch = the fc
  // bias-gradient partials 64 x 512 x 4 (ties with layernorm's 128 x 2 x 128 x 4, beats attention 15104 B)
  EXPECT_EQ(p.at(MemDomain::device, MemCat::workspace), 2 * (28800 + 2 * 99136) + (32 << 20) + 64 * 512 * 4);
  EXPECT_EQ(p.at(MemDomain::device, MemCat::host_offload), 0);
  int64_t sum = 0;
  for (int c = 0; c < kMemCats; c++) sum += p.at(MemDomain::device, (MemCat)c);
  EXPECT_EQ(p.device_peak, sum);
  EXPECT_EQ(p.host_peak, 64);
}

// The same model on ONE rank (G = 1, no offload): the compute copy (fsdp/geometry.h). Every unit keeps a bf16
// copy of its parameters, written by AdamW, so there are no gather slots and no bf16 staging: gathered_param
// is 2 bytes per parameter, workspace only the cuBLASLt workspace and the op scratch. Gradients go straight
// into the grad shards (one rank), so there are no gradient slots either.
TEST(MemPlanBF16, OneRankKeepsABf16ComputeCopy) {
  MemPlanInput in;
  in.cfg = tiny(2, 2, 128);
  in.world = 1;
  in.B = 1;
  in.T = 8;
  in.compute = DType::BF16;
  for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none}) {
    in.fsdp.strategy = st;
    const MemPlan p = plan_memory(in);
    const int64_t psi = 57600 + 2 * 198272;  // 454144, unpadded at G = 1
    EXPECT_EQ(p.psi, psi);
    EXPECT_EQ(p.at(MemDomain::device, MemCat::param_shard), 4 * psi);
    EXPECT_EQ(p.at(MemDomain::device, MemCat::grad_shard), 4 * psi);
    EXPECT_EQ(p.at(MemDomain::device, MemCat::optim_state), 8 * psi);
    EXPECT_EQ(p.at(MemDomain::device, MemCat::gathered_param), 2 * psi);
    EXPECT_EQ(p.at(MemDomain::device, MemCat::gathered_grad), 0);
    EXPECT_EQ(p.rotating_slots, 0);
    // activations as in HandComputedDeviceBytes (the same B, T)
    EXPECT_EQ(p.at(MemDomain::device, MemCat::activation),
              2 * 31104 + 3 * 2048 + 2048 + 64 + 6144 + 96 + 2048 + 2 * 8192 + 2 * 2048 + 8);
    EXPECT_EQ(p.at(MemDomain::device, MemCat::workspace), (32 << 20) + 64 * 512 * 4);
    EXPECT_EQ(p.at(MemDomain::device, MemCat::host_offload), 0);
    EXPECT_EQ(p.host_peak, 64);
  }
  // With the optimizer offloaded the rule is off: the device keeps a bf16 shard copy (param_shard), the root
  // slot and two rotating slots, and each slot's bf16 staging is not needed (the copy is the gather input).
  in.fsdp.strategy = ShardStrategy::none;
  in.fsdp.offload = OffloadMode::optimizer;
  const MemPlan off = plan_memory(in);
  EXPECT_EQ(off.at(MemDomain::device, MemCat::param_shard), 2 * 454144);
  EXPECT_EQ(off.at(MemDomain::device, MemCat::gathered_param), 2 * (57600 + 2 * 198272));
  EXPECT_EQ(off.rotating_slots, 2);
}

// The compute-copy rule as pure geometry (fsdp/geometry.h): bf16 compute, G = 1 and no offload -> buffers()
// lists one compute_copy per unit (device, gathered_param, 2 bytes per padded element) and no gather slot,
// no staging, no other parameter copy. G > 1, any offload, or fp32 compute (direct params) turn it off.
TEST(EngineGeometryRules, Bf16ComputeCopyReplacesTheGatherSlots) {
  const Layout layout(tiny(2, 2, 128));
  std::vector<int64_t> numel;
  for (int u = 0; u < layout.num_units(); u++) numel.push_back(layout.unit(u).numel);
  ASSERT_EQ(numel, (std::vector<int64_t>{57600, 198272, 198272}));
  auto count = [](const std::vector<BufferSpec>& bs, EngineBuffer what) {
    int n = 0;
    for (const BufferSpec& b : bs) n += b.what == what;
    return n;
  };
  struct Case { int world; ShardStrategy st; int group_flag; };
  const Case on[] = {{1, ShardStrategy::full, 0}, {1, ShardStrategy::grad_op, 0}, {1, ShardStrategy::none, 0},
                     {4, ShardStrategy::none, 0}, {4, ShardStrategy::hybrid, 1}};
  for (const Case& c : on) {
    FsdpOptions o;
    o.strategy = c.st;
    o.shard_group = c.group_flag;
    const EngineGeometry g(numel, c.world, 0, o, DType::BF16);
    const std::string what = str("N=", c.world, " shard=", FsdpOptions::name(c.st));
    EXPECT_EQ(g.group, 1) << what;
    EXPECT_TRUE(g.compute_copy) << what;
    EXPECT_FALSE(g.direct_params) << what;
    EXPECT_TRUE(g.resident_params()) << what;
    EXPECT_EQ(g.gather_slots(), 0) << what;
    EXPECT_EQ(g.rotating_slots, 0) << what;
    const std::vector<BufferSpec> bs = engine_buffer_specs(g);
    for (EngineBuffer none : {EngineBuffer::slot_data, EngineBuffer::slot_shard_compute, EngineBuffer::upload_stage,
                              EngineBuffer::param_dev, EngineBuffer::refresh_f32})
      EXPECT_EQ(count(bs, none), 0) << what << " lists buffer kind " << (int)none;
    int64_t copy_bytes = 0;
    int seen = 0;
    for (const BufferSpec& b : bs) {
      if (b.what != EngineBuffer::compute_copy) continue;
      EXPECT_EQ(b.index, seen) << what;
      EXPECT_EQ(b.domain, MemDomain::device) << what;
      EXPECT_EQ(b.cat, MemCat::gathered_param) << what;
      EXPECT_EQ(b.bytes, 2 * numel[(size_t)seen]) << what;  // G = 1: padded == numel
      copy_bytes += b.bytes;
      seen++;
    }
    EXPECT_EQ(seen, 3) << what;
    EXPECT_EQ(copy_bytes, 2 * (57600 + 2 * 198272)) << what;
    int64_t gathered = 0, workspace = 0;
    for (const BufferSpec& b : bs) {
      if (b.cat == MemCat::gathered_param) gathered += b.bytes;
      if (b.cat == MemCat::workspace) workspace += b.bytes;
    }
    EXPECT_EQ(gathered, copy_bytes) << what;
    EXPECT_EQ(workspace, 0) << what;
  }
  // Off: G = 2 (full at two ranks), offload at one rank, fp32 compute (direct params: nothing at all).
  {
    FsdpOptions o;
    const EngineGeometry g(numel, 2, 1, o, DType::BF16);
    EXPECT_FALSE(g.compute_copy);
    EXPECT_EQ(count(engine_buffer_specs(g), EngineBuffer::compute_copy), 0);
    EXPECT_EQ(count(engine_buffer_specs(g), EngineBuffer::slot_data), 3);
    EXPECT_EQ(count(engine_buffer_specs(g), EngineBuffer::slot_shard_compute), 3);
  }
  for (OffloadMode off : {OffloadMode::optimizer, OffloadMode::params}) {
    FsdpOptions o;
    o.strategy = ShardStrategy::none;
    o.offload = off;
    const EngineGeometry g(numel, 1, 0, o, DType::BF16);
    EXPECT_FALSE(g.compute_copy) << FsdpOptions::name(off);
    EXPECT_EQ(count(engine_buffer_specs(g), EngineBuffer::compute_copy), 0) << FsdpOptions::name(off);
    EXPECT_EQ(count(engine_buffer_specs(g), EngineBuffer::slot_data), 3) << FsdpOptions::name(off);
  }
  {
    FsdpOptions o;
    const EngineGeometry g(numel, 1, 0, o, DType::F32);
    EXPECT_TRUE(g.direct_params);
    EXPECT_FALSE(g.compute_copy);
    EXPECT_EQ(g.gather_slots(), 0);
    for (const BufferSpec& b : engine_buffer_specs(g)) EXPECT_NE(b.cat, MemCat::gathered_param) << (int)b.what;
  }
}

// --attention fused: each layer keeps (B, NH, T) fp32 log-sum-exps instead of (B, NH, T, T) bf16
// probabilities, and the scratch loses the simple path's head copies and (T, T) matrices. Worked by hand
// for the d2 shape at B=4, T=256 (where the simple path's attention scratch is the largest request).
TEST(MemPlanBF16, FusedAttentionStateAndScratch) {
  MemPlanInput in;
  in.cfg = tiny(2, 2, 128, 256);
  in.B = 4;
  in.T = 256;
  in.compute = DType::BF16;
  const MemPlan simple = plan_memory(in);
  in.attention = AttentionPath::fused;
  const MemPlan fused = plan_memory(in);
  const int64_t probs = 4 * 2 * 256 * 256 * 2, lse = 4 * 2 * 256 * 4;  // per layer
  EXPECT_EQ(simple.at(MemDomain::device, MemCat::activation) - fused.at(MemDomain::device, MemCat::activation),
            2 * (probs - lse));
  // simple: 7 head copies of N*C bf16 (262144 each) + S fp32 (2097152) + dS bf16 (1048576);
  // fused: D (4*2*256 fp32 = 8192) loses to the fc bias-gradient partials 64 x 512 x 4 = 131072.
  EXPECT_EQ(simple.at(MemDomain::device, MemCat::workspace) - fused.at(MemDomain::device, MemCat::workspace),
            (7 * 262144 + 2097152 + 1048576) - 131072);
  in.compute = DType::F32;
  EXPECT_THROW(plan_memory(in), Error);  // the cpu backend has no fused path
}

void expect_error(const MemPlanInput& in, const std::string& needle);

// --attention cudnn: each layer keeps the fused path's (B, NH, T) fp32 log-sum-exps; the scratch holds the
// backward's fp32 dQ accumulator (B*T*C*4) and row terms (B*NH*T*4), 256-aligned, plus the cuDNN plans'
// workspace, which only building the plans on a GPU tells: measured, the plan is exact; not measured, it is
// counted as 0 and the plan says it is not exact. Worked by hand for the d2 shape at B=4, T=256.
TEST(MemPlanBF16, CudnnAttentionStateAndScratch) {
  MemPlanInput in;
  in.cfg = tiny(2, 2, 128, 256);
  in.B = 4;
  in.T = 256;
  in.compute = DType::BF16;
  in.attention = AttentionPath::fused;
  const MemPlan fused = plan_memory(in);
  in.attention = AttentionPath::cudnn;
  const MemPlan unmeasured = plan_memory(in);
  EXPECT_TRUE(fused.exact);
  EXPECT_FALSE(unmeasured.exact);
  EXPECT_EQ(unmeasured.at(MemDomain::device, MemCat::activation), fused.at(MemDomain::device, MemCat::activation));
  const int64_t dq_accum = 4 * 256 * 128 * 4, dsum = 4 * 2 * 256 * 4;  // 524288 + 8192 beat the fc partials 131072
  EXPECT_EQ(unmeasured.at(MemDomain::device, MemCat::workspace) - fused.at(MemDomain::device, MemCat::workspace),
            dq_accum + dsum - 131072);
  in.cudnn_workspace = cuda::CudnnPlanWorkspace{1000, 3000};  // the backward's 3000 rounds up to 3072
  const MemPlan measured = plan_memory(in);
  EXPECT_TRUE(measured.exact);
  EXPECT_EQ(measured.at(MemDomain::device, MemCat::workspace) - unmeasured.at(MemDomain::device, MemCat::workspace),
            3072);
  in.cudnn_workspace = cuda::CudnnPlanWorkspace{int64_t{1} << 20, 0};  // a forward workspace larger than it all
  EXPECT_EQ(plan_memory(in).at(MemDomain::device, MemCat::workspace) - fused.at(MemDomain::device, MemCat::workspace),
            (int64_t{1} << 20) - 131072);
  // T = 1 runs the closed form: no plans, no attention scratch, nothing unknown
  in.cudnn_workspace.reset();
  in.T = 1;
  const MemPlan one = plan_memory(in);
  EXPECT_TRUE(one.exact);
  in.attention = AttentionPath::fused;
  EXPECT_EQ(one.at(MemDomain::device, MemCat::workspace), plan_memory(in).at(MemDomain::device, MemCat::workspace));
  in.attention = AttentionPath::cudnn;
  in.compute = DType::F32;
  expect_error(in, "--attention cudnn: the cpu backend has only the simple path");
}

// Recompute and offload move bytes the way the modes say (bf16: the model states of offload go to the host).
// --offload activations, worked by hand (fp32, 5 layers, C = 128, B = 1, T = 8: N = 8 rows, one block input
// is 8 x 128 x 4 = 4096 bytes): under full recompute a layer keeps only its input, so the device drops the
// inputs of 5 layers for a ring of 3 (two fewer) and the host holds the first 2 (the last 3 keep their
// slots); under none a layer also keeps every field (ln1 4096 + stats 64 + qkv 12288 + atty 4096 + probs
// 8*8*2*4 = 512 + res2 4096 + ln2 4096 + stats 64 + fch 16384 + gelu 16384 = 62080), the same way.
// Gather slots are capped by the units there are: with every block in one unit (--wrap blocks:L) there is
// one non-root unit, so K = 2 or 3 allocates one rotating slot: root 57600 + one unit of 2 x 198272 (bf16).
TEST(MemPlanBF16, GatherSlotsNeverOutnumberTheUnits) {
  MemPlanInput in;
  in.cfg = tiny(2, 2, 128);
  in.world = 2;
  in.B = 1;
  in.T = 8;
  in.compute = DType::BF16;
  in.wrap = WrapPolicy::parse("blocks:2");
  for (int K : {1, 2, 3}) {
    in.fsdp.gather_slots = K;
    const MemPlan p = plan_memory(in);
    EXPECT_EQ(p.rotating_slots, 1) << K;
    EXPECT_EQ(p.at(MemDomain::device, MemCat::gathered_param), 2 * (57600 + 2 * 198272)) << K;
  }
}

TEST(MemPlanActivations, OffloadKeepsARingOnTheDeviceAndEveryLayerOnTheHost) {
  MemPlanInput in;
  in.cfg = tiny(5, 2, 128);
  in.B = 1;
  in.T = 8;
  for (const char* rc : {"full", "none"}) {
    in.recompute = RecomputePolicy::parse(rc);
    in.offload_activations = false;
    const MemPlan on = plan_memory(in);
    in.offload_activations = true;
    const MemPlan off = plan_memory(in);
    const int64_t input = 4096, fields = std::string(rc) == "none" ? 62080 : 0, layer = input + fields;
    EXPECT_EQ(on.at(MemDomain::device, MemCat::activation) - off.at(MemDomain::device, MemCat::activation),
              2 * layer)
        << rc;
    EXPECT_EQ(off.at(MemDomain::host, MemCat::activation) - on.at(MemDomain::host, MemCat::activation), 2 * layer)
        << rc;
  }
}

TEST(MemPlanBF16, OffloadMovesStatesToTheHost) {
  MemPlanInput in;
  in.cfg = tiny(2, 2, 128);
  in.world = 2;
  in.B = 1;
  in.T = 8;
  in.compute = DType::BF16;
  const MemPlan on_device = plan_memory(in);
  in.fsdp.offload = OffloadMode::params;
  const MemPlan off = plan_memory(in);
  EXPECT_EQ(off.at(MemDomain::host, MemCat::param_shard) + off.at(MemDomain::host, MemCat::grad_shard) +
                off.at(MemDomain::host, MemCat::optim_state),
            on_device.model_state_bytes());
  EXPECT_EQ(off.at(MemDomain::device, MemCat::param_shard), 0);
  // host: the three grad slots' fp32 reduce-scatter copies; device: the fp32 upload stages, the root's and one
  // more than the two rotating gather slots (an upload runs one unit ahead of its gather)
  EXPECT_EQ(off.at(MemDomain::host, MemCat::host_offload), 4 * (28800 + 2 * 99136));
  EXPECT_EQ(off.at(MemDomain::device, MemCat::host_offload), 4 * (28800 + 3 * 99136));
  EXPECT_LT(off.device_peak, on_device.device_peak);
}

void expect_error(const MemPlanInput& in, const std::string& needle) {
  try {
    plan_memory(in);
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MemPlanErrors, IncompatibleSettingsNameTheirFlag) {
  MemPlanInput in;
  in.cfg = tiny(4, 4, 128);
  in.world = 4;
  MemPlanInput a = in;
  a.fsdp.shard_group = 2;  // without hybrid
  expect_error(a, "--shard-group is only for --shard hybrid");
  MemPlanInput b = in;
  b.fsdp.strategy = ShardStrategy::hybrid;
  expect_error(b, "--shard hybrid needs --shard-group");
  b.fsdp.shard_group = 3;
  expect_error(b, "--shard-group 3 must divide --world 4");
  MemPlanInput c = in;
  c.recompute = RecomputePolicy::parse("every:5");
  expect_error(c, "--recompute every:5 exceeds the model's 4 layers");
  MemPlanInput d = in;
  d.T = 65;
  expect_error(d, "-T 65 exceeds --seq-len 64");
  MemPlanInput e = in;
  e.fsdp.gather_slots = 0;
  expect_error(e, "--gather-slots");
  MemPlanInput f = in;
  f.world = 0;
  expect_error(f, "--world");
}

MemPlanInput small_shape() {
  MemPlanInput in;
  in.cfg.vocab_size = 257;
  in.cfg.max_seq_len = 256;
  in.cfg.finalize();
  in.world = 4;
  in.B = 2;
  in.T = 256;
  return in;
}

TEST(MemPlanBudget, LargestFamilyMemberIsTheLastThatFits) {
  const MemPlanInput shape = small_shape();
  auto need = [&](int L) {
    MemPlanInput in = shape;
    in.cfg = depth_family_config(L, shape.cfg);
    return plan_memory(in).device_peak;
  };
  for (int L : {2, 5, 12, 20}) {
    EXPECT_EQ(largest_model_that_fits(need(L), shape).depth, L);
    EXPECT_EQ(largest_model_that_fits(need(L + 1) - 1, shape).depth, L);
    const ModelFit fit = largest_model_that_fits(need(L), shape);
    EXPECT_EQ(fit.cfg.channels, 64 * L);
    EXPECT_EQ(fit.cfg.num_heads, L);
    EXPECT_EQ(fit.plan.device_peak, need(L));
  }
  // every:K starts the family at dK
  MemPlanInput every = shape;
  every.recompute = RecomputePolicy::parse("every:4");
  EXPECT_EQ(largest_model_that_fits(int64_t(1) << 50, every).depth >= 4, true);
}

TEST(MemPlanBudget, TooSmallForAnyModelSaysWhatTheSmallestNeeds) {
  const MemPlanInput shape = small_shape();
  MemPlanInput d2 = shape;
  d2.cfg = depth_family_config(2, shape.cfg);
  const int64_t need = plan_memory(d2).device_peak;
  try {
    largest_model_that_fits(need - 1, shape);
    ADD_FAILURE() << "expected a budget error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--budget"), std::string::npos) << m;
    EXPECT_NE(m.find("even the smallest model (d2"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(need)), std::string::npos) << m;
  }
}

TEST(MemPlanByteSizes, UnitsAndErrors) {
  EXPECT_EQ(parse_byte_size("24GiB", "--budget"), int64_t(24) << 30);
  EXPECT_EQ(parse_byte_size("1.5GB", "--budget"), 1500000000);
  EXPECT_EQ(parse_byte_size("512 MiB", "--budget"), int64_t(512) << 20);
  EXPECT_EQ(parse_byte_size("80gb", "--budget"), 80000000000);
  EXPECT_EQ(parse_byte_size("1000", "--budget"), 1000);
  EXPECT_EQ(parse_byte_size("2e9", "--budget"), 2000000000);
  EXPECT_EQ(parse_byte_size("3KB", "--budget"), 3000);
  for (const char* bad : {"", "abc", "-1GB", "24XB", "1e30", "nan"}) EXPECT_THROW(parse_byte_size(bad, "--budget"), Error) << bad;
  EXPECT_EQ(format_bytes(96), "96 B");
  EXPECT_EQ(format_bytes(int64_t(3) << 29), "1.50 GiB");
}

// ---- the command ------------------------------------------------------------------------------------

std::string run_cmd(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto comm = make_single_communicator();
  testing::internal::CaptureStdout();
  try {
    cmd_memplan((int)argv.size(), argv.data(), *comm);
  } catch (...) {
    testing::internal::GetCapturedStdout();
    throw;
  }
  return testing::internal::GetCapturedStdout();
}

std::string cmd_error(const std::vector<std::string>& args) {
  try {
    run_cmd(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MemPlanCommand, FlagErrorsNameTheFlag) {
  EXPECT_NE(cmd_error({"--config", "d2", "--shard-group", "2"}).find("--shard-group is only for --shard hybrid"),
            std::string::npos);
  EXPECT_NE(cmd_error({"--world", "3", "--shard", "hybrid", "--shard-group", "2"}).find("must divide --world 3"),
            std::string::npos);
  EXPECT_NE(cmd_error({"--config", "d4", "--recompute", "every:5"}).find("every:5 exceeds the model's 4 layers"),
            std::string::npos);
  EXPECT_NE(cmd_error({"--config", "d2", "-T", "2048"}).find("-T 2048 exceeds --seq-len 1024"), std::string::npos);
  EXPECT_NE(cmd_error({"--recompute", "sometimes"}).find("--recompute"), std::string::npos);
  EXPECT_NE(cmd_error({"--offload", "params,"}).find("--offload"), std::string::npos);
  EXPECT_NE(cmd_error({"--offload", "optimizer,params"}).find("at most one"), std::string::npos);
  EXPECT_NE(cmd_error({"--wrap", "min-params:0"}).find("--wrap min-params:N"), std::string::npos);
  EXPECT_NE(cmd_error({"--device", "tpu"}).find("--device"), std::string::npos);
  EXPECT_NE(cmd_error({"--budget", "lots"}).find("--budget"), std::string::npos);
  EXPECT_NE(cmd_error({"--budget", "1GiB", "--zero-table"}).find("give one"), std::string::npos);
  EXPECT_NE(cmd_error({"--frobnicate", "1"}).find("unknown flag --frobnicate"), std::string::npos);
  EXPECT_NE(cmd_error({"--attention", "sparse"}).find("--attention: expected auto, simple, fused or cudnn"),
            std::string::npos);
  EXPECT_NE(cmd_error({"--attention", "cudnn"}).find("--attention cudnn: the cpu backend has only the simple path"),
            std::string::npos);
  EXPECT_NE(cmd_error({"--device", "cuda", "--attention", "fused", "--n-head", "4"}).find("--attention fused"),
            std::string::npos);
  const std::string tiny_budget = cmd_error({"--budget", "1MiB"});
  EXPECT_NE(tiny_budget.find("--budget 1.00 MiB (1048576 bytes): even the smallest model (d2"), std::string::npos)
      << tiny_budget;
}

TEST(MemPlanCommand, JsonCarriesThePlan) {
  const std::string out = run_cmd({"--config", "d2", "--vocab", "257", "--seq-len", "64", "--world", "4", "--shard",
                                   "hybrid", "--shard-group", "2", "--offload", "optimizer", "--recompute",
                                   "selective", "-B", "2", "-T", "32", "--json"});
  MemPlanInput in;
  in.cfg = tiny(2, 2, 128);
  in.world = 4;
  in.fsdp.strategy = ShardStrategy::hybrid;
  in.fsdp.shard_group = 2;
  in.fsdp.offload = OffloadMode::optimizer;
  in.recompute = RecomputePolicy::parse("selective");
  in.B = 2;
  in.T = 32;
  const MemPlan p = plan_memory(in);
  EXPECT_NE(out.find(str("\"device_peak_bytes\": ", p.device_peak)), std::string::npos) << out;
  EXPECT_NE(out.find(str("\"host_peak_bytes\": ", p.host_peak)), std::string::npos) << out;
  EXPECT_NE(out.find("\"group\": 2"), std::string::npos) << out;
  EXPECT_EQ(out.front(), '{');
}

// --attention auto plans the path gpt train would take on this machine (or, without a GPU, on an sm_90 one with
// this build's cuDNN), and the JSON names it and whether the plan is exact.
TEST(MemPlanCommand, AutoAttentionIsResolvedAsTrainingWould) {
  const std::string out = run_cmd({"--config", "d2", "--device", "cuda", "-B", "4", "-T", "64", "--json"});
  const AttentionPath path = resolve_attention_path("auto", planning_attention_target(), 128, 2);
  EXPECT_NE(out.find(str("\"attention\": \"", attention_path_name(path), "\"")), std::string::npos) << out;
  const bool exact = path != AttentionPath::cudnn || cuda_available();
  EXPECT_NE(out.find(str("\"exact\": ", exact ? "true" : "false")), std::string::npos) << out;
  const std::string cpu = run_cmd({"--config", "d2", "--json"});
  EXPECT_NE(cpu.find("\"attention\": \"simple\", \"exact\": true"), std::string::npos) << cpu;
}

TEST(MemPlanCommand, TableBudgetAndZeroReports) {
  const std::string table = run_cmd({"--config", "d12", "--world", "8"});
  for (const char* word : {"param_shard", "gathered_param", "activation", "host_offload", "peak total"})
    EXPECT_NE(table.find(word), std::string::npos) << word << "\n" << table;
  const std::string budget = run_cmd({"--budget", "24GiB", "--world", "8", "-B", "8", "-T", "1024"});
  EXPECT_NE(budget.find("largest model of the depth family"), std::string::npos) << budget;
  EXPECT_NE(budget.find("d48:"), std::string::npos) << budget;
  const std::string zero = run_cmd({"--zero-table"});
  for (const char* v : {"120.00", "52.50", "41.25", "30.00", "35.6", "21.56", "7.50", "1.88", "0.12"})
    EXPECT_NE(zero.find(v), std::string::npos) << v << "\n" << zero;
}

}  // namespace
}  // namespace gpt::test
