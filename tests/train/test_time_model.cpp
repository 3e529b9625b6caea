// The time model (src/plan/timemodel.h) on hand-made hardware: its bytes against the closed-form volumes,
// the directions its predictions must move (more bandwidth is never slower, more gather slots never expose
// more communication, overlap never exposes more than no overlap, recompute adds the forward's products),
// the hardware files in data/hardware, and one-line errors naming the file and field of a bad one. The
// bytes are held equal to the communication ledger's under mpiexec in tests/fsdp/test_time_model_ledger.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "src/cli/time_report.h"
#include "src/core/check.h"
#include "src/plan/collectives.h"
#include "src/model/layout.h"
#include "src/plan/hardware.h"
#include "src/plan/timemodel.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

// A small GPU-like machine with flat rates: the arithmetic is easy to follow.
std::string gpu_json(double intra_bw = 100e9, double inter_bw = 200e9, bool overlap = true) {
  return str(R"({"name": "test gpu", "kind": "gpu", "dtype": "bf16", "peak_flops": 1e14, "op_overhead_s": 1e-6,
    "profiles": [{"gemm": [[1e6, 1e12], [1e9, 5e13]], "stream": 1e12}],
    "host": {"bandwidth": 1e11, "pcie": 2e10},
    "network": {"overlap": )",
             overlap ? "true" : "false", R"(, "devices_per_node": 4,
      "intra": {"bandwidth": )",
             intra_bw, R"(, "latency_s": 5e-6}, "intra_topology": "nvswitch", "inter": {"bandwidth_per_node": )", inter_bw,
             R"(, "latency_s": 1e-5}}})");
}

std::string cpu_json(bool overlap = false) {
  return str(R"({"name": "test cpu", "kind": "cpu", "dtype": "fp32", "peak_flops": 1e11, "cores": 4,
    "profiles": [{"ranks": 1, "threads": 4, "gemm": [[1e4, 1e10], [1e8, 8e10]], "stream": [[1e4, 5e9], [1e7, 2e10]],
                  "copy": 8e9, "kernels": {"classifier_forward": 4e8, "classifier_backward": 3e8}},
                 {"ranks": 2, "threads": 2, "gemm": 4e10, "stream": 1e10}],
    "network": {"overlap": )",
             overlap ? "true" : "false", R"(, "intra": {"bandwidth": 2e9, "latency_s": 2e-5},
      "measured": [{"ranks": 2, "all_gather": {"bandwidth": 3e9, "latency_s": 1e-5},
                    "reduce_scatter": {"bandwidth": 1e9, "latency_s": 2e-5},
                    "all_reduce": {"bandwidth": 1.5e9, "latency_s": 1e-5}}]}})");
}

TimeModelInput input(int layers, int C, int world, ShardStrategy st, DType dt) {
  TimeModelInput in;
  in.run.cfg = tiny_config(layers, C / 64, C, 256, 1000);
  in.run.world = world;
  in.run.fsdp.strategy = st;
  if (st == ShardStrategy::hybrid) in.run.fsdp.shard_group = 2;
  in.run.B = 4;
  in.run.T = 128;
  in.run.compute = dt;
  return in;
}

// Per-step bytes of the engine's collectives, from the ZeRO / FSDP volume formulas with padded units
// (tests/fsdp/test_fsdp_ledgers.cpp states the same): full gathers every unit twice but the root once.
TEST(TimeModel, BytesFollowTheVolumeFormulas) {
  const HardwareSpec hw = parse_hardware(gpu_json(), "gpu.json");
  for (int N : {1, 2, 3, 4, 8}) {
    for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none}) {
      for (DType rdt : {DType::F32, DType::BF16}) {
        TimeModelInput in = input(3, 128, N, st, DType::BF16);
        in.run.fsdp.reduce_dtype = rdt;
        in.ranks_per_node = std::min(N, 4);
        const TimePlan p = plan_time(in, hw);
        const Layout l(in.run.cfg);
        const int G = st == ShardStrategy::none ? 1 : N;
        int64_t psi = 0, root = 0, ar = 0;
        for (int u = 0; u < l.num_units(); u++) {
          const int64_t padded = (l.unit(u).numel + G - 1) / G * G;
          psi += padded;
          if (u == 0) root = padded;
          ar += 2 * l.unit(u).numel * (int64_t)dtype_size(rdt) * (N - 1) / N;
        }
        const int64_t rs = (int64_t)dtype_size(rdt);
        const std::string what = str(FsdpOptions::name(st), " N=", N, " reduce ", dtype_name(rdt));
        if (st == ShardStrategy::none) {
          EXPECT_EQ(p.bytes[(int)CollKind::all_reduce], N > 1 ? ar : 0) << what;
          EXPECT_EQ(p.bytes[(int)CollKind::all_gather] + p.bytes[(int)CollKind::reduce_scatter], 0) << what;
        } else {
          const int64_t gathers = st == ShardStrategy::full ? 2 * psi - root : psi;
          EXPECT_EQ(p.bytes[(int)CollKind::all_gather], 2 * gathers * (N - 1) / N) << what;  // bf16 params
          EXPECT_EQ(p.bytes[(int)CollKind::reduce_scatter], rs * psi * (N - 1) / N) << what;
          EXPECT_EQ(p.bytes[(int)CollKind::all_reduce], 0) << what;
        }
      }
    }
  }
}

TEST(TimeModel, NoSyncReducesOnTheLastMicroStepOnly) {
  const HardwareSpec hw = parse_hardware(gpu_json(), "gpu.json");
  TimeModelInput in = input(2, 128, 4, ShardStrategy::full, DType::BF16);
  in.grad_accum = 3;
  const TimePlan sync = plan_time(in, hw);
  in.run.fsdp.no_sync = true;
  const TimePlan nosync = plan_time(in, hw);
  EXPECT_EQ(sync.bytes[(int)CollKind::reduce_scatter], 3 * nosync.bytes[(int)CollKind::reduce_scatter]);
  EXPECT_EQ(sync.bytes[(int)CollKind::all_gather], nosync.bytes[(int)CollKind::all_gather]);
}

TEST(TimeModel, MoreBandwidthIsNeverSlower) {
  for (bool overlap : {true, false}) {
    for (int N : {2, 4, 8, 16}) {
      for (ShardStrategy st :
           {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none, ShardStrategy::hybrid}) {
        TimeModelInput in = input(4, 256, N, st, DType::BF16);
        double prev = INFINITY;
        for (double bw : {1e9, 1e10, 1e11, 1e12}) {
          const TimePlan p = plan_time(in, parse_hardware(gpu_json(bw, 2 * bw, overlap), "gpu.json"));
          EXPECT_LE(p.step_s, prev * (1 + 1e-12)) << FsdpOptions::name(st) << " N=" << N << " bw " << bw;
          prev = p.step_s;
        }
      }
    }
  }
}

TEST(TimeModel, MoreGatherSlotsNeverExposeMoreCommunication) {
  for (bool overlap : {true, false}) {
    for (int N : {2, 4}) {
      TimeModelInput in = input(6, 256, N, ShardStrategy::full, DType::BF16);
      double prev = INFINITY;
      for (int K : {1, 2, 3, 4, 8}) {
        in.run.fsdp.gather_slots = K;
        const TimePlan p = plan_time(in, parse_hardware(gpu_json(5e9, 5e9, overlap), "gpu.json"));
        EXPECT_LE(p.exposed_comm_s, prev * (1 + 1e-12)) << "K=" << K << " N=" << N;
        prev = p.exposed_comm_s;
      }
    }
  }
}

TEST(TimeModel, OverlapExposesNoMoreThanProgressInWait) {
  for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none}) {
    TimeModelInput in = input(4, 256, 4, st, DType::BF16);
    const TimePlan with = plan_time(in, parse_hardware(gpu_json(5e9, 5e9, true), "gpu.json"));
    const TimePlan without = plan_time(in, parse_hardware(gpu_json(5e9, 5e9, false), "gpu.json"));
    EXPECT_LE(with.exposed_comm_s, without.exposed_comm_s * (1 + 1e-12)) << FsdpOptions::name(st);
    EXPECT_NEAR(without.exposed_comm_s, without.comm_s + 0 * with.comm_s, 1e-3 * without.comm_s + 1e-4)
        << "without overlap every collective is waited for";
    EXPECT_DOUBLE_EQ(with.comm_s, without.comm_s);
    EXPECT_GT(with.comm_s, 0);
  }
}

TEST(TimeModel, PrefetchHidesGathersBehindCompute) {
  // Slow compute, fast links: with two slots the next unit's gather runs during this unit's forward.
  TimeModelInput in = input(6, 256, 4, ShardStrategy::full, DType::BF16);
  const HardwareSpec hw = parse_hardware(gpu_json(1e12, 1e12, true), "gpu.json");
  in.run.fsdp.gather_slots = 2;
  const TimePlan two = plan_time(in, hw);
  in.run.fsdp.gather_slots = 1;
  const TimePlan one = plan_time(in, hw);
  EXPECT_LT(two.exposed_comm_s, one.exposed_comm_s);
  EXPECT_LT(two.exposed_comm_s, 0.5 * two.comm_s);
}

TEST(TimeModel, RecomputeAddsTheForwardProducts) {
  const HardwareSpec hw = parse_hardware(cpu_json(), "cpu.json");
  TimeModelInput in = input(4, 128, 1, ShardStrategy::full, DType::F32);
  const TimePlan none = plan_time(in, hw);
  in.run.recompute = RecomputePolicy::parse("full");
  const TimePlan full = plan_time(in, hw);
  in.run.recompute = RecomputePolicy::parse("every:2");
  const TimePlan every2 = plan_time(in, hw);
  in.run.recompute = RecomputePolicy::parse("selective");
  const TimePlan sel = plan_time(in, hw);
  // A recomputed layer re-runs its forward up to the MLP's output projection (gpt.cpp's only_scratch pass):
  // qkv, attproj and fc, 2N(3C^2 + C^2 + 4C^2) = 16 N C^2, and the attention's causal products, which the cpu kernel runs in row blocks of 64 queries: block i has
  // nr rows over (i*64 + nr) keys, forward S = Q K^T and O = P V, 2 * 2 * nr * ncols * hs each head.
  const double B = in.run.B, T = in.run.T, C = in.run.cfg.channels, NH = in.run.cfg.num_heads, hs = C / NH, N = B * T;
  double attn = 0;
  for (double r0 = 0; r0 < T; r0 += 64) {
    const double nr = std::min(64.0, T - r0);
    attn += B * NH * 2 * 2 * nr * (r0 + nr) * hs;
  }
  const double refwd = 2 * N * (3 * C * C + C * C + 4 * C * C) + attn;
  const double fwd = refwd + 2 * N * 4 * C * C;  // fcproj is not re-run
  EXPECT_NEAR(full.hardware_flops - none.hardware_flops, 4 * refwd, 1e-6 * fwd);
  EXPECT_NEAR(every2.hardware_flops - none.hardware_flops, 2 * refwd, 1e-6 * fwd);  // layers 0 and 2
  // selective re-runs layernorms, attention and GELU: the attention's products, none of the matmuls
  EXPECT_GT(sel.hardware_flops, none.hardware_flops);
  EXPECT_LT(sel.hardware_flops - none.hardware_flops, 4 * 0.2 * fwd);
  EXPECT_GT(full.step_s, sel.step_s);
  EXPECT_GT(sel.step_s, none.step_s);
  EXPECT_GT(full.phases.recompute, 0);
  EXPECT_EQ(none.phases.recompute, 0);
  EXPECT_NEAR(full.mfu * full.step_s, none.mfu * none.step_s, 1e-9);  // MFU counts model flops only
}

TEST(TimeModel, OffloadCostsCopiesAndHostWork) {
  const HardwareSpec hw = parse_hardware(gpu_json(), "gpu.json");
  TimeModelInput in = input(4, 256, 2, ShardStrategy::full, DType::BF16);
  const TimePlan dev = plan_time(in, hw);
  in.run.fsdp.offload = OffloadMode::optimizer;
  const TimePlan opt = plan_time(in, hw);
  in.run.fsdp.offload = OffloadMode::params;
  const TimePlan par = plan_time(in, hw);
  EXPECT_GT(opt.step_s, dev.step_s);
  EXPECT_GT(par.step_s, opt.step_s);  // a host -> device copy before every gather
  // Without offload the only copies are the token ids' upload (B*T inputs and targets, int32) and the loss
  // read back (8 bytes), each one launch (op_overhead_s 1e-6) plus its bytes at the file's PCIe 2e10 B/s.
  EXPECT_LE(dev.phases.copies, 3 * 1e-6 + (2.0 * in.run.B * in.run.T * 4 + 8) / 2e10 + 1e-12);
  EXPECT_GT(par.phases.copies, 10 * dev.phases.copies);
  // the cpu backend: copies are memcpy on the compute timeline
  TimeModelInput c = input(2, 128, 2, ShardStrategy::full, DType::F32);
  const HardwareSpec cpu = parse_hardware(cpu_json(), "cpu.json");
  const TimePlan cdev = plan_time(c, cpu);
  c.run.fsdp.offload = OffloadMode::optimizer;
  EXPECT_GT(plan_time(c, cpu).step_s, cdev.step_s);
}

TEST(TimeModel, StepAddsUpAndReportsThroughput) {
  const HardwareSpec hw = parse_hardware(cpu_json(), "cpu.json");
  for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::grad_op, ShardStrategy::none, ShardStrategy::hybrid}) {
    TimeModelInput in = input(2, 128, st == ShardStrategy::hybrid ? 4 : 2, st, DType::F32);
    in.grad_accum = 2;
    const TimePlan p = plan_time(in, hw);
    const StepPhases& ph = p.phases;
    EXPECT_NEAR(ph.forward + ph.recompute + ph.backward + ph.engine + ph.copies + ph.exposed_comm + ph.optimizer +
                    ph.host_wait,
                p.step_s, 1e-9 * p.step_s)
        << FsdpOptions::name(st);
    EXPECT_NEAR(p.tokens_per_s, 2.0 * 4 * 128 * in.run.world / p.step_s, 1e-6 * p.tokens_per_s);
    EXPECT_GT(p.mfu, 0);
    EXPECT_LT(p.mfu, 1);
  }
}

TEST(TimeModel, CpuProfilesAreChosenByRanksAndThreads) {
  const HardwareSpec hw = parse_hardware(cpu_json(), "cpu.json");
  TimeModelInput in = input(2, 128, 2, ShardStrategy::full, DType::F32);
  const TimePlan two = plan_time(in, hw);  // 2 ranks on 4 cores: 2 threads each, the second profile
  EXPECT_NE(two.profile.find("2 ranks x 2 threads"), std::string::npos) << two.profile;
  EXPECT_TRUE(two.notes.empty() || two.notes[0].find("no profile") == std::string::npos);
  EXPECT_NE(two.network.find("measured with 2 ranks"), std::string::npos) << two.network;
  in.run.world = 4;
  const TimePlan four = plan_time(in, hw);  // 4 ranks x 1 thread: not calibrated, scaled from the nearest
  EXPECT_NE(four.profile.find("scaled"), std::string::npos) << four.profile;
  ASSERT_FALSE(four.notes.empty());
  EXPECT_NE(four.notes[0].find("mpirun -n 4"), std::string::npos) << four.notes[0];
}

// A calibrated file's bf16 fits price the bf16 reductions (MPI sums them in its own op); the bf16 all-gather
// and the fp32 calls keep the fp32 fits, and a file without bf16 fits prices bf16 by bytes on the fp32 ones.
TEST(TimeModel, BfSixteenReductionsTakeTheirOwnFits) {
  std::string json = cpu_json();
  const std::string at = R"("all_reduce": {"bandwidth": 1.5e9, "latency_s": 1e-5})";
  const HardwareSpec plain = parse_hardware(json, "cpu.json");
  json.replace(json.find(at), at.size(), std::string(at) + R"(,
      "reduce_scatter_bf16": {"bandwidth": 2.5e8, "latency_s": 3e-5}, "all_reduce_bf16": {"bandwidth": 4e8, "latency_s": 4e-5})");
  const HardwareSpec hw = parse_hardware(json, "cpu.json");
  const NetworkModel with(hw, 2), without(plain, 2);
  const int64_t b = 1 << 20;  // bytes each rank sends
  EXPECT_DOUBLE_EQ(with.seconds(CollKind::reduce_scatter, b, 2, 2, DType::BF16), 3e-5 + b / 2.5e8);
  EXPECT_DOUBLE_EQ(with.seconds(CollKind::all_reduce, b, 2, 2, DType::BF16), 2 * 4e-5 + b / 4e8);
  EXPECT_DOUBLE_EQ(with.seconds(CollKind::all_gather, b, 2, 2, DType::BF16), 1e-5 + b / 3e9);
  EXPECT_DOUBLE_EQ(with.seconds(CollKind::reduce_scatter, b, 2, 2, DType::F32), 2e-5 + b / 1e9);
  EXPECT_DOUBLE_EQ(without.seconds(CollKind::reduce_scatter, b, 2, 2, DType::BF16), 2e-5 + b / 1e9);
  // the fits survive the file's round trip, and one without the other is refused, naming the field
  const HardwareSpec again = parse_hardware(hardware_to_json(hw), "again.json");
  ASSERT_EQ(again.measured.size(), 1u);
  EXPECT_TRUE(again.measured[0].has_bf16);
  EXPECT_DOUBLE_EQ(again.measured[0].all_reduce_bf16.bandwidth, 4e8);
  EXPECT_FALSE(parse_hardware(hardware_to_json(plain), "again.json").measured[0].has_bf16);
  std::string half = cpu_json();
  half.replace(half.find(at), at.size(), std::string(at) + R"(, "all_reduce_bf16": {"bandwidth": 4e8, "latency_s": 4e-5})");
  try {
    parse_hardware(half, "half.json");
    ADD_FAILURE() << "accepted an all_reduce_bf16 fit without reduce_scatter_bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("half.json: field network.measured[0]"), std::string::npos) << e.what();
  }
}

TEST(TimeModel, RefusesAHardwareFileOfTheOtherDtype) {
  TimeModelInput in = input(2, 128, 1, ShardStrategy::full, DType::F32);
  try {
    plan_time(in, parse_hardware(gpu_json(), "gpu.json"));
    FAIL() << "a bf16 file priced an fp32 run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu.json"), std::string::npos) << e.what();
  }
}

TEST(Hardware, ShippedFilesParseAndRoundTrip) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(GPT_SOURCE_DIR) + "/data/hardware")) {
    if (entry.path().extension() != ".json") continue;
    n++;
    const HardwareSpec h = load_hardware(entry.path().string());
    EXPECT_FALSE(h.sources.empty()) << entry.path() << " cites no source";
    EXPECT_GT(h.peak_flops, 0);
    const HardwareSpec again = parse_hardware(hardware_to_json(h), "again.json");
    EXPECT_DOUBLE_EQ(again.peak_flops, h.peak_flops);
    EXPECT_EQ(again.profiles.size(), h.profiles.size());
    EXPECT_NEAR(again.intra.bandwidth, h.intra.bandwidth, 1e-5 * h.intra.bandwidth);
    EXPECT_NEAR(again.profiles[0].gemm.at(3e8), h.profiles[0].gemm.at(3e8), 1e-5 * h.profiles[0].gemm.at(3e8));
  }
  EXPECT_GE(n, 4);
}

TEST(Hardware, CurvesInterpolateInLogLogAndHoldFlat) {
  RateCurve c;
  c.points = {{1e2, 1.0}, {1e4, 100.0}};
  EXPECT_DOUBLE_EQ(c.at(1), 1.0);
  EXPECT_DOUBLE_EQ(c.at(1e6), 100.0);
  EXPECT_NEAR(c.at(1e3), 10.0, 1e-9);
}

// Every bad file: one line, naming the file and the field.
TEST(Hardware, BadFilesGiveOneLineErrorsNamingFileAndField) {
  const std::string good = gpu_json();
  struct Case {
    std::string json, field;
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::vector<Case> cases = {
      {replace(R"("peak_flops": 1e14)", R"("peak_flops": -1)"), "peak_flops"},
      {replace(R"("peak_flops": 1e14)", R"("peak_flops": "fast")"), "peak_flops"},
      {replace(R"("peak_flops": 1e14, )", ""), "peak_flops"},
      {replace(R"("kind": "gpu")", R"("kind": "tpu")"), "kind"},
      {replace(R"("dtype": "bf16")", R"("dtype": "fp8")"), "dtype"},
      {replace(R"("stream": 1e12)", R"("stream": [[1e3, 5], [1e2, 6]])"), "profiles[0].stream[1]"},
      {replace(R"("stream": 1e12)", R"("stream": [[1e3]])"), "profiles[0].stream[0]"},
      {replace(R"("stream": 1e12)", R"("strem": 1e12)"), "profiles[0].stream"},
      {replace(R"("gemm": [[1e6, 1e12], [1e9, 5e13]])", R"("gemm": [[1e6, 0]])"), "profiles[0].gemm[0]"},
      {replace(R"("latency_s": 5e-6)", R"("latency_s": 5e-6, "bandwdth": 3)"), "network.intra.bandwdth"},
      {replace(R"("bandwidth": 1e+11)", R"("bandwidth": 0)"), "network.intra.bandwidth"},
      {replace(R"("pcie": 2e10)", R"("pcie": true)"), "host.pcie"},
      {replace(R"("overlap": true)", R"("overlap": 1)"), "network.overlap"},
      {replace(R"("name": "test gpu", )", R"("name": "test gpu", "colour": "green", )"), "colour"},
      {"{\"kind\": \"gpu\"", ""},  // not JSON at all: the reader names the file and the byte
      {"[1, 2]", "(top level)"},
  };
  for (const Case& c : cases) {
    try {
      parse_hardware(c.json, "bad.json");
      ADD_FAILURE() << "accepted: " << c.json;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind("bad.json", 0), 0u) << msg;
      EXPECT_NE(msg.find(c.field), std::string::npos) << "expected field '" << c.field << "' in: " << msg;
    }
  }
  try {
    load_hardware("/nonexistent/hw.json");
    ADD_FAILURE() << "read a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--hardware /nonexistent/hw.json"), std::string::npos) << e.what();
  }
}

TEST(TimeModelSweep, RowsForEveryWorldAndStrategy) {
  const HardwareSpec hw = parse_hardware(gpu_json(), "gpu.json");
  TimeModelInput in = input(4, 256, 1, ShardStrategy::full, DType::BF16);
  SweepSpec sw;
  sw.worlds = {1, 2, 8};
  sw.strategies = {ShardStrategy::full, ShardStrategy::none, ShardStrategy::hybrid};
  const std::string out = sweep_report(in, hw, sw, true);
  int rows = 0, skipped = 0;
  for (size_t at = 0; (at = out.find('\n', at)) != std::string::npos; at++) rows++;
  for (size_t at = 0; (at = out.find("skipped", at)) != std::string::npos; at++) skipped++;
  EXPECT_EQ(rows, 9);
  EXPECT_EQ(skipped, 2);  // hybrid at N = 1 and 2 (G = min(N, 4 per node) = N); N = 8 runs with G = 4
  EXPECT_THROW(parse_int_list("1,x", "--sweep-world"), Error);
  EXPECT_THROW(parse_strategy_list("full,zero3", "--sweep-shard"), Error);
}

}  // namespace
}  // namespace gpt::test
