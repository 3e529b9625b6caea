// The files of a Hugging Face GPT-2 model (rules in hf_index.h): a folder, a file or a sharded index is
// resolved to its safetensors files and config.json; a sharded index is checked against the shards in two
// passes (where each tensor really is, then what the weight_map says) so that an overlap is reported as one.
#include "src/io/hf_index.h"

#include <filesystem>
#include <map>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/json_min.h"

namespace gpt {

namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

fs::path folder_of(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

void check_index_metadata(const JsonValue& v, const std::string& path) {
  GPT_CHECK(v.kind == JsonValue::Kind::object, path, ": \"metadata\" is ", v.kind_name(), ", expected an object");
  for (const auto& [key, value] : v.members) {
    uint64_t n;
    GPT_CHECK(key != "total_size" || value.as_u64(&n), path, ": metadata \"total_size\" is ",
              value.kind == JsonValue::Kind::number ? value.text : std::string(value.kind_name()),
              ", expected a non-negative integer (bytes)");
  }
}

// The weight_map: tensor name -> shard file name, each tensor once, each shard a plain name in the folder.
std::map<std::string, std::string> read_weight_map(const std::string& path) {
  const JsonValue root = parse_json(read_file(path), path);
  GPT_CHECK(root.kind == JsonValue::Kind::object, path, ": the index is ", root.kind_name(),
            ", expected {\"metadata\": {...}, \"weight_map\": {tensor: shard file}}");
  const JsonValue* map = nullptr;
  for (const auto& [key, v] : root.members) {
    if (key == "metadata") check_index_metadata(v, path);
    if (key != "weight_map") continue;
    GPT_CHECK(!map, path, ": \"weight_map\" appears twice");
    map = &v;
  }
  GPT_CHECK(map, path, ": no \"weight_map\" (a sharded checkpoint's index maps each tensor to its shard file)");
  GPT_CHECK(map->kind == JsonValue::Kind::object && !map->members.empty(), path, ": \"weight_map\" is ",
            map->kind == JsonValue::Kind::object ? "empty" : map->kind_name(),
            ", expected an object of tensor name -> shard file name");
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : map->members) {
    GPT_CHECK(file.kind == JsonValue::Kind::string, path, ": weight_map \"", name, "\" is ", file.kind_name(),
              ", expected a shard file name");
    const std::string& f = file.text;
    GPT_CHECK(!f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos, path, ": weight_map \"", name,
              "\" names '", f, "', expected a file name in the index's folder");
    GPT_CHECK(out.emplace(name, f).second, path, ": tensor '", name, "' appears twice in the weight_map");
  }
  return out;
}

// Opens every shard the index names and checks each tensor's place against the weight_map.
void open_shards(HfSource& s) {
  const std::map<std::string, std::string> map = read_weight_map(s.index_path);
  const fs::path dir = folder_of(s.index_path);
  std::map<std::string, int> named;  // shard file -> tensors the weight_map puts in it
  for (const auto& kv : map) named[kv.second]++;
  for (const auto& [file, n] : named) {
    const fs::path p = dir / file;
    GPT_CHECK(is_file(p), s.index_path, ": shard ", p.string(), " is missing (the weight_map puts ", n,
              " tensors in it)");
    s.files.push_back(std::make_unique<SafetensorsReader>(p.string()));
  }
  std::map<std::string, const SafetensorsReader*> where;  // tensor -> the shard holding it
  for (const auto& file : s.files)
    for (const StTensor& t : file->tensors()) {
      const auto [it, fresh] = where.emplace(t.name, file.get());
      GPT_CHECK(fresh, s.index_path, ": tensor '", t.name, "' is in two shards, ", it->second->path(), " and ",
                file->path(), " (shards must not overlap)");
      s.tensors.push_back({&t, file.get()});
    }
  for (const HfTensorRef& r : s.tensors) {
    const auto m = map.find(r.tensor->name);
    GPT_CHECK(m != map.end(), r.file->path(), ": tensor '", r.tensor->name, "' is not in the weight_map of ",
              s.index_path);
    GPT_CHECK((dir / m->second).string() == r.file->path(), s.index_path, ": the weight_map puts tensor '",
              r.tensor->name, "' in ", m->second, ", but it is in ", r.file->path());
  }
  for (const auto& [name, file] : map)
    GPT_CHECK(where.count(name), s.index_path, ": tensor '", name, "' is not in ", (dir / file).string(),
              ", the shard the weight_map names for it");
}

}  // namespace

HfSource open_hf_source(const std::string& path) {
  HfSource s;
  s.path = path;
  std::error_code ec;
  fs::path dir, weights;
  if (fs::is_directory(path, ec)) {
    dir = path;
    if (is_file(dir / "model.safetensors")) {
      weights = dir / "model.safetensors";
    } else if (is_file(dir / "model.safetensors.index.json")) {
      s.index_path = (dir / "model.safetensors.index.json").string();
    } else {
      fail(path, ": a folder with neither model.safetensors nor model.safetensors.index.json (a Hugging Face "
           "GPT-2 folder holds one of them)");
    }
  } else if (fs::path(path).filename() == "config.json") {
    return open_hf_source(folder_of(path).string());
  } else if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    dir = folder_of(path);
    s.index_path = path;
  } else {
    dir = folder_of(path);
    weights = path;
  }
  if (is_file(dir / "config.json")) s.config_path = (dir / "config.json").string();
  if (!s.index_path.empty()) {
    open_shards(s);
    return s;
  }
  s.files.push_back(std::make_unique<SafetensorsReader>(weights.string()));
  for (const StTensor& t : s.files[0]->tensors()) s.tensors.push_back({&t, s.files[0].get()});
  return s;
}

}  // namespace gpt
