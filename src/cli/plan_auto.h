// `gpt train --plan auto` and `gpt bench --plan auto`: the plan's best configuration (src/plan/plan_search.h)
// for this launch's world and hardware, printed and then run. The hardware is --hardware FILE when given;
// else on cuda the datasheet file of the detected GPU (data/hardware/), and on the cpu this machine's
// calibration, cpu_hardware.json beside the MFU peak cache (runtime/peak_cache.h), made once per rank count
// by gpt bench --calibrate's measurement and reused. The budget is what pre-flight holds the run to: the
// GPU's memory (the datasheet's) and this node's available host memory shared by its ranks. Every train flag
// given explicitly (--shard, --recompute, -B, ...) is a pin: the plan chooses only the others.
#pragma once
#include "src/cli/flags.h"
#include "src/dist/communicator.h"
#include "src/train/train_options.h"

namespace gpt {

struct HardwareSpec;  // src/plan/hardware.h

// Whether a cached calibration serves a run of `ranks` x `threads`: a profile for them made since the
// calibration fits the product-shape edge (an older one is measured again, not silently priced by M*N*K
// alone), and at ranks > 1 collective fits for that rank count.
bool calibration_serves(const HardwareSpec& h, int ranks, int threads);

// True for --plan auto; throws for another --plan value, or --hardware without --plan auto.
bool plan_auto_requested(Flags& f);
// Collective: searches, sets the chosen fields of `o` (B, total batch, sharding, recompute, offloads, wrap,
// reduce dtype, no-sync) and prints one line on rank 0.
void apply_plan_auto(Flags& f, TrainOptions& o, Communicator& world);

}  // namespace gpt
