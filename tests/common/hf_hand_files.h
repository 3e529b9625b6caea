// Hugging Face GPT-2 safetensors files written by hand in the tests, straight from the format's
// specification (8-byte header length, JSON header, data region), so that each bad case is one edit of a
// good file: tensors missing, reshaped, retyped, split across shards.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "src/io/atomic_file.h"

namespace gpt::test {

struct HandTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

// Hugging Face's tensors for L layers of width C (maxT 4, V 10), all F32.
inline std::vector<HandTensor> hf_tensors(int L, int C) {
  std::vector<HandTensor> t = {{"wte.weight", "F32", {10, C}}, {"wpe.weight", "F32", {4, C}}};
  for (int l = 0; l < L; l++) {
    const std::string p = "h." + std::to_string(l) + ".";
    for (auto& [n, s] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"ln_1.weight", {C}}, {"ln_1.bias", {C}}, {"attn.c_attn.weight", {C, 3 * C}}, {"attn.c_attn.bias", {3 * C}},
             {"attn.c_proj.weight", {C, C}}, {"attn.c_proj.bias", {C}}, {"ln_2.weight", {C}}, {"ln_2.bias", {C}},
             {"mlp.c_fc.weight", {C, 4 * C}}, {"mlp.c_fc.bias", {4 * C}}, {"mlp.c_proj.weight", {4 * C, C}},
             {"mlp.c_proj.bias", {C}}})
      t.push_back({p + n, "F32", s});
  }
  t.push_back({"ln_f.weight", "F32", {C}});
  t.push_back({"ln_f.bias", "F32", {C}});
  return t;
}

// Writes the tensors by hand from the format's specification; tensor j element i holds j + i / 1024
// (F32), or 0 in other dtypes. meta: the __metadata__ members as raw JSON text.
inline std::string write_hand(const std::string& path, const std::vector<HandTensor>& ts, const std::string& meta) {
  std::string header = "{\"__metadata__\":{" + meta + "}", data;
  for (size_t j = 0; j < ts.size(); j++) {
    int64_t n = 1;
    for (int64_t d : ts[j].shape) n *= d;
    const size_t begin = data.size();
    const size_t elem = ts[j].dtype == "F32" || ts[j].dtype == "I32" ? 4 : ts[j].dtype == "I64" ? 8 : 2;
    for (int64_t i = 0; i < n; i++) {
      if (ts[j].dtype == "F32") {
        const float v = (float)j + (float)i / 1024.0f;
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        data.append(elem, '\0');
      }
    }
    std::string shape;
    for (int64_t d : ts[j].shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += ",\"" + ts[j].name + "\":{\"dtype\":\"" + ts[j].dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; i++) bytes[i] = (char)((uint64_t)header.size() >> (8 * i));
  bytes += header + data;
  write_file_atomic(path, bytes.data(), bytes.size());
  return path;
}

}  // namespace gpt::test
