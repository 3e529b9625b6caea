// A hardware file's intra-node topology (network.intra_topology, src/plan/hardware.h) and how a collective
// over a group inside one node is priced by it (src/plan/collectives.cpp): on an NVSwitch node at the intra
// link whatever the group's size; on a hybrid cube mesh at the ring bandwidth the file lists for the group's
// size, checked here both on the network model and end to end (a tensor-parallel run on the cube mesh takes
// exactly as long as on an NVSwitch node whose link is that ring). The field is required in a gpu file, and
// every malformed variant is a one-line error naming the file and the field.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/plan/collectives.h"
#include "src/plan/hardware.h"
#include "src/plan/timemodel.h"
#include "tests/common/error_of.h"
#include "tests/common/test_paths.h"
#include "tests/common/tiny_config.h"

namespace gpt::test {
namespace {

constexpr double kIntra = 100e9, kInter = 10e9, kIntraLatency = 5e-6, kInterLatency = 2e-5;
constexpr double kRing2 = 20e9, kRing4 = 60e9, kRing8 = 90e9;  // deliberately unlike kIntra and each other

// A GPU-like machine of 8 devices per node; `topology` is the text spliced in after network.intra.
std::string gpu_json(const std::string& topology, double intra = kIntra, double inter = kInter) {
  return str(R"({"name": "topology test gpu", "kind": "gpu", "dtype": "bf16", "peak_flops": 1e14,
    "op_overhead_s": 1e-6, "profiles": [{"gemm": [[1e6, 1e12], [1e9, 5e13]], "stream": 1e12}],
    "host": {"bandwidth": 1e11, "pcie": 2e10},
    "network": {"overlap": true, "devices_per_node": 8, "intra": {"bandwidth": )",
             intra, R"(, "latency_s": )", kIntraLatency, "}", topology,
             R"(, "inter": {"bandwidth_per_node": )", inter, R"(, "latency_s": )", kInterLatency, "}}}");
}

const std::string kNvswitch = R"(, "intra_topology": "nvswitch")";
const std::string kCubeMesh = str(R"(, "intra_topology": "hybrid_cube_mesh", "intra_rings": [)",
                                  R"({"ranks": 2, "bandwidth": )", kRing2 * 2, R"(, "efficiency": 0.5}, )",
                                  R"({"ranks": 4, "bandwidth": )", kRing4, "}, ",
                                  R"({"ranks": 8, "bandwidth": )", kRing8, "}]");

TEST(IntraTopology, AGpuFileWithoutTheFieldIsAOneLineErrorNamingIt) {
  const std::string msg = error_of([] { parse_hardware(gpu_json(""), "no_topology.json"); });
  EXPECT_EQ(msg.rfind("no_topology.json: field network.intra_topology: missing", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(IntraTopology, MalformedTopologiesAreOneLineErrorsNamingTheField) {
  struct Case {
    std::string json, field;
  };
  const std::string cpu = R"({"name": "c", "kind": "cpu", "peak_flops": 1e11, "cores": 2,
    "profiles": [{"gemm": 1e10, "stream": 1e10}], "network": {"intra": {"bandwidth": 2e9},
    "intra_topology": "nvswitch"}})";
  const std::vector<Case> cases = {
      {gpu_json(R"(, "intra_topology": "torus")"), "network.intra_topology"},
      {gpu_json(R"(, "intra_topology": 3)"), "network.intra_topology"},
      {gpu_json(R"(, "intra_topology": "hybrid_cube_mesh")"), "network.intra_rings"},
      {gpu_json(R"(, "intra_topology": "hybrid_cube_mesh", "intra_rings": [])"), "network.intra_rings"},
      {gpu_json(kNvswitch + R"(, "intra_rings": [{"ranks": 2, "bandwidth": 1e10}])"), "network.intra_rings"},
      {gpu_json(R"(, "intra_topology": "hybrid_cube_mesh", "intra_rings": [{"ranks": 4, "bandwidth": 1e10},
                   {"ranks": 2, "bandwidth": 1e10}])"),
       "network.intra_rings[1].ranks"},
      {gpu_json(R"(, "intra_topology": "hybrid_cube_mesh", "intra_rings": [{"ranks": 16, "bandwidth": 1e10}])"),
       "network.intra_rings[0].ranks"},  // more than the node's 8 devices
      {gpu_json(R"(, "intra_topology": "hybrid_cube_mesh", "intra_rings": [{"ranks": 2, "bandwidth": -1}])"),
       "network.intra_rings[0].bandwidth"},
      {gpu_json(R"(, "intra_topology": "hybrid_cube_mesh", "intra_rings": [{"ranks": 2, "bandwith": 1e10}])"),
       "network.intra_rings[0]"},
      {cpu, "network.intra_topology"},  // a cpu file's collectives are measured fits: no topology
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] { parse_hardware(c.json, "bad.json"); });
    EXPECT_EQ(msg.rfind("bad.json: field ", 0), 0u) << msg;
    EXPECT_NE(msg.find(c.field), std::string::npos) << "expected '" << c.field << "' in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(IntraTopology, TheFileRoundTripsThroughItsWriter) {
  for (const std::string& topo : {kNvswitch, kCubeMesh}) {
    const HardwareSpec a = parse_hardware(gpu_json(topo), "a.json");
    const HardwareSpec b = parse_hardware(hardware_to_json(a), "b.json");
    EXPECT_EQ(b.intra_topology, a.intra_topology);
    ASSERT_EQ(b.intra_rings.size(), a.intra_rings.size());
    for (size_t i = 0; i < a.intra_rings.size(); i++) {
      EXPECT_EQ(b.intra_rings[i].ranks, a.intra_rings[i].ranks);
      EXPECT_DOUBLE_EQ(b.intra_rings[i].bandwidth, a.intra_rings[i].bandwidth);
    }
  }
}

TEST(IntraTopology, EveryShippedGpuFileStatesItsTopology) {
  const std::vector<std::pair<std::string, IntraTopology>> files = {
      {"a100_40gb.json", IntraTopology::nvswitch},         {"a100_80gb.json", IntraTopology::nvswitch},
      {"a100_40gb_aws_p4d.json", IntraTopology::nvswitch}, {"a100_80gb_roce.json", IntraTopology::nvswitch},
      {"h100.json", IntraTopology::nvswitch},              {"h200.json", IntraTopology::nvswitch},
      {"v100_dgx2.json", IntraTopology::nvswitch},         {"v100_dgx2h.json", IntraTopology::nvswitch},
      {"v100_32gb_8gpu_shared_host.json", IntraTopology::hybrid_cube_mesh},
      {"v100_16gb_dgx1_edr.json", IntraTopology::hybrid_cube_mesh}};
  for (const auto& [name, topo] : files) {
    const HardwareSpec h = load_hardware(source_dir() + "/data/hardware/" + name);
    EXPECT_EQ(h.intra_topology, topo) << name;
    if (topo != IntraTopology::hybrid_cube_mesh) continue;
    // The DGX-1's rings (the file's derivation): one NVLink for a pair, four for a quad, six for the node,
    // 25 GB/s each way at the 0.8 efficiency every file assumes; never above the node's 6 links.
    ASSERT_EQ(h.intra_rings.size(), 3u) << name;
    const int ranks[] = {2, 4, 8}, links[] = {1, 4, 6};
    for (int i = 0; i < 3; i++) {
      EXPECT_EQ(h.intra_rings[i].ranks, ranks[i]) << name;
      EXPECT_DOUBLE_EQ(h.intra_rings[i].bandwidth, links[i] * 25e9 * 0.8) << name << " ring of " << ranks[i];
      EXPECT_LE(h.intra_rings[i].bandwidth, h.intra.bandwidth) << name;
    }
  }
}

// seconds = latency x ring steps + bytes / bandwidth, with the bandwidth the topology gives a group of G.
TEST(IntraTopology, AGroupInsideANodeIsPricedOnItsRing) {
  const HardwareSpec nvs = parse_hardware(gpu_json(kNvswitch), "nvs.json");
  const HardwareSpec cube = parse_hardware(gpu_json(kCubeMesh), "cube.json");
  const NetworkModel on_nvs(nvs, 8), on_cube(cube, 8);
  const int64_t bytes = 48 << 20;
  for (int G : {2, 4, 8}) {
    const double ring = G == 2 ? kRing2 : G == 4 ? kRing4 : kRing8;
    for (CollKind k : {CollKind::all_gather, CollKind::reduce_scatter, CollKind::all_reduce}) {
      const double steps = collective_steps(k, G);
      EXPECT_DOUBLE_EQ(on_cube.seconds(k, bytes, G, G), kIntraLatency * steps + bytes / ring) << G;
      EXPECT_DOUBLE_EQ(on_nvs.seconds(k, bytes, G, G), kIntraLatency * steps + bytes / kIntra) << G;
    }
  }
  // A group of 16 over two nodes of 8: the node's network (R = r = 8: the whole of it), capped by its ring of 8.
  EXPECT_DOUBLE_EQ(on_cube.seconds(CollKind::all_gather, bytes, 16, 8), kInterLatency * 15 + bytes / kInter);
  const HardwareSpec fast_net = parse_hardware(gpu_json(kCubeMesh, kIntra, 1e12), "fast_net.json");
  EXPECT_DOUBLE_EQ(NetworkModel(fast_net, 8).seconds(CollKind::all_gather, bytes, 16, 8), kInterLatency * 15 + bytes / kRing8);
  // A size the cube mesh does not list cannot be priced: an error naming the file, the field and the size.
  const std::string msg = error_of([&] { on_cube.seconds(CollKind::all_gather, bytes, 3, 3); });
  EXPECT_NE(msg.find("cube.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("network.intra_rings has no ring of 3 GPUs"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TimeModelInput tp_run(int T) {
  TimeModelInput in;
  in.run.cfg = tiny_config(2, 8, 512, 256, 1000);
  in.run.world = T;  // one data-parallel rank: only the tensor-parallel group talks
  in.run.tp.size = T;
  in.run.tp.sequence_parallel = true;
  in.run.B = 4;
  in.run.T = 256;
  in.run.compute = DType::BF16;
  return in;
}

// End to end: the only collectives of a T-rank group with one data-parallel rank run inside the node, so the
// cube mesh prices the step exactly as an NVSwitch node whose link is the cube mesh's ring of T.
TEST(IntraTopology, ATensorParallelStepOnTheCubeMeshRunsAtItsRing) {
  const HardwareSpec cube = parse_hardware(gpu_json(kCubeMesh), "cube.json");
  for (int T : {2, 4, 8}) {
    const double ring = T == 2 ? kRing2 : T == 4 ? kRing4 : kRing8;
    const HardwareSpec same = parse_hardware(gpu_json(kNvswitch, ring), "ring.json");
    const HardwareSpec other = parse_hardware(gpu_json(kNvswitch, kIntra), "intra.json");
    const TimePlan on_cube = plan_time(tp_run(T), cube);
    EXPECT_EQ(on_cube.step_s, plan_time(tp_run(T), same).step_s) << "T=" << T;
    EXPECT_GT(on_cube.step_s, plan_time(tp_run(T), other).step_s) << "T=" << T;  // every ring is below kIntra
  }
}

}  // namespace
}  // namespace gpt::test
