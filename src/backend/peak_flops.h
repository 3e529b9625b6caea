// The peaks MFU is measured against, one rule per kind of device:
//  - cpu: what this machine's CPU actually reaches in an fp32 sgemm with OpenBLAS, measured in a short
//    calibration (a stated, measured peak rather than a datasheet number);
//  - cuda: the GPU's dense bf16 tensor-core peak, named from what the CUDA runtime reports about it
//    (compute capability, SM count, clock, name): the datasheet figure for the parts in the table, else
//    SMs x clock x the architecture's dense bf16 FLOP per clock per SM.
// The GPU rule takes plain data (no CUDA headers), so it is tested on machines without a GPU; the cuda
// backend fills GpuFacts from its device.
#pragma once
#include <string>

#include "src/backend/device_info.h"

namespace gpt {

// Best fp32 sgemm FLOP/s of a 768^3 product over as many runs as fit in about 0.25 s (at least 4). Its
// source names the CPU, OpenBLAS's kernels and threads: "this CPU's measured fp32 sgemm (MODEL, BLAS, N threads)".
PeakFlops measure_cpu_peak_flops();
// The BLAS the CPU backend runs on and the kernels it picked for this CPU, e.g. "OpenBLAS 0.3.21, SkylakeX
// kernels" (OpenBLAS chooses them at run time, so a number measured on the CPU needs this beside it).
std::string cpu_blas_name();

// What the CUDA runtime says about one GPU.
struct GpuFacts {
  std::string name;          // cudaDeviceProp::name, e.g. "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  int sms = 0;               // cudaDevAttrMultiProcessorCount
  int clock_khz = 0;         // cudaDevAttrClockRate: the maximum (boost) SM clock, in kHz
};
PeakFlops gpu_bf16_peak_flops(const GpuFacts& gpu);

}  // namespace gpt
