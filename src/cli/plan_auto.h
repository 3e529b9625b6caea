// `gpt train --plan auto` and `gpt bench --plan auto`: the plan's best configuration (src/plan/plan_search.h)
// for this launch's world and hardware, printed and then run. The hardware is --hardware FILE when given;
// else on cuda the datasheet file of the detected GPU (data/hardware/), and on the cpu this machine's
// calibration, cpu_hardware.json beside the MFU peak cache (runtime/peak_cache.h), made once per rank count
// by gpt bench --calibrate's measurement and reused. The budget is what pre-flight holds the run to: the
// GPU's memory (the datasheet's) and this node's available host memory shared by its ranks. Every train flag
// given explicitly (--tp, --sequence-parallel, --shard, --recompute, -B, ...) is a pin: the plan chooses only
// the others.
#pragma once
#include "src/cli/flags.h"
#include "src/dist/communicator.h"
#include "src/runtime/runtime.h"
#include "src/train/train_options.h"

namespace gpt {

struct HardwareSpec;  // src/plan/hardware.h

// Whether a cached calibration serves a run of `ranks` x `threads`: a profile for them made since the
// calibration fits the product-shape edge (an older one is measured again, not silently priced by M*N*K
// alone), and at ranks > 1 collective fits for that rank count.
bool calibration_serves(const HardwareSpec& h, int ranks, int threads);

// The hardware file that describes this machine for a run on `device` (what --plan auto prices by, and what
// `--hardware this` names in gpt memplan and gpt plan): on cuda the datasheet of the detected GPU, by its name
// (gpu_datasheet_for); on the cpu this machine's calibration for `world`'s ranks, measured once when the cache
// does not serve them. Collective.
std::string this_machine_hardware(Communicator& world, DeviceKind device, const std::string& data_dir);
// data_dir/hardware/<file> for a GPU's name (cudaDeviceProp::name, nvidia-smi's), e.g. "NVIDIA H100 80GB HBM3"
// -> h100.json; a GPU no file describes (an H100 PCIe or NVL among them: h100.json is the SXM part) throws.
std::string gpu_datasheet_for(const std::string& gpu_name, const std::string& data_dir);

// --hardware FILE, or `this`: this_machine_hardware for `device`. On the cpu `this` is the calibration of this
// launch's ranks and threads, so a plan for another world or thread count is an error; threads 0 (the flag not
// given) becomes this launch's.
std::string hardware_flag_file(const std::string& flag, Communicator& world, DeviceKind device, int plan_world,
                               int& threads);

// True for --plan auto; throws for another --plan value, or --hardware without --plan auto.
bool plan_auto_requested(Flags& f);
// Collective: searches, sets the chosen fields of `o` (tensor parallelism, B, total batch, sharding, recompute,
// offloads, wrap, reduce dtype, no-sync) and prints one line on rank 0.
void apply_plan_auto(Flags& f, TrainOptions& o, Communicator& world);

}  // namespace gpt
