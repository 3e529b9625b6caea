// safetensors reader and writer (format and checks in safetensors.h). The header is parsed with the
// project's JSON reader (io/json_min.h); nothing is allocated from a size the file claims until that
// size has been checked against the file's real length.
#include "src/io/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/core/check.h"
#include "src/core/dtype.h"
#include "src/io/atomic_file.h"
#include "src/io/json_min.h"

namespace gpt {

namespace {

// The reference implementation's limit on the header length.
constexpr uint64_t kMaxHeaderBytes = 100000000;

struct DTypeInfo {
  StDType type;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {StDType::BOOL, "BOOL", 1}, {StDType::U8, "U8", 1},   {StDType::I8, "I8", 1},
    {StDType::F8_E5M2, "F8_E5M2", 1}, {StDType::F8_E4M3, "F8_E4M3", 1}, {StDType::I16, "I16", 2},
    {StDType::U16, "U16", 2},   {StDType::F16, "F16", 2}, {StDType::BF16, "BF16", 2},
    {StDType::I32, "I32", 4},   {StDType::U32, "U32", 4}, {StDType::F32, "F32", 4},
    {StDType::F64, "F64", 8},   {StDType::I64, "I64", 8}, {StDType::U64, "U64", 8}};

std::string dtype_list() {
  std::string s;
  for (const DTypeInfo& d : kDTypes) s += std::string(s.empty() ? "" : " ") + d.name;
  return s;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Little-endian u64 from 8 bytes, whatever the host order.
uint64_t load_u64_le(const unsigned char* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
  return v;
}

// The one member `key` of a tensor's object; nullptr when absent, an error when given twice.
const JsonValue* member(const JsonValue& obj, const char* key, const std::string& path, const std::string& tensor) {
  const JsonValue* found = nullptr;
  for (const auto& m : obj.members) {
    if (m.first != key) continue;
    GPT_CHECK(!found, path, ": tensor '", tensor, "' has \"", key, "\" twice");
    found = &m.second;
  }
  return found;
}

// One tensor entry of the header, with its own checks (the ranges are checked together afterwards).
StTensor parse_tensor(const std::string& name, const JsonValue& v, uint64_t data_bytes, const std::string& path) {
  StTensor t;
  t.name = name;
  GPT_CHECK(v.kind == JsonValue::Kind::object, path, ": tensor '", name, "' is ", v.kind_name(),
            " in the header, expected an object with dtype, shape and data_offsets");
  const JsonValue* dtype = member(v, "dtype", path, name);
  const JsonValue* shape = member(v, "shape", path, name);
  const JsonValue* offsets = member(v, "data_offsets", path, name);
  GPT_CHECK(dtype && shape && offsets, path, ": tensor '", name, "' lacks \"",
            !dtype ? "dtype" : !shape ? "shape" : "data_offsets", "\" (expected dtype, shape and data_offsets)");

  GPT_CHECK(dtype->kind == JsonValue::Kind::string, path, ": tensor '", name, "': dtype is ", dtype->kind_name(),
            ", expected a string such as \"F32\"");
  const DTypeInfo* info = nullptr;
  for (const DTypeInfo& d : kDTypes)
    if (dtype->text == d.name) info = &d;
  GPT_CHECK(info, path, ": tensor '", name, "': unknown dtype '", dtype->text, "', expected one of ", dtype_list());
  t.dtype = info->type;

  GPT_CHECK(shape->kind == JsonValue::Kind::array, path, ": tensor '", name, "': shape is ", shape->kind_name(),
            ", expected an array of dimensions");
  for (const JsonValue& d : shape->items) {
    uint64_t dim;
    GPT_CHECK(d.as_u64(&dim) && dim <= (uint64_t)INT64_MAX, path, ": tensor '", name,
              "': shape holds ", d.kind == JsonValue::Kind::number ? d.text : std::string(d.kind_name()),
              ", expected non-negative integers");
    t.shape.push_back((int64_t)dim);
  }

  GPT_CHECK(offsets->kind == JsonValue::Kind::array && offsets->items.size() == 2 &&
                offsets->items[0].as_u64(&t.begin) && offsets->items[1].as_u64(&t.end),
            path, ": tensor '", name, "': data_offsets must be [begin, end], two non-negative integers");
  GPT_CHECK(t.begin <= t.end && t.end <= data_bytes, path, ": tensor '", name, "': data_offsets [", t.begin, ", ",
            t.end, "] are not inside the data region of ", data_bytes, " bytes");

  // numel * size, saturating at 2^64 - 1 so a hostile shape cannot wrap around to the right byte count.
  uint64_t bytes = info->size;
  bool zero = false, saturated = false;
  for (int64_t dim : t.shape) {
    if (dim == 0) zero = true;
    if (__builtin_mul_overflow(bytes, (uint64_t)dim, &bytes)) saturated = true;
  }
  if (zero) bytes = 0, saturated = false;
  GPT_CHECK(!saturated && t.end - t.begin == bytes, path, ": tensor '", name, "' (", info->name, ", shape ",
            shape_str(t.shape), ") needs ", saturated ? std::string("over 2^64") : std::to_string(bytes),
            " bytes, but its data_offsets [", t.begin, ", ", t.end, "] hold ", t.end - t.begin);
  return t;
}

// The tensors' byte ranges must tile the data region: sorted by start, each begins where the last ended.
void check_coverage(const std::vector<StTensor>& tensors, uint64_t data_bytes, const std::string& path) {
  std::vector<const StTensor*> sorted;
  for (const StTensor& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const StTensor* a, const StTensor* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const StTensor* prev = nullptr;
  for (const StTensor* t : sorted) {
    GPT_CHECK(t->begin >= at, path, ": tensors '", prev ? prev->name : "", "' [", prev ? prev->begin : 0, ", ", at,
              ") and '", t->name, "' [", t->begin, ", ", t->end, ") overlap in the data region");
    GPT_CHECK(t->begin == at, path, ": bytes [", at, ", ", t->begin, ") of the data region belong to no tensor (a gap ",
              prev ? "between '" + prev->name + "' and" : std::string("before"), " '", t->name, "')");
    at = t->end;
    prev = t;
  }
  GPT_CHECK(at == data_bytes, path, ": bytes [", at, ", ", data_bytes, ") of the data region belong to no tensor (",
            prev ? "after the last tensor '" + prev->name + "'" : std::string("the header lists no tensor"),
            "): the data region must hold exactly the tensors");
}

}  // namespace

const char* st_dtype_name(StDType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d.name;
  return "?";
}

size_t st_dtype_size(StDType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d.size;
  return 0;
}

int64_t StTensor::numel() const {
  for (int64_t d : shape)
    if (d == 0) return 0;  // [huge, huge, 0] holds nothing; the product below would overflow
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated by the reader: the product times the size fits in the file
  return n;
}

float fp16_widen(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // infinity or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;  // signed zero
  } else {
    // subnormal: man * 2^-24; shift the leading 1 up to bit 10 and lower the exponent to match
    int shift = 0;
    while (!(man & 0x400u)) {
      man <<= 1;
      shift++;
    }
    bits = sign | ((uint32_t)(127 - 14 - shift) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  f_.reset(std::fopen(path.c_str(), "rb"));
  GPT_CHECK(f_ != nullptr, path, ": cannot open safetensors file: ", std::strerror(errno));
  struct stat st;
  GPT_CHECK(::fstat(::fileno(f_.get()), &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  GPT_CHECK(S_ISREG(st.st_mode), path, ": not a regular file");
  const uint64_t size = (uint64_t)st.st_size;
  GPT_CHECK(size >= 8, path, ": file is ", size,
            " bytes, shorter than the 8-byte header length that starts a safetensors file");
  unsigned char len_bytes[8];
  GPT_CHECK(std::fread(len_bytes, 8, 1, f_.get()) == 1, path, ": cannot read the header length");
  const uint64_t n = load_u64_le(len_bytes);
  GPT_CHECK(n > 0, path, ": header length is 0, expected a JSON header");
  GPT_CHECK(n <= kMaxHeaderBytes, path, ": header length ", n, " exceeds the format's limit of ", kMaxHeaderBytes,
            " bytes (not a safetensors file?)");
  GPT_CHECK(n <= size - 8, path, ": header length ", n, " runs past the end of the file (", size,
            " bytes): truncated or not a safetensors file");
  std::string header((size_t)n, '\0');
  GPT_CHECK(std::fread(header.data(), 1, header.size(), f_.get()) == header.size(), path, ": short read of the header");
  data_offset_ = 8 + n;
  const uint64_t data_bytes = size - data_offset_;

  const JsonValue root = parse_json(header, path + ": JSON header");
  GPT_CHECK(root.kind == JsonValue::Kind::object, path, ": the JSON header is ", root.kind_name(),
            ", expected an object of tensors");
  bool have_metadata = false;
  for (const auto& [name, v] : root.members) {
    if (name == "__metadata__") {
      GPT_CHECK(!have_metadata, path, ": __metadata__ appears twice in the header");
      have_metadata = true;
      GPT_CHECK(v.kind == JsonValue::Kind::object, path, ": __metadata__ is ", v.kind_name(),
                ", expected an object of strings");
      for (const auto& [key, value] : v.members) {
        GPT_CHECK(value.kind == JsonValue::Kind::string, path, ": __metadata__ '", key, "' is ", value.kind_name(),
                  ", expected a string");
        for (const auto& kv : metadata_) GPT_CHECK(kv.first != key, path, ": __metadata__ '", key, "' appears twice");
        metadata_.emplace_back(key, value.text);
      }
      continue;
    }
    tensors_.push_back(parse_tensor(name, v, data_bytes, path));
  }
  // Names must be unique (a sorted copy finds duplicates in n log n, even in a hostile header).
  std::vector<const std::string*> names;
  for (const StTensor& t : tensors_) names.push_back(&t.name);
  std::sort(names.begin(), names.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
  for (size_t i = 1; i < names.size(); i++)
    GPT_CHECK(*names[i] != *names[i - 1], path, ": tensor '", *names[i], "' appears twice in the header");
  check_coverage(tensors_, data_bytes, path);
}

const StTensor* SafetensorsReader::find(const std::string& name) const {
  for (const StTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const std::string* SafetensorsReader::find_metadata(const std::string& key) const {
  for (const auto& kv : metadata_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

std::vector<float> SafetensorsReader::read_f32(const StTensor& t) const {
  GPT_CHECK(t.dtype == StDType::F32 || t.dtype == StDType::F16 || t.dtype == StDType::BF16, path_, ": tensor '",
            t.name, "' has dtype ", st_dtype_name(t.dtype), ", expected F32, F16 or BF16");
  const size_t numel = (size_t)t.numel();
  std::vector<float> out(numel);  // (numel,) — the reader checked numel * size against the file
  GPT_CHECK(::fseeko(f_.get(), (off_t)(data_offset_ + t.begin), SEEK_SET) == 0, path_, ": cannot seek to tensor '", t.name,
            "': ", std::strerror(errno));
  if (t.dtype == StDType::F32) {  // little-endian on disk and on every host the project builds for
    GPT_CHECK(std::fread(out.data(), 4, numel, f_.get()) == numel, path_, ": short read of tensor '", t.name, "'");
    return out;
  }
  constexpr size_t kChunk = 1 << 20;
  std::vector<uint16_t> buf(std::min(numel, kChunk));  // (chunk,) raw 16-bit values
  for (size_t done = 0; done < numel;) {
    const size_t n = std::min(numel - done, kChunk);
    GPT_CHECK(std::fread(buf.data(), 2, n, f_.get()) == n, path_, ": short read of tensor '", t.name, "'");
    if (t.dtype == StDType::F16) {
      for (size_t i = 0; i < n; i++) out[done + i] = fp16_widen(buf[i]);
    } else {
      for (size_t i = 0; i < n; i++) out[done + i] = bf16_widen(buf[i]);
    }
    done += n;
  }
  return out;
}

struct SafetensorsWriter::Impl {
  std::string path;
  AtomicWriter out;
  std::vector<StTensorDecl> decls;
  size_t next = 0;
  Impl(const std::string& p) : path(p), out(p) {}
};

SafetensorsWriter::SafetensorsWriter(const std::string& path, const std::vector<StTensorDecl>& tensors,
                                     const std::vector<std::pair<std::string, std::string>>& metadata)
    : impl_(std::make_unique<Impl>(path)) {
  impl_->decls = tensors;
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); i++) {
      if (i) h += ',';
      h += json_quote(metadata[i].first);
      h += ':';
      h += json_quote(metadata[i].second);
    }
    h += '}';
  }
  uint64_t at = 0;
  for (const StTensorDecl& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      GPT_CHECK(d >= 0, path, ": tensor '", t.name, "' has a negative dimension");
      numel *= (uint64_t)d;
    }
    if (h.size() > 1) h += ',';
    h += json_quote(t.name);
    h += ":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); i++) h += (i ? "," : "") + std::to_string(t.shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + 4 * numel) + "]}";
    at += 4 * numel;
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');  // the data region starts 8-byte aligned, as the reference writer does
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)h.size() >> (8 * i));
  impl_->out.write(len, 8);
  impl_->out.write(h.data(), h.size());
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::write_next(const float* values) {
  GPT_CHECK(impl_->next < impl_->decls.size(), impl_->path, ": more tensors written than the ",
            impl_->decls.size(), " declared");
  int64_t numel = 1;
  for (int64_t d : impl_->decls[impl_->next].shape) numel *= d;
  impl_->out.write(values, (size_t)numel * sizeof(float));
  impl_->next++;
}

void SafetensorsWriter::commit() {
  GPT_CHECK(impl_->next == impl_->decls.size(), impl_->path, ": ", impl_->next, " of ", impl_->decls.size(),
            " declared tensors written");
  impl_->out.commit();
}

}  // namespace gpt
