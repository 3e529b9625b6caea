// llm.c model files <-> our per-unit flat buffers (format in model_file.h and DESIGN.md).
// The file stores each tensor for all layers back to back (qkvw is (L, 3C, C)); we store each layer's
// tensors together (unit block[l]). Both directions walk the same list of "slabs" — one contiguous run of
// the file mapped to (unit, element offset, count) — so load and save cannot disagree on the order.
// Every header field is validated and the exact file size is checked before anything is allocated.
#include "src/io/model_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include "src/core/check.h"
#include "src/io/atomic_file.h"

namespace gpt {

namespace {

constexpr int32_t kModelMagic = 20240326;
constexpr int32_t kVersionF32 = 3;
constexpr int32_t kVersionBF16 = 5;
constexpr int64_t kHeaderBytes = 256 * sizeof(int32_t);

struct Slab {
  int unit;
  int64_t offset;  // element offset inside the unit
  int64_t numel;
  const char* name;  // the file's tensor name
  int layer;         // its layer, or -1 outside the blocks
};

// The file's tensor order expressed in our units.
std::vector<Slab> file_order(const Layout& layout) {
  static const char* const kBlockTensors[] = {"ln1w", "ln1b", "qkvw",    "qkvb",    "attprojw", "attprojb",
                                              "ln2w", "ln2b", "fcw",     "fcb",     "fcprojw",  "fcprojb"};
  const int L = layout.config().num_layers;
  std::vector<Slab> slabs;
  auto slab = [&](const char* n, int layer) {
    const TensorPlace t = layout.locate(n, layer);
    slabs.push_back({t.unit, t.spec->offset, t.spec->numel, n, layer});
  };
  for (const char* n : {"wte", "wpe"}) slab(n, -1);
  for (const char* n : kBlockTensors)
    for (int l = 0; l < L; l++) slab(n, l);
  for (const char* n : {"lnfw", "lnfb"}) slab(n, -1);
  return slabs;
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

// Checks the header fields and returns the finalized config; never allocates by the header's numbers.
GPTConfig config_from_header(const int32_t* h, const std::string& path) {
  const char* names[] = {"maxT", "V", "L", "NH", "C", "Vp"};
  for (int i = 0; i < 6; i++)
    GPT_CHECK(h[2 + i] > 0, path, ": header field ", names[i], " is ", h[2 + i], ", expected a positive value");
  GPTConfig cfg;
  cfg.max_seq_len = h[2];
  cfg.vocab_size = h[3];
  cfg.num_layers = h[4];
  cfg.num_heads = h[5];
  cfg.channels = h[6];
  try {
    cfg.finalize();
  } catch (const Error& e) {
    fail(path, ": impossible model dimensions in header (", e.what(), ")");
  }
  GPT_CHECK(h[7] == cfg.padded_vocab_size, path, ": header Vp ", h[7], " does not match V ", cfg.vocab_size,
            " rounded up to a multiple of 128 (", cfg.padded_vocab_size, "), the only padding supported");
  return cfg;
}

// Reads `numel` elements of the file's type into dst (fp32), widening bf16 by placing its 16 bits on top.
void read_elements(FILE* f, float* dst, int64_t numel, bool bf16, const std::string& path) {
  if (!bf16) {
    size_t got = std::fread(dst, sizeof(float), (size_t)numel, f);
    GPT_CHECK(got == (size_t)numel, path, ": short read of fp32 tensor data");
    return;
  }
  constexpr int64_t kChunk = 1 << 20;
  std::vector<uint16_t> buf((size_t)std::min<int64_t>(numel, kChunk));  // (chunk,) bf16 bits
  for (int64_t done = 0; done < numel;) {
    const int64_t n = std::min<int64_t>(numel - done, kChunk);
    size_t got = std::fread(buf.data(), sizeof(uint16_t), (size_t)n, f);
    GPT_CHECK(got == (size_t)n, path, ": short read of bf16 tensor data");
    for (int64_t i = 0; i < n; i++) {
      uint32_t bits = (uint32_t)buf[i] << 16;
      std::memcpy(&dst[done + i], &bits, sizeof bits);
    }
    done += n;
  }
}

// Opens the file and checks everything but the tensor values: magic, version, dimensions, and the exact
// size. Leaves the file positioned at the first tensor.
FilePtr open_checked(const std::string& path, GPTConfig* cfg, bool* bf16) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  GPT_CHECK(f != nullptr, path, ": cannot open model file: ", std::strerror(errno));
  struct stat st;
  GPT_CHECK(::fstat(::fileno(f.get()), &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  const int64_t size = (int64_t)st.st_size;
  GPT_CHECK(size >= kHeaderBytes, path, ": file is ", size, " bytes, shorter than the 1024-byte model header");

  int32_t h[256];  // [magic, version, maxT, V, L, NH, C, Vp, 0...]
  GPT_CHECK(std::fread(h, sizeof h, 1, f.get()) == 1, path, ": cannot read the model header");
  GPT_CHECK(h[0] == kModelMagic, path, ": bad magic ", h[0], ", expected ", kModelMagic, " (an llm.c model file)");
  GPT_CHECK(h[1] == kVersionF32 || h[1] == kVersionBF16, path, ": unsupported version ", h[1], ", expected ",
            kVersionF32, " (fp32) or ", kVersionBF16, " (bf16)");
  *bf16 = h[1] == kVersionBF16;
  *cfg = config_from_header(h, path);
  // finalize() bounds every dimension, so numel < 2^47 and the byte count fits easily in 64 bits.
  const int64_t numel = cfg->num_params();
  const int64_t elem = *bf16 ? 2 : 4;
  const int64_t expected = kHeaderBytes + numel * elem;
  GPT_CHECK(size == expected, path, ": file is ", size, " bytes, expected ", expected, " (1024 + ", numel,
            " parameters * ", elem, " bytes for ", cfg->describe(), "): truncated or corrupt");
  return f;
}

}  // namespace

GPTConfig read_model_file_config(const std::string& path) {
  GPTConfig cfg;
  bool bf16 = false;
  open_checked(path, &cfg, &bf16);
  return cfg;
}

// A weight that is NaN or infinite would train or evaluate to NaN without saying why: refuse the file.
void check_finite(const float* x, const Slab& s, const std::string& path) {
  for (int64_t i = 0; i < s.numel; i++) {
    if (std::isfinite(x[i])) continue;
    const std::string where = s.layer < 0 ? std::string(s.name) : str(s.name, " of layer ", s.layer);
    fail(path, ": tensor ", where, " holds a non-finite value (", x[i], ") at element ", i,
         "; the file is damaged or was saved from a diverged run");
  }
}

ModelWeights load_model_file(const std::string& path) {
  ModelWeights w;
  bool bf16 = false;
  FilePtr f = open_checked(path, &w.config, &bf16);
  Layout layout(w.config);
  w.units.resize(layout.num_units());
  for (int u = 0; u < layout.num_units(); u++) w.units[u].assign((size_t)layout.unit(u).numel, 0.0f);
  for (const Slab& s : file_order(layout)) {
    float* dst = w.units[s.unit].data() + s.offset;
    read_elements(f.get(), dst, s.numel, bf16, path);
    check_finite(dst, s, path);
  }
  return w;
}

void save_model_file(const std::string& path, const Layout& layout, const std::vector<const float*>& units) {
  GPT_CHECK((int)units.size() == layout.num_units(), path, ": save_model_file got ", units.size(),
            " unit buffers, the layout has ", layout.num_units());
  for (size_t u = 0; u < units.size(); u++) GPT_CHECK(units[u] != nullptr, path, ": unit ", u, " buffer is null");
  const GPTConfig& c = layout.config();
  int32_t h[256] = {kModelMagic, kVersionF32,   c.max_seq_len, c.vocab_size,
                    c.num_layers, c.num_heads, c.channels,    c.padded_vocab_size};
  AtomicWriter w(path);
  w.write(h, sizeof h);
  for (const Slab& s : file_order(layout)) w.write(units[s.unit] + s.offset, (size_t)s.numel * sizeof(float));
  w.commit();
}

}  // namespace gpt
