// safetensors files, the format Hugging Face publishes weights in (https://github.com/huggingface/safetensors):
//   8 bytes   N, little-endian u64: the length of the JSON header
//   N bytes   JSON {"__metadata__": {"key": "value", ...},
//                   "<tensor name>": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
//             (__metadata__ is optional; the header may end in spaces)
//   the rest  the data region: each tensor's bytes, little-endian and row-major, at [begin, end) counted from
//             the start of the region
// The reader validates everything before it reads a tensor byte: the header length (non-zero, at most
// 100 MB, within the file), the JSON and its shape, each dtype, each shape against its byte range, and the
// byte ranges together (in range, not overlapping, covering the data region exactly, as the reference
// implementation requires). Every error is one gpt::Error line naming the file and what was expected.
// This layer knows nothing of GPT-2; io/hf_gpt2.h maps tensor names to our model.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpt {

// The element types of the format that have whole-byte sizes. Files with other dtypes are refused.
enum class StDType { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

const char* st_dtype_name(StDType t);  // "F32", as the header spells it
size_t st_dtype_size(StDType t);       // bytes per element

struct StTensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;  // row-major; [] is a scalar
  uint64_t begin = 0, end = 0;  // byte range inside the data region
  int64_t numel() const;
};

class SafetensorsReader {
 public:
  // Reads and validates the header; tensor data is read on demand.
  explicit SafetensorsReader(const std::string& path);
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }  // header order
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  const StTensor* find(const std::string& name) const;  // nullptr when absent
  const std::string* find_metadata(const std::string& key) const;
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data region: 8 + N

  // The tensor's values widened exactly to fp32; F32, F16 and BF16 only (other dtypes throw, naming it).
  std::vector<float> read_f32(const StTensor& t) const;

 private:
  struct FileCloser {
    void operator()(FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<FILE, FileCloser> f_;  // closed on every exit, a throwing constructor included
  uint64_t data_offset_ = 0;
  std::vector<StTensor> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// Writes F32 tensors: the header is written when constructed (every tensor declared up front, laid out
// in the given order), then write_next() takes each tensor's values in that order, and commit() makes
// the file appear atomically (io/atomic_file.h). The header is padded with spaces to a multiple of 8.
struct StTensorDecl {
  std::string name;
  std::vector<int64_t> shape;
};

class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, const std::vector<StTensorDecl>& tensors,
                    const std::vector<std::pair<std::string, std::string>>& metadata);
  ~SafetensorsWriter();
  void write_next(const float* values);  // the next declared tensor: numel values, row-major
  void commit();                         // throws unless every declared tensor was written

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// fp16 bits -> fp32, exactly (subnormals, infinities and NaN included).
float fp16_widen(uint16_t h);

}  // namespace gpt
