// The runtime floor, between the backend and communicators below and the trainer above: it turns the
// device flags and the world communicator into what a run stands on. It is the one place that resolves
// --device auto, gives the cuda backend this rank's GPU (by node-local rank), resolves and applies
// --attention (auto: cudnn, else fused, else simple, by kernels/attention_rules.h), and
// knows which communicator goes with which device (MPI moves CPU ranks' shards; NCCL, bootstrapped over
// the MPI world, moves GPU ranks'), hence the one place with the NCCL build switch. src/train holds no
// device tests and no build switches.
#pragma once
#include <memory>
#include <string>

#include "src/backend/backend.h"
#include "src/dist/communicator.h"
#include "src/runtime/mfu_meter.h"

namespace gpt {

// What one rank trains on. Members are destroyed in reverse order: the device communicator (which
// queues on the backend's stream) before the backend.
struct Runtime {
  std::unique_ptr<Backend> backend;           // cpu, or cuda on GPU local_rank % count
  std::unique_ptr<Communicator> device_comm;  // NCCL over the world when GPU ranks train together, else null
  Communicator* engine_comm = nullptr;        // the FSDP engine's: device_comm, or else the world itself
  // True when a device communicator holds buffers of its own on the GPU (the memory report says so).
  bool comm_buffers_on_device() const { return device_comm != nullptr; }
};

// --device cpu|cuda|auto -> the kind; auto is cuda when this build has it and a GPU is visible.
DeviceKind resolve_device(const std::string& device);

// Collective over `world` (every rank calls it; a failure on one rank stops all of them): the backend of
// --device on this rank's GPU (world.local_rank()), with --attention applied for a model of C channels in NH
// heads, and the engine's communicator. Throws the flag's one-line error for a device or attention path this
// build, machine or model lacks.
Runtime make_runtime(Communicator& world, const std::string& device, const std::string& attention, int C, int NH);

// --attention auto|simple|fused|cudnn resolved against what `backend` offers for a model of C channels in NH
// heads (resolve_attention_path, kernels/attention_rules.h) and set on it; returns the path. Throws the flag's
// one-line error for an explicit path the backend or the model's head size rules out.
AttentionPath apply_attention(Backend& backend, const std::string& attention, int C, int NH);

// The peak MFU is measured against at the start of a run: --peak-tflops when given (> 0), else on cpu the
// calibration cached for this CPU, threads and OpenBLAS kernels when there is one (src/runtime/peak_cache.h;
// a corrupt cache file is an error naming it), else the backend's own.
PeakFlops mfu_peak(const Backend& backend, double peak_tflops);
// MFU against that peak, raised by the rule of src/runtime/mfu_meter.h when a step beats it (a measured
// peak is measured again on `backend`; --peak-tflops is not); `report` gets the one line that says so.
MfuMeter make_mfu_meter(Backend& backend, double peak_tflops, MfuMeter::Report report);

}  // namespace gpt
