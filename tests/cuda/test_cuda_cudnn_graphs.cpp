// The cudnn attention path's operation graphs against cuDNN itself, without a GPU (builds with cuDNN): the
// graphs of attention_cudnn_graph.cu are built for an H200 (sm_90) and an A100 (sm_80) described in JSON, cuDNN's
// deviceless planning (kernels/cuda/attention_cudnn_check.h). For every head size and sequence length the
// path takes on each, cuDNN's heuristics must offer engines for both graphs (an engine offers itself only for
// a graph it recognises), and the first offer's plan must finalize, or, without a driver, stop no earlier than
// loading its compiled kernels onto a GPU. And where the rules of kernels/attention_rules.h refuse a shape,
// cuDNN has no engine for it either. What this cannot show, and the GPU tests do: the results.
//
// Device descriptions: the fields cuDNN reads (its DEVICEPROP JSON). H200: 132 multiprocessors and 60 MB of
// L2 as measured on this workplace's H200 (KINDS.md); A100-SXM4: 108 multiprocessors and 40 MB of L2; both
// with their architecture's published per-block and per-multiprocessor limits (shared memory opt-in 227 KB on
// sm_90, 163 KB on sm_80, 1 KB reserved per block; 64 K registers; 2048 threads and 32 blocks per
// multiprocessor) and the CUDA 13.0 driver.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "kernels/attention_rules.h"
#include "kernels/cuda/attention_cudnn_check.h"
#include "src/backend/backend.h"

#ifdef GPT_WITH_CUDNN
#include <dlfcn.h>
#endif

namespace gpt::test {
namespace {

#ifdef GPT_WITH_CUDNN
std::string device_json(const char* name, int cc, int sms, int l2_bytes, int smem_optin) {
  return str(R"({"deviceName": ")", name, R"(", "cudaDeviceId": 0, "deviceVer": )", cc, R"(, "driverVer": 13000, )",
             R"("multiProcessorCount": )", sms, R"(, "l2CacheSize": )", l2_bytes,
             R"(, "maxSharedMemoryPerBlockOptin": )", smem_optin,
             R"(, "maxSharedMemoryPerBlock": 49152, "reservedSharedMemoryPerBlock": 1024, "regsPerBlock": 65536, )",
             R"("maxRegistersPerSM": 65536, "maxThreadsPerBlock": 1024, "maxThreadsPerSM": 2048, "maxCtasPerSM": 32, )",
             R"("warpSize": 32, "maxGridSize": [2147483647, 65535, 65535], "maxBlockSize": [1024, 1024, 64], )",
             R"("smClockRateKHz": 1980000, "memClockRateKHz": 2619000, "pciDeviceId": 0, "isTccDriver": 0, )",
             R"("supportCoopLaunch": 1, "totalGlobalMem": 85899345920})");
}

// cuDNN's runtime-compiled engines offer themselves only where libcuda loads. Without a driver the toolkit's
// stub (GPT_CUDA_STUB_LIBCUDA, whose soname is libcuda.so.1) stands in for it.
bool libcuda_loadable(bool* stub) {
  *stub = false;
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) return true;
#ifdef GPT_CUDA_STUB_LIBCUDA
  *stub = dlopen(GPT_CUDA_STUB_LIBCUDA, RTLD_NOW | RTLD_GLOBAL) != nullptr;
  return *stub;
#else
  return false;
#endif
}

void expect_engines(const std::string& what, const cuda::CudnnGraphCheck& g, bool stub) {
  std::printf("[  cudnn   ] %s: %lld engine configs, first needs %lld bytes of workspace, plan %s\n", what.c_str(),
              g.configs, g.workspace, g.plan_status_name.c_str());
  EXPECT_GE(g.configs, 1) << what << ": cuDNN's heuristics offer no engine: " << g.message;
  EXPECT_GE(g.workspace, 0) << what;
  // 0 = CUDNN_STATUS_SUCCESS; with the stub, loading the compiled kernels fails (EXECUTION_FAILED_CUDA_DRIVER,
  // 5001) and nothing earlier may
  const bool loaded_or_stopped_at_load =
      g.plan_status == 0 || (g.plan_status == 5001 && g.message.find("LoadData") != std::string::npos);
  if (stub) {
    EXPECT_TRUE(loaded_or_stopped_at_load) << what << ": plan " << g.plan_status_name << ": " << g.message;
  }
}
#endif

TEST(CudnnGraphs, EnginesTakeTheGraphsWhereTheRulesDo) {
#ifndef GPT_WITH_CUDNN
  GTEST_SKIP() << "this build has no cuDNN";
#else
  if (cuda::cudnn_loaded_version() < 90800)
    GTEST_SKIP() << "deviceless planning needs cuDNN 9.8 or newer, the one loaded is " << cuda::cudnn_loaded_version();
  bool stub = false;
  if (!libcuda_loadable(&stub)) GTEST_SKIP() << "neither libcuda nor the CUDA toolkit's stub of it loads";
  struct Device {
    const char* name;
    int cc_major;
    std::string json;
  } devices[] = {{"H200", 9, device_json("NVIDIA H200", 900, 132, 62914560, 232448)},
                 {"A100", 8, device_json("NVIDIA A100-SXM4-80GB", 800, 108, 41943040, 166912)}};
  struct Shape {
    int B, T, C, NH;
  } shapes[] = {{4, 256, 768, 12},  // GPT-2 d12, hs 64
                {2, 37, 48, 3},     // hs 16, odd T
                {1, 129, 64, 8},    // hs 8
                {2, 64, 256, 2},    // hs 128
                {2, 70, 512, 2}};   // hs 256: sm_90 only
  for (const Device& d : devices)
    for (const Shape& s : shapes) {
      CudnnAttentionTarget t;
      t.built = true, t.cc_major = d.cc_major, t.version = kCudnnAttentionMinVersion;
      const bool supported = cudnn_attention_unsupported(s.C, s.NH, t).empty();
      const cuda::CudnnDevicelessCheck r = cuda::cudnn_attention_deviceless_check(s.B, s.T, s.C, s.NH, d.json);
      const std::string what = str(d.name, " B=", s.B, " T=", s.T, " C=", s.C, " NH=", s.NH);
      if (supported) {
        expect_engines(what + " forward", r.forward, stub);
        expect_engines(what + " backward", r.backward, stub);
      } else {
        std::printf("[  cudnn   ] %s: refused by the rules; cuDNN offers %lld forward, %lld backward engines\n",
                    what.c_str(), r.forward.configs, r.backward.configs);
        EXPECT_EQ(r.backward.configs, 0) << what << ": the rules refuse a shape cuDNN's backward takes";
      }
    }
#endif
}

}  // namespace
}  // namespace gpt::test
