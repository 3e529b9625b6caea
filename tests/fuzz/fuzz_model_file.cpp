// libFuzzer harness for the llm.c model-file reader (io/model_file.h): the input is the file.
// When load_model_file accepts it, the result is checked without re-implementing the tensor order:
// the units have the layout's sizes, and the loaded values are a permutation of the file's payload
// (fp32 bit patterns, or bf16 widened by placing the 16 bits on top) — every element read exactly once.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "src/io/model_file.h"
#include "src/model/layout.h"

namespace {

constexpr size_t kHeaderBytes = 1024;

// The payload after the header as sorted 32-bit patterns of the values it encodes.
std::vector<uint32_t> payload_bits(std::string_view file, bool bf16) {
  std::vector<uint32_t> bits;  // (numel,)
  const std::string_view body = file.substr(kHeaderBytes);
  if (bf16) {
    for (size_t i = 0; i + 2 <= body.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, body.data() + i, 2);
      bits.push_back((uint32_t)h << 16);
    }
  } else {
    for (size_t i = 0; i + 4 <= body.size(); i += 4) {
      uint32_t w;
      std::memcpy(&w, body.data() + i, 4);
      bits.push_back(w);
    }
  }
  std::sort(bits.begin(), bits.end());
  return bits;
}

void check_loaded(const gpt::ModelWeights& w, std::string_view file) {
  FUZZ_REQUIRE(file.size() >= kHeaderBytes, "accepted a file shorter than the header");
  int32_t version;
  std::memcpy(&version, file.data() + 4, 4);
  const gpt::Layout layout(w.config);
  FUZZ_REQUIRE((int)w.units.size() == layout.num_units(), w.units.size(), " units, layout has ",
               layout.num_units());
  std::vector<uint32_t> loaded;  // (numel,) bit patterns of every loaded value
  for (int u = 0; u < layout.num_units(); u++) {
    FUZZ_REQUIRE((int64_t)w.units[u].size() == layout.unit(u).numel, "unit ", u, " has ", w.units[u].size(),
                 " values, layout says ", layout.unit(u).numel);
    for (float f : w.units[u]) {
      uint32_t b;
      std::memcpy(&b, &f, 4);
      loaded.push_back(b);
    }
  }
  std::sort(loaded.begin(), loaded.end());
  FUZZ_REQUIRE(loaded == payload_bits(file, version == 5),
               "loaded values are not a permutation of the file payload (version ", version, ")");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  const std::string path = gpt::fuzz::scratch_dir() + "/model.bin";
  gpt::fuzz::write_bytes(path, file);
  gpt::fuzz::expect_ok_or_error([&] { check_loaded(gpt::load_model_file(path), file); });
  return 0;
}
