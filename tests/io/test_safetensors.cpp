// The safetensors layer (io/safetensors.h) and the JSON reader under it: files written here byte by byte
// from the format's specification are read back exactly; the writer's files re-read bit for bit; every
// malformed file (truncated, bad JSON, unknown dtype, shape against bytes, overlapping or gapped data) is
// refused with one line naming the file and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/json_min.h"
#include "src/io/safetensors.h"
#include "tests/common/error_of.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; i++) s[i] = (char)(v >> (8 * i));
  return s;
}

// A safetensors file: the header length, the header text as given, the data bytes.
std::string st_bytes(const std::string& header, const std::string& data) { return u64_le(header.size()) + header + data; }

std::string write(const std::string& name, const std::string& bytes) {
  const std::string path = scratch_dir() + "/" + name;
  write_file_atomic(path, bytes.data(), bytes.size());
  return path;
}

std::string f32_bytes(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

// ---- JSON -------------------------------------------------------------------------------------------

TEST(SafetensorsJson, ParsesEveryKindAndKeepsIntegersExact) {
  JsonValue v = parse_json(
      " {\"a\": [1, -2.5e3, 18446744073709551615, \"x\\u00e9\"], \"b\": {\"c\": true, \"d\": null}, \"e\": false} ",
      "test");
  ASSERT_EQ(v.kind, JsonValue::Kind::object);
  ASSERT_EQ(v.members.size(), 3u);
  const JsonValue& a = v.members[0].second;
  ASSERT_EQ(a.items.size(), 4u);
  uint64_t u = 0;
  EXPECT_TRUE(a.items[0].as_u64(&u));
  EXPECT_EQ(u, 1u);
  EXPECT_FALSE(a.items[1].as_u64(&u));  // negative, fractional
  EXPECT_EQ(a.items[1].text, "-2.5e3");
  EXPECT_TRUE(a.items[2].as_u64(&u));
  EXPECT_EQ(u, UINT64_MAX);
  EXPECT_EQ(a.items[3].text, "x\xc3\xa9");
  EXPECT_EQ(v.members[1].second.members[0].second.kind, JsonValue::Kind::boolean);
  EXPECT_TRUE(v.members[1].second.members[0].second.boolean);
  EXPECT_EQ(v.members[1].second.members[1].second.kind, JsonValue::Kind::null);
  EXPECT_FALSE(parse_json("18446744073709551616", "t").as_u64(&u));  // 2^64
}

TEST(SafetensorsJson, MalformedInputNamesTheByte) {
  for (const char* bad : {"{", "{\"a\" 1}", "[1,]", "01", "1.", "-", "{\"a\":tru}", "[1] x", "\"\\q\"", "", "1e"}) {
    const std::string msg = error_of([&] { parse_json(bad, "src.json"); });
    EXPECT_EQ(msg.rfind("src.json: byte ", 0), 0u) << bad << " -> " << msg;
  }
  std::string deep(65, '[');
  deep += std::string(65, ']');
  EXPECT_NE(error_of([&] { parse_json(deep, "d"); }).find("64 levels"), std::string::npos);
  std::string ok(64, '[');
  ok += std::string(64, ']');
  EXPECT_NO_THROW(parse_json(ok, "d"));
}

// ---- fp16 ------------------------------------------------------------------------------------------

TEST(Safetensors, Fp16WidensEveryValueExactly) {
  for (uint32_t h = 0; h < 65536; h++) {
    const int sign = (h >> 15) ? -1 : 1, exp = (h >> 10) & 31, man = h & 1023;
    const float got = fp16_widen((uint16_t)h);
    if (exp == 31) {
      if (man == 0) {
        EXPECT_TRUE(std::isinf(got) && (got < 0) == (sign < 0)) << h;
      } else {
        EXPECT_TRUE(std::isnan(got)) << h;
      }
      continue;
    }
    const double want = sign * (exp == 0 ? std::ldexp((double)man, -24) : std::ldexp(1024.0 + man, exp - 25));
    ASSERT_EQ((double)got, want) << "bits " << h;
    ASSERT_EQ(std::signbit(got), sign < 0) << h;
  }
}

// ---- well-formed files --------------------------------------------------------------------------------

TEST(Safetensors, ReadsAHandWrittenFile) {
  // Tensors listed out of data order, a scalar, a zero-size tensor, F16/BF16 values, header padded with spaces.
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};  // F32 [2, 3] at [8, 32)
  const std::string h16 = std::string("\x00\x3c\x00\xc0", 4);             // F16 [2] = {1, -2} at [0, 4)
  const std::string hb16 = std::string("\x80\x3f\x40\xc0", 4);            // BF16 [2] = {1, -3} at [4, 8)
  const std::string header =
      "{\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
      "\"__metadata__\":{\"format\":\"pt\",\"n_head\":\"2\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
      "\"z\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4611686018427387904,0],\"data_offsets\":[32,32]},"
      "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
      "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[32,36]}}    ";
  const std::string path = write("ok.safetensors", st_bytes(header, h16 + hb16 + f32_bytes(a) + f32_bytes({-4.0f})));
  SafetensorsReader r(path);
  ASSERT_EQ(r.tensors().size(), 5u);
  EXPECT_EQ(r.tensors()[0].name, "b");
  EXPECT_EQ(r.data_offset(), 8 + header.size());
  ASSERT_NE(r.find_metadata("n_head"), nullptr);
  EXPECT_EQ(*r.find_metadata("n_head"), "2");
  EXPECT_EQ(*r.find_metadata("format"), "pt");
  EXPECT_EQ(r.find("missing"), nullptr);
  EXPECT_EQ(r.read_f32(*r.find("a")), a);
  EXPECT_EQ(r.read_f32(*r.find("b")), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(r.read_f32(*r.find("c")), (std::vector<float>{1.0f, -3.0f}));
  EXPECT_TRUE(r.read_f32(*r.find("z")).empty());
  EXPECT_EQ(r.read_f32(*r.find("s")), (std::vector<float>{-4.0f}));
  EXPECT_EQ(r.find("a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.find("z")->numel(), 0);
  EXPECT_TRUE(r.find("s")->shape.empty());
}

TEST(Safetensors, WriterRoundTripsBitForBit) {
  const std::string path = scratch_dir() + "/w.safetensors";
  std::vector<float> m(4 * 3), s = {-0.0f}, e;
  for (size_t i = 0; i < m.size(); i++) m[i] = (float)i * 0.37f - 1.0f;
  m[5] = INFINITY;
  m[6] = 1e-40f;  // denormal
  {
    SafetensorsWriter w(path, {{"m\"x", {4, 3}}, {"scalar", {}}, {"empty", {0}}}, {{"format", "pt"}});
    w.write_next(m.data());
    w.write_next(s.data());
    w.write_next(e.data());
    w.commit();
  }
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header padded to a multiple of 8";
  SafetensorsReader r(path);
  ASSERT_EQ(r.tensors().size(), 3u);
  EXPECT_EQ(r.tensors()[0].name, "m\"x");
  EXPECT_EQ(r.tensors()[0].dtype, StDType::F32);
  const std::vector<float> back = r.read_f32(r.tensors()[0]);
  EXPECT_EQ(std::memcmp(back.data(), m.data(), m.size() * 4), 0);
  EXPECT_TRUE(std::signbit(r.read_f32(r.tensors()[1])[0]));
  EXPECT_EQ(*r.find_metadata("format"), "pt");
}

TEST(Safetensors, WriterRefusesToCommitAnIncompleteFile) {
  const std::string path = scratch_dir() + "/part.safetensors";
  std::vector<float> v(2);
  {
    SafetensorsWriter w(path, {{"a", {2}}, {"b", {2}}}, {});
    w.write_next(v.data());
    EXPECT_NE(error_of([&] { w.commit(); }).find("1 of 2"), std::string::npos);
  }
  EXPECT_NE(error_of([&] { SafetensorsReader r(path); }).find(path), std::string::npos) << "no file left behind";
}

// ---- malformed files: one line naming the file and the problem --------------------------------------------

class BadSafetensors : public ::testing::Test {
 protected:
  // Writes the bytes and returns the reader's error, checked to name the file and to be one line.
  std::string error(const std::string& bytes) {
    const std::string path = write("bad.safetensors", bytes);
    const std::string msg = error_of([&] { SafetensorsReader r(path); });
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  std::string error(const std::string& header, size_t data_bytes) { return error(st_bytes(header, std::string(data_bytes, '\0'))); }
  static std::string tensor(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t b,
                            uint64_t e) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
           std::to_string(b) + "," + std::to_string(e) + "]}";
  }
};

#define EXPECT_MSG(msg, needle) EXPECT_NE((msg).find(needle), std::string::npos) << (msg)

TEST_F(BadSafetensors, ShorterThanTheHeaderLength) { EXPECT_MSG(error(std::string(5, '\x10')), "shorter than the 8-byte"); }

TEST_F(BadSafetensors, HeaderLengthPastTheFile) {
  EXPECT_MSG(error(u64_le(1000) + "{}"), "header length 1000 runs past the end of the file (10 bytes)");
}

TEST_F(BadSafetensors, TruncatedHeader) {
  const std::string full = st_bytes("{" + tensor("a", "F32", "[2]", 0, 8) + "}", std::string(8, '\0'));
  EXPECT_MSG(error(full.substr(0, 20)), "runs past the end of the file");
}

TEST_F(BadSafetensors, HugeOrZeroHeaderLength) {
  EXPECT_MSG(error(u64_le(~0ull) + "{}"), "exceeds the format's limit");
  EXPECT_MSG(error(u64_le(0) + "{}"), "header length is 0");
}

TEST_F(BadSafetensors, BadJson) {
  EXPECT_MSG(error("{\"a\":{\"dtype\":\"F32\",", 0), "JSON header: byte ");
  EXPECT_MSG(error("{\"a\":1}garbage", 0), "JSON header: byte 7");
  EXPECT_MSG(error("[1, 2]", 0), "the JSON header is an array, expected an object");
  EXPECT_MSG(error("{\"a\": [1]}", 0), "tensor 'a' is an array");
}

TEST_F(BadSafetensors, UnknownDtype) {
  EXPECT_MSG(error("{" + tensor("w", "F128", "[2]", 0, 32) + "}", 32), "tensor 'w': unknown dtype 'F128'");
}

TEST_F(BadSafetensors, ShapeDisagreesWithTheBytes) {
  EXPECT_MSG(error("{" + tensor("w", "F32", "[2, 3]", 0, 20) + "}", 20),
             "tensor 'w' (F32, shape [2, 3]) needs 24 bytes, but its data_offsets [0, 20] hold 20");
  EXPECT_MSG(error("{" + tensor("w", "F32", "[1099511627776, 1099511627776]", 0, 8) + "}", 8),
             "needs over 2^64 bytes, but its data_offsets [0, 8] hold 8");
  // 2^62 * 4 bytes wraps to 0 in 64 bits: must not pass as an empty tensor.
  EXPECT_MSG(error("{" + tensor("w", "F32", "[4611686018427387904]", 0, 0) + "}", 0), "needs over 2^64 bytes");
  EXPECT_MSG(error("{" + tensor("w", "F32", "[-2]", 0, 8) + "}", 8), "non-negative integers");
  EXPECT_MSG(error("{" + tensor("w", "F32", "[2.0]", 0, 8) + "}", 8), "non-negative integers");
  EXPECT_MSG(error("{" + tensor("w", "F32", "2", 0, 8) + "}", 8), "shape is a number");
}

TEST_F(BadSafetensors, OffsetsOutsideTheData) {
  EXPECT_MSG(error("{" + tensor("w", "F32", "[4]", 0, 16) + "}", 8), "not inside the data region of 8 bytes");
  EXPECT_MSG(error("{" + tensor("w", "F32", "[0]", 8, 4) + "}", 8), "not inside");
  EXPECT_MSG(error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4), "[begin, end]");
  EXPECT_MSG(error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4), "lacks \"data_offsets\"");
}

TEST_F(BadSafetensors, OverlappingOffsets) {
  EXPECT_MSG(error("{" + tensor("a", "F32", "[2]", 0, 8) + "," + tensor("b", "F32", "[2]", 4, 12) + "}", 12),
             "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
}

TEST_F(BadSafetensors, GapInTheData) {
  EXPECT_MSG(error("{" + tensor("a", "F32", "[2]", 0, 8) + "," + tensor("b", "F32", "[2]", 12, 20) + "}", 20),
             "bytes [8, 12) of the data region belong to no tensor (a gap between 'a' and 'b')");
  EXPECT_MSG(error("{" + tensor("b", "F32", "[2]", 4, 12) + "}", 12), "bytes [0, 4)");
  EXPECT_MSG(error("{" + tensor("a", "F32", "[2]", 0, 8) + "}", 12), "bytes [8, 12) of the data region belong to no tensor");
}

TEST_F(BadSafetensors, DuplicatesAndMetadata) {
  EXPECT_MSG(error("{" + tensor("a", "F32", "[1]", 0, 4) + "," + tensor("a", "F32", "[1]", 4, 8) + "}", 8),
             "tensor 'a' appears twice");
  EXPECT_MSG(error("{\"__metadata__\":{\"n_head\":12}}", 0), "__metadata__ 'n_head' is a number, expected a string");
  EXPECT_MSG(error("{\"__metadata__\":[]}", 0), "__metadata__ is an array");
  EXPECT_MSG(error("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
             "\"dtype\" twice");
}

TEST_F(BadSafetensors, NonFloatTensorsAreReadableOnlyAsTheirType) {
  const std::string path = write("i.safetensors", st_bytes("{" + tensor("ids", "I64", "[2]", 0, 16) + "}", std::string(16, '\0')));
  SafetensorsReader r(path);  // a valid file
  const std::string msg = error_of([&] { r.read_f32(r.tensors()[0]); });
  EXPECT_MSG(msg, path + ": tensor 'ids' has dtype I64, expected F32, F16 or BF16");
}

TEST_F(BadSafetensors, ErrorsCloseTheFile) {
  auto open_fds = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n++;
    return n;
  };
  const std::string path = write("bad.safetensors", st_bytes("{" + tensor("w", "F128", "[1]", 0, 4) + "}", std::string(4, '\0')));
  const size_t before = open_fds();
  for (int i = 0; i < 50; i++) EXPECT_THROW(SafetensorsReader r(path), Error);
  EXPECT_EQ(open_fds(), before);
}

TEST_F(BadSafetensors, MissingFile) {
  const std::string path = scratch_dir() + "/none.safetensors";
  EXPECT_MSG(error_of([&] { SafetensorsReader r(path); }), path + ": cannot open");
}

}  // namespace
}  // namespace gpt::test
