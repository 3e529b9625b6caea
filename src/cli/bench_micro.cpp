// See bench_micro.h.
#include "src/cli/bench_micro.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "src/backend/backend.h"
#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/tokenizer.h"
#include "src/util/log.h"

namespace gpt {

namespace {
int omp_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
}  // namespace

// The host AdamW is the one offloaded states run: the host side of a backend (make_host_backend).
void bench_host_adamw(int64_t n, int reps, bool json) {
  GPT_CHECK(n >= 1024 && reps >= 1, "--adamw: need at least 1024 parameters and 1 repetition");
  const std::unique_ptr<Backend> device = make_backend("cpu");
  const std::unique_ptr<Backend> host = make_host_backend(*device);
  std::vector<float> p((size_t)n, 0.01f), g((size_t)n, 0.001f), m((size_t)n, 0.0f), v((size_t)n, 0.0f);
  AdamWParams hp;
  hp.lr = 1e-4f;
  hp.weight_decay = 0.1f;
  double best_adam = 1e30, best_stream = 1e30;
  for (int r = 0; r < reps + 1; r++) {  // first round warms pages and threads
    hp.step = r + 1;
    double t0 = now_seconds();
    host->adamw_update(p.data(), g.data(), m.data(), v.data(), (size_t)n, hp);
    double t1 = now_seconds();
    // the bandwidth probe: AdamW's exact memory traffic (read p g m v, write p m v) with trivial arithmetic
    float *pp = p.data(), *mp = m.data(), *vp = v.data();
    const float* gp = g.data();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
      const float a = pp[i], b = gp[i], c = mp[i], d = vp[i];
      pp[i] = a + 1e-30f * b;
      mp[i] = c + 1e-30f * d;
      vp[i] = d + 1e-30f * b;
    }
    double t2 = now_seconds();
    if (r > 0) best_adam = std::min(best_adam, t1 - t0), best_stream = std::min(best_stream, t2 - t1);
  }
  const double adam_bytes = 28.0 * n;  // reads p g m v, writes p m v
  const double bw = adam_bytes / best_stream;
  const double limit = best_stream;     // the same bytes moved with no arithmetic: the one-pass limit
  if (json) {
    std::printf("{\"adamw_params\": %lld, \"adamw_ms\": %.3f, \"adamw_gb_per_s\": %.2f, \"stream_gb_per_s\": %.2f, "
                "\"bandwidth_limit_ms\": %.3f, \"fraction_of_limit\": %.3f, \"threads\": %d}\n",
                (long long)n, best_adam * 1e3, adam_bytes / best_adam / 1e9, bw / 1e9, limit * 1e3, limit / best_adam,
                omp_threads());
  } else {
    std::printf("host AdamW over %lld params: %.1f ms (%.2f GB/s moved, %d threads)\n", (long long)n, best_adam * 1e3,
                adam_bytes / best_adam / 1e9, omp_threads());
    std::printf("memory bandwidth (same 4-read/3-write stream, no math): %.2f GB/s = a %.1f ms floor; AdamW runs at %.0f%% of it\n",
                bw / 1e9, limit * 1e3, 100 * limit / best_adam);
  }
}

void bench_encode(const std::string& path, const std::string& data_dir, bool json) {
  const std::string text = read_file(path);
  GPT_CHECK(!text.empty(), "--encode ", path, ": empty file");
  auto tok = make_tokenizer("gpt2", data_dir);
  double t0 = now_seconds();
  size_t n = tok->encode(text).size();
  double cold = now_seconds() - t0;
  t0 = now_seconds();
  tok->encode(text);
  double warm = now_seconds() - t0;
  const double mb = text.size() / 1e6;
  if (json)
    std::printf("{\"file\": \"%s\", \"bytes\": %zu, \"tokens\": %zu, \"cold_mb_per_s\": %.2f, \"warm_mb_per_s\": %.2f}\n",
                path.c_str(), text.size(), n, mb / cold, mb / warm);
  else
    std::printf("gpt2 encode %s: %zu bytes -> %zu tokens | cold %.1f MB/s | warm (word cache filled) %.1f MB/s\n",
                path.c_str(), text.size(), n, mb / cold, mb / warm);
}

}  // namespace gpt
