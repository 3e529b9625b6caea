// A hardware file: what one rank's device computes and moves per second, and how ranks talk, for the
// time model (src/plan/timemodel.h). JSON, written by `gpt bench --calibrate` for this machine or by hand
// from datasheets (data/hardware/*.json, each citing its sources). Every rate is a curve over a size, so
// small products and small copies cost what they cost on the machine, not the peak rate:
//   gemm        flop/s of one product against M*N*K (the forward product, out = in @ w^T)
//   gemm_backward  flop/s of a product's backward (dinp = dout @ w and dw += dout^T @ in, one call, 4*M*N*K
//               flops) against M*N*K; defaults to gemm
//   gemm_edge, gemm_backward_edge  optional, elements: what the ends of a product's side cost in the forward
//               product and in the backward call; a product with a short side is priced slower than the
//               curve's own shapes of the same M*N*K (src/plan/gemm_shape.h). 0 or absent: M*N*K alone;
//               gemm_backward_edge defaults to gemm_edge
//   gemm_tasks  aggregate flop/s of `threads` single-threaded products run side by side (the CPU attention's
//               per-head products); defaults to gemm
//   stream      B/s of a parallel streaming loop against the bytes it moves (layernorm, gelu, residual,
//               softmax, classifier, AdamW, gradient adds)
//   copy        B/s of the backend's copies and fills against their bytes (the CPU backend's memcpy and
//               memset run on one thread); defaults to stream
//   kernels     optional, per kernel family, elements/s against elements: the ops that are not bound by
//               memory bandwidth on a machine (the CPU's exp-bound classifier and GELU, for one) are priced
//               at their own measured rate; an op whose family has no curve is priced by bytes at `stream`.
//               Families: layernorm_forward, layernorm_backward (elements N*C), gelu_forward, gelu_backward
//               (N*4C), classifier_forward, classifier_backward (N*V), adamw (parameters)
// A curve is a list of [x, y] points, interpolated linearly in (log x, log y) and held flat past its ends;
// a single number is a flat curve. "gemm_fraction_of_peak" ([x, fraction]) may stand for "gemm": the
// fractions are multiplied by peak_flops.
//
// Profiles: a CPU's ranks share its cores, so a calibrated file holds one profile per (ranks on the node,
// threads per rank) measured with that many ranks running at once (`mpirun -n R gpt bench --calibrate`).
// The model takes the profile with the run's (ranks, threads), else the nearest one scaled by the share of
// the cores a rank gets. A GPU file has one profile: each rank owns its device.
//
// Network: an alpha-beta ring model. `intra` is the per-rank link inside a node (NVLink; shared memory for
// CPU ranks), `inter` the network of a node, its bandwidth per node (shared by the node's ranks). Both have
// a bandwidth (bytes each rank sends per second, NCCL's "bus bandwidth") and a latency per ring step.
// `measured` holds per-collective fits from the calibration at a given number of ranks on the node; they
// take precedence for that rank count (reduce_scatter_bf16 and all_reduce_bf16, optional: the reductions in
// bf16, which MPI sums in a user-defined op). `overlap`: true when collectives progress on their own (NCCL on a
// stream), false when they progress only inside wait() (OpenMPI without a progress thread: see the note at
// the top of src/dist/comm_mpi.cpp).
//
// Intra-node topology (network.intra_topology, required in a gpu file): how the node's GPUs are wired,
// which decides what a ring of G of them reaches (src/plan/collectives.cpp prices a group inside a node by it):
//   "nvswitch"          every GPU reaches every other at its full NVLink bandwidth through the switches
//                       (DGX-2, DGX A100, DGX H100/H200): a ring of any size inside the node runs at
//                       network.intra.bandwidth;
//   "hybrid_cube_mesh"  point-to-point NVLinks, a different number between different pairs (the V100 DGX-1:
//                       GPU 0 has one link to GPUs 1 and 2, two to GPUs 3 and 4, none to 5-7), so NCCL's rings
//                       over 2, 4 or 8 GPUs use different links and reach different bandwidths. The file
//                       then lists them in network.intra_rings: [{"ranks": G, "bandwidth": B/s,
//                       "efficiency": f (optional, default 1)}, ...], the bus bandwidth of a ring over the
//                       GPUs 0..G-1 of a node (the groups tensor parallelism forms: consecutive ranks), each
//                       number with its source in the file's sources. A group of a size the list does not
//                       have is an error naming the file and the size; a group inside a node of a listed size
//                       is priced at its ring whatever its ranks (a strided group of G may have fewer links
//                       among its GPUs than 0..G-1: not modelled). Latency per step: network.intra.latency_s.
// A cpu file has no intra_topology: its ranks share one host's memory, and its collectives are priced by the
// per-collective fits `gpt bench --calibrate` measured through the engine's own communicator (`measured`), or
// by network.intra, which already is that memory's rate; there are no links to route rings over.
//
// Errors are one line naming the file and the field: "hw.json: field network.intra.bandwidth: expected a
// positive number, got -1".
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/core/dtype.h"

namespace gpt {

// y(x), piecewise linear in (log x, log y), flat past the first and last points.
struct RateCurve {
  std::vector<std::pair<double, double>> points;  // sorted by x; x > 0, y > 0
  bool empty() const { return points.empty(); }
  double at(double x) const;
  RateCurve scaled(double factor) const;  // every y times factor
  double max_y() const;
};

struct ComputeProfile {
  int ranks = 1;    // ranks running on the node when it was measured
  int threads = 1;  // threads per rank
  RateCurve gemm;           // flop/s against M*N*K
  RateCurve gemm_backward;  // flop/s of a product's backward call against M*N*K
  double gemm_edge = 0;     // elements a side's ends cost (src/plan/gemm_shape.h); 0: priced by M*N*K alone
  double gemm_backward_edge = 0;  // the same for the backward call
  bool has_gemm_edge = false;     // the file gives gemm_edge: a calibration that fitted it (0 included)
  RateCurve gemm_tasks;     // aggregate flop/s of `threads` concurrent single-threaded products against M*N*K
  RateCurve stream;         // B/s against bytes moved
  RateCurve copy;           // B/s against bytes copied
  std::map<std::string, RateCurve> kernels;  // family -> elements/s against elements
};

// The kernel families a profile may rate (hardware.h, "kernels").
const std::vector<std::string>& kernel_families();

// time of one ring collective = latency * steps + bytes_sent_per_rank / bandwidth
struct Link {
  double bandwidth = 0;  // B/s each rank sends (bus bandwidth)
  double latency = 0;    // s per ring step
};

struct CollectiveLinks {
  Link all_gather, reduce_scatter, all_reduce;
};

// Fits from `mpirun -n R gpt bench --calibrate`: R ranks on this node. bf16: the reductions in bf16 words
// (--reduce-dtype bf16), fitted apart because MPI sums them in a user-defined op (src/dist/comm_mpi.cpp), not
// its own fp32 loop; a file without them prices bf16 reductions by bytes on the fp32 fits.
struct MeasuredNetwork {
  int ranks = 2;
  CollectiveLinks links;
  bool has_bf16 = false;
  Link reduce_scatter_bf16, all_reduce_bf16;
};

// How a node's GPUs are wired (network.intra_topology; none in a cpu file).
enum class IntraTopology { none, nvswitch, hybrid_cube_mesh };

// network.intra_rings[i]: the bus bandwidth NCCL reaches on a ring over `ranks` GPUs of one node.
struct IntraRing {
  int ranks = 2;
  double bandwidth = 0;  // B/s each rank sends (times the entry's efficiency)
};

struct HardwareSpec {
  std::string file;  // where it was read from (messages)
  std::string name;
  std::string kind = "cpu";    // "cpu" or "gpu"
  DType dtype = DType::F32;    // the compute dtype the rates are for
  double peak_flops = 0;       // one device's dense peak in that dtype (CPU: the best calibrated rate)
  double memory_bytes = 0;     // one device's memory (0: unknown); the sweep marks runs that do not fit
  int cores = 0;               // CPU: cores the node's ranks share (0: every rank has its own device)
  double op_overhead = 0;      // seconds added to every op (kernel launch); 0 on the CPU (in the curves)
  std::vector<ComputeProfile> profiles;
  double host_bandwidth = 0;   // B/s of host memory (AdamW and gradient adds when offloaded)
  double pcie_bandwidth = 0;   // B/s of host <-> device copies, per direction
  int devices_per_node = 1;    // ranks on one node (CPU: the whole world runs on this machine)
  Link intra;                  // per rank, inside a node
  Link inter;                  // bandwidth per NODE, latency per step
  IntraTopology intra_topology = IntraTopology::none;
  std::vector<IntraRing> intra_rings;  // hybrid_cube_mesh: the ring bandwidth per group size, sorted by ranks
  bool overlap = true;         // collectives progress while compute runs
  std::vector<MeasuredNetwork> measured;
  std::vector<std::string> sources;      // where the numbers come from (datasheets, this calibration)
  std::vector<std::string> assumptions;  // what is assumed rather than specified or measured
  std::vector<std::string> notes;
};

// "nvswitch", "hybrid_cube_mesh" ("none" for a cpu file's).
const char* intra_topology_name(IntraTopology t);

// Parses a hardware file's text; `file` names it in errors. Throws gpt::Error, one line naming the field.
HardwareSpec parse_hardware(std::string_view json, const std::string& file);
// Reads and parses a file ("--hardware FILE: cannot read ..." when it cannot be read).
HardwareSpec load_hardware(const std::string& path);
// The file's JSON (what --calibrate writes); parse_hardware(hardware_to_json(h)) == h.
std::string hardware_to_json(const HardwareSpec& h);

}  // namespace gpt
