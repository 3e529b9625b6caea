// libFuzzer harness for the training-state reader (train/checkpoint.h) through consolidate_checkpoint,
// which reads manifest.txt, verifies every rank file's size and CRC-32, parses each rank file's header
// and unit table, and reads the parameter shards back into full units.
// Input: one mode byte, then parts separated by kSeparator.
//   mode bit 0 = 0 ("raw"):  manifest.txt, rank_00000.bin, rank_00001.bin, ... as given.
//   mode bit 0 = 1 ("auto"): rank_00000.bin, rank_00001.bin, ...; the harness writes a manifest that
//     matches them (world = number of files, step = the step word of file 0, true sizes and CRCs), so
//     the fuzzer spends its time in the rank-file header parser and the resharding reads, not in
//     guessing checksums.
// When the checkpoint is accepted, the result must have one buffer per unit with the layout's sizes.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "src/io/atomic_file.h"
#include "src/model/layout.h"
#include "src/train/checkpoint.h"

namespace {

constexpr int kMaxRankFiles = 4;
constexpr size_t kStepWordOffset = 8 + 8 * 12;  // "GPTCKPT1", then version..num_units (12 words), step

const std::string& ckpt_dir() {
  static const std::string d = [] {
    std::string p = gpt::fuzz::scratch_dir() + "/ckpt";
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

std::string rank_path(int r) {
  char name[32];
  std::snprintf(name, sizeof name, "/rank_%05d.bin", r);
  return ckpt_dir() + name;
}

// A manifest that agrees with the rank files: the format save_checkpoint writes (checkpoint.cpp).
std::string matching_manifest(const std::vector<std::string_view>& ranks) {
  int64_t step = 0;
  if (!ranks.empty() && ranks[0].size() >= kStepWordOffset + 8) std::memcpy(&step, ranks[0].data() + kStepWordOffset, 8);
  std::ostringstream m;
  m << "gpt-checkpoint 1\nstep " << step << "\nworld " << ranks.size() << "\n";
  for (size_t r = 0; r < ranks.size(); r++) {
    char name[32];
    std::snprintf(name, sizeof name, "rank_%05d.bin", (int)r);
    m << "file " << name << " " << ranks[r].size() << " " << gpt::crc32_update(0, ranks[r].data(), ranks[r].size())
      << "\n";
  }
  return m.str();
}

void check_consolidated(const gpt::ConsolidatedModel& out) {
  const gpt::Layout layout(out.config);
  FUZZ_REQUIRE((int)out.units.size() == layout.num_units(), out.units.size(), " units, layout has ",
               layout.num_units());
  for (int u = 0; u < layout.num_units(); u++)
    FUZZ_REQUIRE((int64_t)out.units[u].size() == layout.unit(u).numel, "unit ", u, " has ", out.units[u].size(),
                 " values, layout says ", layout.unit(u).numel);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool auto_manifest = data[0] & 1;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string_view> parts = gpt::fuzz::split(rest, kMaxRankFiles + (auto_manifest ? 0 : 1));

  gpt::fuzz::remove_file(ckpt_dir() + "/manifest.txt");
  for (int r = 0; r < kMaxRankFiles; r++) gpt::fuzz::remove_file(rank_path(r));
  std::string manifest;
  if (auto_manifest) {
    manifest = matching_manifest(parts);
  } else {
    manifest = std::string(parts.front());
    parts.erase(parts.begin());
  }
  gpt::fuzz::write_bytes(ckpt_dir() + "/manifest.txt", manifest);
  for (size_t r = 0; r < parts.size(); r++) gpt::fuzz::write_bytes(rank_path((int)r), parts[r]);

  gpt::fuzz::expect_ok_or_error([&] { check_consolidated(gpt::consolidate_checkpoint(ckpt_dir())); });
  return 0;
}
