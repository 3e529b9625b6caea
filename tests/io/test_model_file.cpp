// llm.c model files: a file written here from the format description (each tensor filled with values that
// encode its index and position) must land at the per-unit offsets derived here by hand; bf16 files widen
// exactly; save/load round-trips bit for bit; malformed headers are clean one-line errors naming the file.
#include <gtest/gtest.h>

#include "tests/common/error_of.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/common/test_paths.h"
#include "src/core/check.h"
#include "src/io/model_file.h"
#include "tests/common/tiny_config.h"

namespace {

struct Dims {
  int32_t maxT = 8, V = 200, L = 2, NH = 2, C = 4, Vp = 256;
};

// The file's tensors in order, with their total sizes (all layers) and whether they are per block.
struct FileTensor {
  const char* name;
  int64_t size;  // elements in the file
  bool block;
};

std::vector<FileTensor> file_tensors(const Dims& d) {
  const int64_t C = d.C, L = d.L;
  return {{"wte", (int64_t)d.Vp * C, false}, {"wpe", (int64_t)d.maxT * C, false},
          {"ln1w", L * C, true},             {"ln1b", L * C, true},
          {"qkvw", L * 3 * C * C, true},     {"qkvb", L * 3 * C, true},
          {"attprojw", L * C * C, true},     {"attprojb", L * C, true},
          {"ln2w", L * C, true},             {"ln2b", L * C, true},
          {"fcw", L * 4 * C * C, true},      {"fcb", L * 4 * C, true},
          {"fcprojw", L * C * 4 * C, true},  {"fcprojb", L * C, true},
          {"lnfw", C, false},                {"lnfb", C, false}};
}

using ValueFn = std::function<float(int tensor, int64_t pos)>;

float fp32_value(int j, int64_t p) { return (float)(j * 4096 + p); }  // exact in fp32 (< 2^24)

float bf16_value(int j, int64_t p) {  // 8 significant bits: exact in bf16
  float m = 1.0f + (float)(p % 128) / 128.0f;
  return std::ldexp(m, j - 8) * (((p / 128) % 2) ? -1.0f : 1.0f);
}

void write_llmc(const std::string& path, const Dims& d, int32_t magic, int32_t version, const ValueFn& value,
                int64_t extra_bytes = 0) {
  int32_t h[256] = {0};
  int32_t fields[8] = {magic, version, d.maxT, d.V, d.L, d.NH, d.C, d.Vp};
  std::memcpy(h, fields, sizeof fields);
  std::string bytes(reinterpret_cast<const char*>(h), sizeof h);
  if (value) {
    auto tensors = file_tensors(d);
    for (int j = 0; j < (int)tensors.size(); j++) {
      for (int64_t p = 0; p < tensors[j].size; p++) {
        float v = value(j, p);
        if (version == 5) {
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          uint16_t top = (uint16_t)(bits >> 16);  // truncation: exact for bf16-representable values
          bytes.append(reinterpret_cast<const char*>(&top), 2);
        } else {
          bytes.append(reinterpret_cast<const char*>(&v), 4);
        }
      }
    }
  }
  if (extra_bytes > 0) bytes.append((size_t)extra_bytes, '\0');
  if (extra_bytes < 0) bytes.resize(bytes.size() - (size_t)(-extra_bytes));
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// Expected per-unit buffers, from the per-layer order in model/layout.h, derived independently here.
std::vector<std::vector<float>> expected_units(const Dims& d, const ValueFn& value) {
  auto tensors = file_tensors(d);
  const int64_t C = d.C;
  std::vector<std::vector<float>> units(d.L + 1);  // the root (wte, wpe, lnfw, lnfb), then one unit per block
  for (int64_t p = 0; p < (int64_t)d.Vp * C; p++) units[0].push_back(value(0, p));
  for (int64_t p = 0; p < (int64_t)d.maxT * C; p++) units[0].push_back(value(1, p));
  for (int l = 0; l < d.L; l++)
    for (int j = 2; j <= 13; j++) {
      const int64_t per_layer = tensors[j].size / d.L;
      for (int64_t i = 0; i < per_layer; i++) units[1 + l].push_back(value(j, l * per_layer + i));
    }
  for (int j = 14; j <= 15; j++)
    for (int64_t i = 0; i < C; i++) units[0].push_back(value(j, i));
  return units;
}

using gpt::test::error_of;

gpt::GPTConfig small_config() {
  gpt::GPTConfig c = gpt::test::tiny_config(2, 2, 4, 8, 200);
  return c;
}

void expect_units_equal(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t u = 0; u < want.size(); u++) {
    ASSERT_EQ(got[u].size(), want[u].size()) << "unit " << u;
    for (size_t i = 0; i < want[u].size(); i++) ASSERT_EQ(got[u][i], want[u][i]) << "unit " << u << " elem " << i;
  }
}

}  // namespace

TEST(ModelFile, HandWrittenFp32LandsAtUnitOffsets) {
  const std::string path = gpt::test::scratch_dir() + "/m.bin";
  Dims d;
  write_llmc(path, d, 20240326, 3, fp32_value);
  gpt::ModelWeights w = gpt::load_model_file(path);
  EXPECT_EQ(w.config.max_seq_len, 8);
  EXPECT_EQ(w.config.vocab_size, 200);
  EXPECT_EQ(w.config.padded_vocab_size, 256);
  EXPECT_EQ(w.config.num_layers, 2);
  EXPECT_EQ(w.config.num_heads, 2);
  EXPECT_EQ(w.config.channels, 4);
  expect_units_equal(w.units, expected_units(d, fp32_value));
  // Spot checks written out by hand: block 1's qkvw starts at element 2C = 8 of unit 2 and holds file
  // qkvw (tensor 4) from position 3C*C = 48; the root unit ends with lnfw (tensor 14) then lnfb (tensor 15),
  // after wte (Vp*C = 1024 elements) and wpe (maxT*C = 32).
  ASSERT_EQ(w.units.size(), 3u);
  EXPECT_EQ(w.units[2][8], 4 * 4096 + 48);
  EXPECT_EQ(w.units[0][1024 + 32], 14 * 4096);
  EXPECT_EQ(w.units[0][1024 + 32 + 4], 15 * 4096);
  EXPECT_EQ(w.units[0][256 * 4], 1 * 4096);  // wpe follows wte (Vp*C elements)
}

TEST(ModelFile, Bf16WidensExactly) {
  const std::string path = gpt::test::scratch_dir() + "/m5.bin";
  Dims d;
  write_llmc(path, d, 20240326, 5, bf16_value);
  gpt::ModelWeights w = gpt::load_model_file(path);
  expect_units_equal(w.units, expected_units(d, bf16_value));
}

TEST(ModelFile, SaveLoadRoundTripIsBitExact) {
  const std::string path = gpt::test::scratch_dir() + "/rt.bin";
  gpt::GPTConfig cfg = small_config();
  gpt::Layout layout(cfg);
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> units(layout.num_units());
  std::vector<const float*> ptrs;
  for (int u = 0; u < layout.num_units(); u++) {
    units[u].resize(layout.unit(u).numel);
    for (auto& v : units[u]) v = normal(gen);
    ptrs.push_back(units[u].data());
  }
  units[0][0] = -0.0f;
  units[0][1] = 1e-40f;  // denormal
  units[1][2] = std::numeric_limits<float>::max();  // the largest finite value (non-finite ones are refused)
  gpt::save_model_file(path, layout, ptrs);
  gpt::ModelWeights w = gpt::load_model_file(path);
  EXPECT_TRUE(w.config == cfg);
  ASSERT_EQ(w.units.size(), units.size());
  for (size_t u = 0; u < units.size(); u++) {
    ASSERT_EQ(w.units[u].size(), units[u].size());
    EXPECT_EQ(std::memcmp(w.units[u].data(), units[u].data(), units[u].size() * 4), 0) << "unit " << u;
  }
}

// A weight that is NaN or infinite is refused on load, naming the file, the tensor and its layer.
TEST(ModelFile, NonFiniteWeightsAreRefused) {
  const std::string path = gpt::test::scratch_dir() + "/inf.bin";
  gpt::GPTConfig cfg = small_config();
  gpt::Layout layout(cfg);
  std::vector<std::vector<float>> units(layout.num_units());
  std::vector<const float*> ptrs;
  for (int u = 0; u < layout.num_units(); u++) {
    units[u].assign(layout.unit(u).numel, 0.5f);
    ptrs.push_back(units[u].data());
  }
  const gpt::TensorPlace fcw = layout.locate("fcw", 1);
  units[fcw.unit][fcw.spec->offset + 3] = -INFINITY;
  gpt::save_model_file(path, layout, ptrs);
  try {
    gpt::load_model_file(path);
    ADD_FAILURE() << "a file with an infinite weight loaded";
  } catch (const gpt::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("inf.bin: tensor fcw of layer 1 holds a non-finite value (-inf) at element 3"), std::string::npos)
        << msg;
  }
}

TEST(ModelFile, SavedFileHasTheLlmcLayout) {
  // save_model_file of the expected units must reproduce the hand-written file byte for byte.
  const std::string dir = gpt::test::scratch_dir();
  Dims d;
  write_llmc(dir + "/hand.bin", d, 20240326, 3, fp32_value);
  auto units = expected_units(d, fp32_value);
  std::vector<const float*> ptrs;
  for (auto& u : units) ptrs.push_back(u.data());
  gpt::save_model_file(dir + "/saved.bin", gpt::Layout(small_config()), ptrs);
  auto slurp = [](const std::string& p) {
    FILE* f = std::fopen(p.c_str(), "rb");
    std::string s;
    char buf[4096];
    size_t n;
    while (f && (n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    if (f) std::fclose(f);
    return s;
  };
  std::string a = slurp(dir + "/hand.bin"), b = slurp(dir + "/saved.bin");
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b);
}

TEST(ModelFile, SaveRejectsWrongUnitCount) {
  const std::string path = gpt::test::scratch_dir() + "/x.bin";
  gpt::Layout layout(small_config());
  std::vector<float> buf(10);
  EXPECT_THROW(gpt::save_model_file(path, layout, {buf.data()}), gpt::Error);
}

// ---- malformed files ------------------------------------------------------------------------------

class BadModelFile : public ::testing::Test {
 protected:
  void SetUp() override { path = gpt::test::scratch_dir() + "/bad.bin"; }
  std::string expect_error() {
    std::string msg = error_of([&] { gpt::load_model_file(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    return msg;
  }
  std::string path;
};

TEST_F(BadModelFile, WrongMagic) {
  write_llmc(path, Dims{}, 20240520, 3, fp32_value);
  EXPECT_NE(expect_error().find("magic"), std::string::npos);
}

TEST_F(BadModelFile, WrongVersion) {
  write_llmc(path, Dims{}, 20240326, 4, fp32_value);
  EXPECT_NE(expect_error().find("version"), std::string::npos);
}

TEST_F(BadModelFile, TruncatedByOneByte) {
  write_llmc(path, Dims{}, 20240326, 3, fp32_value, -1);
  EXPECT_NE(expect_error().find("truncated"), std::string::npos);
}

TEST_F(BadModelFile, TrailingBytes) {
  write_llmc(path, Dims{}, 20240326, 3, fp32_value, 4);
  expect_error();
}

TEST_F(BadModelFile, Bf16SizeIsCheckedAgainstTwoBytesPerValue) {
  write_llmc(path, Dims{}, 20240326, 5, fp32_value);  // bf16 data under a version-5 header: loads
  EXPECT_NO_THROW(gpt::load_model_file(path));
  write_llmc(path, Dims{}, 20240326, 3, fp32_value);  // fp32 data, then the header is patched to say bf16
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  int32_t v5 = 5;
  std::fseek(f, 4, SEEK_SET);
  std::fwrite(&v5, 4, 1, f);
  std::fclose(f);
  EXPECT_NE(expect_error().find("2 bytes"), std::string::npos);
}

TEST_F(BadModelFile, ShorterThanHeader) {
  write_llmc(path, Dims{}, 20240326, 3, nullptr, -1000);
  expect_error();
}

TEST_F(BadModelFile, HugeChannelsIsACleanError) {
  Dims d;
  d.C = 1 << 30;
  d.NH = 1;
  write_llmc(path, d, 20240326, 3, nullptr);
  EXPECT_NE(expect_error().find("1073741824"), std::string::npos);
}

TEST_F(BadModelFile, HugeButLegalDimensionsFailOnSizeNotAllocation) {
  Dims d;
  d.maxT = 1 << 20;
  d.V = 1 << 24;
  d.Vp = 1 << 24;
  d.L = 1024;
  d.NH = 1;
  d.C = 65536;
  write_llmc(path, d, 20240326, 3, nullptr);  // claims ~55 T parameters, holds none
  EXPECT_NE(expect_error().find("expected"), std::string::npos);
}

TEST_F(BadModelFile, ChannelsNotDivisibleByHeads) {
  Dims d;
  d.C = 6;
  d.NH = 4;
  write_llmc(path, d, 20240326, 3, nullptr);
  EXPECT_NE(expect_error().find("divisible"), std::string::npos);
}

TEST_F(BadModelFile, NonPositiveDimension) {
  Dims d;
  d.L = 0;
  write_llmc(path, d, 20240326, 3, nullptr);
  EXPECT_NE(expect_error().find("L"), std::string::npos);
  d = Dims{};
  d.maxT = -5;
  write_llmc(path, d, 20240326, 3, nullptr);
  EXPECT_NE(expect_error().find("maxT"), std::string::npos);
}

TEST_F(BadModelFile, PaddedVocabMustFollowTheRule) {
  Dims d;
  d.Vp = 200;  // V itself, not rounded up to 128
  write_llmc(path, d, 20240326, 3, fp32_value);
  EXPECT_NE(expect_error().find("Vp"), std::string::npos);
  d.Vp = 100;  // smaller than V
  write_llmc(path, d, 20240326, 3, nullptr);
  expect_error();
}

TEST_F(BadModelFile, MissingFile) {
  expect_error();
}
