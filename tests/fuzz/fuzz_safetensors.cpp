// libFuzzer harness for the safetensors reader (io/safetensors.h) and the GPT-2 import on top of it
// (io/hf_gpt2.h): the input is the file. When the reader accepts it, its promises are checked: the
// tensors' byte ranges tile the data region exactly, each range holds numel * dtype-size bytes, and every
// F32/F16/BF16 tensor reads back as numel values (F32 bit for bit). When the GPT-2 import accepts it too,
// the units have the layout's sizes, the padded vocabulary rows are zero, and export -> import gives the
// same config and bit-identical weights.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "src/io/hf_gpt2.h"
#include "src/io/safetensors.h"
#include "src/model/layout.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void check_reader(const gpt::SafetensorsReader& r, std::string_view file) {
  FUZZ_REQUIRE(r.data_offset() >= 8 && r.data_offset() <= file.size(), "data offset ", r.data_offset(),
               " outside a file of ", file.size(), " bytes");
  const uint64_t data_bytes = file.size() - r.data_offset();
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const gpt::StTensor& t : r.tensors()) {
    FUZZ_REQUIRE(t.begin <= t.end && t.end <= data_bytes, "tensor ", t.name, " range out of the data");
    FUZZ_REQUIRE((uint64_t)t.numel() * gpt::st_dtype_size(t.dtype) == t.end - t.begin, "tensor ", t.name,
                 ": numel ", t.numel(), " does not match its ", t.end - t.begin, " bytes");
    ranges.emplace_back(t.begin, t.end);
    if (t.dtype != gpt::StDType::F32 && t.dtype != gpt::StDType::F16 && t.dtype != gpt::StDType::BF16) continue;
    const std::vector<float> v = r.read_f32(t);
    FUZZ_REQUIRE((int64_t)v.size() == t.numel(), "tensor ", t.name, " read ", v.size(), " values");
    if (t.dtype == gpt::StDType::F32)
      FUZZ_REQUIRE(v.empty() || std::memcmp(v.data(), file.data() + r.data_offset() + t.begin, v.size() * 4) == 0,
                   "tensor ", t.name, ": F32 values differ from the file's bytes");
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [b, e] : ranges) {
    FUZZ_REQUIRE(b == at, "accepted a gap or overlap at byte ", at);
    at = e;
  }
  FUZZ_REQUIRE(at == data_bytes, "accepted data not covered by tensors (", at, " of ", data_bytes, ")");
}

void check_import(const gpt::HfImport& a, const std::string& dir) {
  const gpt::Layout layout(a.weights.config);
  FUZZ_REQUIRE((int)a.weights.units.size() == layout.num_units(), "unit count");
  std::vector<const float*> ptrs;
  for (int u = 0; u < layout.num_units(); u++) {
    FUZZ_REQUIRE((int64_t)a.weights.units[u].size() == layout.unit(u).numel, "unit ", u, " size");
    ptrs.push_back(a.weights.units[u].data());
  }
  const gpt::GPTConfig& c = a.weights.config;
  for (int64_t i = (int64_t)c.vocab_size * c.channels; i < (int64_t)c.padded_vocab_size * c.channels; i++)
    FUZZ_REQUIRE(a.weights.units[0][i] == 0.0f, "padded wte element ", i, " is not zero");
  // Exported into a folder of its own: its config.json must not sit beside the next input.
  const std::string out_dir = dir + "/export", out = out_dir + "/model.safetensors";
  std::filesystem::create_directories(out_dir);
  gpt::HfImport b;
  try {  // our own export of an accepted model must always import again
    gpt::save_hf_gpt2(out, out_dir + "/config.json", layout, ptrs);
    b = gpt::import_hf_gpt2(out, c.num_heads);
  } catch (const gpt::Error& e) {
    gpt::fuzz::property_failed(std::string("export -> import failed: ") + e.what());
  }
  FUZZ_REQUIRE(b.weights.config == c, "re-import changed the config");
  for (int u = 0; u < layout.num_units(); u++)
    FUZZ_REQUIRE(std::memcmp(a.weights.units[u].data(), b.weights.units[u].data(), a.weights.units[u].size() * 4) == 0,
                 "export -> import changed unit ", u);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  const std::string& dir = gpt::fuzz::scratch_dir();
  const std::string path = dir + "/model.safetensors";
  gpt::fuzz::write_bytes(path, file);
  const bool read = gpt::fuzz::expect_ok_or_error([&] {
    gpt::SafetensorsReader r(path);
    check_reader(r, file);
  });
  if (!read) return 0;
  gpt::fuzz::expect_ok_or_error([&] { check_import(gpt::import_hf_gpt2(path), dir); });
  return 0;
}
