// See paths.h.
#include "src/util/paths.h"

#include <filesystem>

namespace gpt {

std::string default_data_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists("data/gpt2/encoder.json", ec)) return "data";
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
      if (fs::exists(dir / "data" / "gpt2" / "encoder.json", ec)) return (dir / "data").string();
  }
  if (fs::exists(fs::path(GPT_SOURCE_DATA_DIR) / "gpt2" / "encoder.json", ec)) return GPT_SOURCE_DATA_DIR;
  return "data";
}

}  // namespace gpt
