// Hugging Face GPT-2 safetensors import and export (io/hf_gpt2.h).
// Golden: files written by an independent PyTorch script (scripts/make_safetensors_golden.py, fixture in
// tests/fixtures/safetensors_gpt2) in fp32, fp16 and bf16; the imported model's loss on the fixture's tokens
// must equal PyTorch's (1e-5 relative) for the same weights, and probed weights must land exactly where the
// Conv1D transposition puts them. Export: the file must hold the fixture's own tensors (names, shapes, F32
// bytes) and import back to identical weights. Bad files: every case is one line naming file and tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/core/check.h"
#include "src/core/dtype.h"
#include "src/io/atomic_file.h"
#include "src/io/hf_gpt2.h"
#include "src/io/json_min.h"
#include "src/io/safetensors.h"
#include "tests/common/error_of.h"
#include "tests/common/harness.h"
#include "tests/common/hf_hand_files.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

#define EXPECT_MSG(msg, needle) EXPECT_NE((msg).find(needle), std::string::npos) << (msg)

std::string fixture(const std::string& f) { return source_dir() + "/tests/fixtures/safetensors_gpt2/" + f; }

const JsonValue& get(const JsonValue& obj, const std::string& key) {
  for (const auto& m : obj.members)
    if (m.first == key) return m.second;
  throw Error("expected.json: no key " + key);
}
double num(const JsonValue& v) { return std::stod(v.text); }

struct Tokens {
  std::vector<int> in, tg;
};
Tokens load_tokens(int B, int T) {
  const std::string s = read_file(fixture("tokens.bin"));
  EXPECT_EQ(s.size(), (size_t)2 * B * T * 4);
  Tokens t;
  t.in.resize((size_t)B * T);
  t.tg.resize((size_t)B * T);
  std::memcpy(t.in.data(), s.data(), t.in.size() * 4);
  std::memcpy(t.tg.data(), s.data() + t.in.size() * 4, t.tg.size() * 4);
  return t;
}

// Our value at a Hugging Face name and index (Conv1D [in, out] read from our (out, in) matrix).
float ours_at(const ModelWeights& w, const std::string& name, const std::vector<int64_t>& idx) {
  const Layout layout(w.config);
  if (name == "wte.weight" || name == "wpe.weight") {
    const TensorSpec& t = layout.unit(0).tensor(name == "wte.weight" ? "wte" : "wpe");
    return w.units[0][t.offset + idx[0] * t.cols + idx[1]];
  }
  if (name == "ln_f.weight" || name == "ln_f.bias")
    return w.units[0][layout.unit(0).tensor(name == "ln_f.weight" ? "lnfw" : "lnfb").offset + idx[0]];
  const int l = name[2] - '0';
  const std::string rest = name.substr(4);
  static const std::map<std::string, std::string> ours = {
      {"ln_1.weight", "ln1w"}, {"ln_1.bias", "ln1b"}, {"attn.c_attn.weight", "qkvw"}, {"attn.c_attn.bias", "qkvb"},
      {"attn.c_proj.weight", "attprojw"}, {"attn.c_proj.bias", "attprojb"}, {"ln_2.weight", "ln2w"},
      {"ln_2.bias", "ln2b"}, {"mlp.c_fc.weight", "fcw"}, {"mlp.c_fc.bias", "fcb"}, {"mlp.c_proj.weight", "fcprojw"},
      {"mlp.c_proj.bias", "fcprojb"}};
  const TensorSpec& t = layout.unit(1 + l).tensor(ours.at(rest));  // the default wrap: block l is unit 1 + l
  const std::vector<float>& u = w.units[1 + l];
  if (idx.size() == 2) return u[t.offset + idx[1] * t.cols + idx[0]];  // hf [in, out] = ours (out, in) transposed
  return u[t.offset + idx[0]];
}

class HfImportGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(HfImportGolden, LossMatchesPyTorch) {
  const JsonValue expected = parse_json(read_file(fixture("expected.json")), "expected.json");
  const JsonValue& cfg = get(expected, "config");
  const JsonValue& d = get(get(expected, "dtypes"), GetParam());
  const int B = (int)num(get(expected, "B")), T = (int)num(get(expected, "T"));
  // The BF16 file carries __metadata__ n_head; the others are told, as `gpt import --n-head` would.
  const int heads = std::string(GetParam()) == "BF16" ? 0 : (int)num(get(cfg, "n_head"));
  const HfImport r = import_hf_gpt2(fixture(get(d, "file").text), heads);
  const GPTConfig& c = r.weights.config;
  EXPECT_EQ(c.num_layers, (int)num(get(cfg, "n_layer")));
  EXPECT_EQ(c.num_heads, (int)num(get(cfg, "n_head")));
  EXPECT_EQ(c.channels, (int)num(get(cfg, "n_embd")));
  EXPECT_EQ(c.max_seq_len, (int)num(get(cfg, "n_positions")));
  EXPECT_EQ(c.vocab_size, (int)num(get(cfg, "vocab_size")));
  EXPECT_EQ(c.padded_vocab_size, 128);
  EXPECT_NE(r.summary.find(std::string(GetParam()) + " weights"), std::string::npos) << r.summary;

  for (const JsonValue& p : get(d, "probes").items) {
    std::vector<int64_t> idx;
    for (const JsonValue& i : get(p, "index").items) idx.push_back((int64_t)num(i));
    EXPECT_EQ(ours_at(r.weights, get(p, "name").text, idx), (float)num(get(p, "value"))) << get(p, "name").text;
  }
  // Padded vocabulary rows are zero.
  const Layout layout(c);
  for (int64_t i = (int64_t)c.vocab_size * c.channels; i < (int64_t)c.padded_vocab_size * c.channels; i++)
    ASSERT_EQ(r.weights.units[0][i], 0.0f);

  const Tokens tok = load_tokens(B, T);
  Harness h(c);
  h.set_weights(r.weights.units);
  const float loss = h.loss_and_grads(tok.in, tok.tg, B, T);
  const double want = num(get(d, "loss"));
  const double rel = std::fabs(loss - want) / std::fabs(want);
  std::printf("[ golden ] %s: loss ours %.9f, torch %.9f, relative difference %.3g\n", GetParam(), loss, want, rel);
  EXPECT_LE(rel, 1e-5) << "ours " << loss << " torch " << want;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HfImportGolden, ::testing::Values("F32", "F16", "BF16"));

TEST(HfImport, ReadsEachFixtureStyle) {
  // fp32: openai-community/gpt2 style (no prefix, old attention buffers); fp16: GPT2LMHeadModel state dict
  // (prefix, tied lm_head); bf16: n_head in __metadata__.
  HfImport a = import_hf_gpt2(fixture("model_fp32.safetensors"), 2);
  EXPECT_NE(a.summary.find("skipped 4 attention mask buffers"), std::string::npos) << a.summary;
  EXPECT_NE(a.summary.find("heads given"), std::string::npos) << a.summary;
  HfImport b = import_hf_gpt2(fixture("model_fp16.safetensors"), 2);
  EXPECT_NE(b.summary.find("'transformer.' prefix"), std::string::npos) << b.summary;
  EXPECT_NE(b.summary.find("lm_head.weight tied"), std::string::npos) << b.summary;
  HfImport c = import_hf_gpt2(fixture("model_bf16.safetensors"));
  EXPECT_NE(c.summary.find("heads from __metadata__ n_head"), std::string::npos) << c.summary;
  EXPECT_EQ(c.weights.config.num_heads, 2);
}

TEST(HfImport, HeadsDefaultToCOver64AndTheCallerWins) {
  // The fp32 fixture has no n_head: C = 64 gives one head of 64 channels, as for every GPT-2 size.
  HfImport a = import_hf_gpt2(fixture("model_fp32.safetensors"));
  EXPECT_EQ(a.weights.config.num_heads, 1);
  EXPECT_NE(a.summary.find("C/64"), std::string::npos);
  HfImport b = import_hf_gpt2(fixture("model_bf16.safetensors"), 4);  // metadata says 2; the caller wins
  EXPECT_EQ(b.weights.config.num_heads, 4);
}

// ---- hub folders: config.json beside the weights, in one file or in shards -------------------------------

// PyTorch's reference (expected.json "hub") for the 4-head model of the hub folders.
struct Hub {
  JsonValue expected = parse_json(read_file(fixture("expected.json")), "expected.json");
  const JsonValue& hub = get(expected, "hub");
  int B = (int)num(get(expected, "B")), T = (int)num(get(expected, "T"));
  float loss(const ModelWeights& w) const {
    const Tokens tok = load_tokens(B, T);
    Harness h(w.config);
    h.set_weights(w.units);
    return h.loss_and_grads(tok.in, tok.tg, B, T);
  }
};

class HfHubGolden : public ::testing::TestWithParam<const char*> {};

// C = 64 in 4 heads: C/64 would give 1, only config.json says 4. No head count is passed, as
// `gpt import --from DIR` without --n-head.
TEST_P(HfHubGolden, LossMatchesPyTorchWithConfigJsonsHeads) {
  const Hub ref;
  const JsonValue& cfg = get(ref.hub, "config");
  const HfImport r = import_hf_gpt2(fixture(GetParam()));
  const GPTConfig& c = r.weights.config;
  EXPECT_EQ(c.num_layers, (int)num(get(cfg, "n_layer")));
  EXPECT_EQ(c.num_heads, (int)num(get(cfg, "n_head")));
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.channels, (int)num(get(cfg, "n_embd")));
  EXPECT_EQ(c.max_seq_len, (int)num(get(cfg, "n_positions")));
  EXPECT_EQ(c.vocab_size, (int)num(get(cfg, "vocab_size")));
  EXPECT_NE(r.summary.find("heads from config.json"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("config.json agrees"), std::string::npos) << r.summary;
  for (const JsonValue& p : get(ref.hub, "probes").items) {
    std::vector<int64_t> idx;
    for (const JsonValue& i : get(p, "index").items) idx.push_back((int64_t)num(i));
    EXPECT_EQ(ours_at(r.weights, get(p, "name").text, idx), (float)num(get(p, "value"))) << get(p, "name").text;
  }
  const float loss = ref.loss(r.weights);
  const double want = num(get(ref.hub, "loss"));
  const double rel = std::fabs(loss - want) / std::fabs(want);
  std::printf("[ golden ] %s: loss ours %.9f, torch %.9f, relative difference %.3g\n", GetParam(), loss, want, rel);
  EXPECT_LE(rel, 1e-5) << "ours " << loss << " torch " << want;
}

INSTANTIATE_TEST_SUITE_P(Sources, HfHubGolden,
                         ::testing::Values("hub_gpt2_h4", "hub_gpt2_h4/model.safetensors", "hub_gpt2_h4_sharded",
                                           "hub_gpt2_h4_sharded/model.safetensors.index.json"));

TEST(HfHub, ShardsGiveTheWeightsOfTheOneFile) {
  const HfImport a = import_hf_gpt2(fixture("hub_gpt2_h4")), b = import_hf_gpt2(fixture("hub_gpt2_h4_sharded"));
  EXPECT_NE(b.summary.find("F16 weights in 2 shards"), std::string::npos) << b.summary;
  EXPECT_NE(b.summary.find("'transformer.' prefix"), std::string::npos) << b.summary;
  EXPECT_TRUE(b.weights.config == a.weights.config);
  ASSERT_EQ(b.weights.units.size(), a.weights.units.size());
  for (size_t u = 0; u < a.weights.units.size(); u++)
    EXPECT_TRUE(b.weights.units[u] == a.weights.units[u]) << "unit " << u;
}

// Without its config.json the same file falls back to C/64 = 1 head, and its loss is then PyTorch's loss for
// one head, far from the model's own: what config.json is read for.
TEST(HfHub, WithoutConfigJsonTheHeadsAreCOver64) {
  const Hub ref;
  const std::string path = scratch_dir() + "/model.safetensors";
  const std::string bytes = read_file(fixture("hub_gpt2_h4/model.safetensors"));
  write_file_atomic(path, bytes.data(), bytes.size());
  const HfImport r = import_hf_gpt2(path);
  EXPECT_EQ(r.weights.config.num_heads, 1);
  EXPECT_NE(r.summary.find("heads = C/64, no config.json"), std::string::npos) << r.summary;
  const double loss = ref.loss(r.weights), one = num(get(ref.hub, "loss_one_head")), four = num(get(ref.hub, "loss"));
  EXPECT_LE(std::fabs(loss - one) / one, 1e-5) << loss << " vs " << one;
  EXPECT_GT(std::fabs(loss - four) / four, 1e-3) << loss << " vs " << four;
}

TEST(HfHub, AHeadCountThatConfigJsonContradictsIsAnError) {
  const HfImport r = import_hf_gpt2(fixture("hub_gpt2_h4"), 4);
  EXPECT_EQ(r.weights.config.num_heads, 4);
  EXPECT_NE(r.summary.find("heads given, as config.json says"), std::string::npos) << r.summary;
  const std::string msg = error_of([] { import_hf_gpt2(fixture("hub_gpt2_h4"), 2); });
  EXPECT_MSG(msg, "the number of heads given (--n-head 2) contradicts " + fixture("hub_gpt2_h4") +
                      "/config.json: \"n_head\" is 4");
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// ---- export ------------------------------------------------------------------------------------------

std::vector<const float*> ptrs(const ModelWeights& w) {
  std::vector<const float*> p;
  for (const auto& u : w.units) p.push_back(u.data());
  return p;
}

TEST(HfExport, RoundTripGivesIdenticalWeights) {
  const std::string dir = scratch_dir();
  const HfImport a = import_hf_gpt2(fixture("model_fp32.safetensors"), 2);
  save_hf_gpt2(dir + "/a.safetensors", dir + "/config.json", Layout(a.weights.config), ptrs(a.weights));
  const HfImport b = import_hf_gpt2(dir + "/a.safetensors");  // n_head from the exported metadata
  EXPECT_TRUE(b.weights.config == a.weights.config);
  ASSERT_EQ(b.weights.units.size(), a.weights.units.size());
  for (size_t u = 0; u < a.weights.units.size(); u++) {
    ASSERT_EQ(b.weights.units[u].size(), a.weights.units[u].size());
    EXPECT_EQ(std::memcmp(b.weights.units[u].data(), a.weights.units[u].data(), a.weights.units[u].size() * 4), 0)
        << "unit " << u;
  }
  save_hf_gpt2(dir + "/b.safetensors", dir + "/config.json", Layout(b.weights.config), ptrs(b.weights));
  EXPECT_TRUE(read_file(dir + "/a.safetensors") == read_file(dir + "/b.safetensors")) << "export is deterministic";
}

TEST(HfExport, FileHoldsHuggingFacesTensors) {
  // Every tensor of the export must be the fixture's tensor of the same name (written by PyTorch in
  // Hugging Face's layout) byte for byte; the fixture's extra tensors are only the attention buffers.
  const std::string dir = scratch_dir(), out = dir + "/e.safetensors";
  const HfImport a = import_hf_gpt2(fixture("model_fp32.safetensors"), 2);
  save_hf_gpt2(out, dir + "/config.json", Layout(a.weights.config), ptrs(a.weights));
  SafetensorsReader got(out), ref(fixture("model_fp32.safetensors"));
  ASSERT_NE(got.find_metadata("format"), nullptr);
  EXPECT_EQ(*got.find_metadata("format"), "pt");
  EXPECT_EQ(*got.find_metadata("n_head"), "2");
  std::vector<std::string> names;
  for (const StTensor& t : got.tensors()) names.push_back(t.name);
  std::vector<std::string> want = {"wte.weight", "wpe.weight"};
  for (int l = 0; l < 2; l++)
    for (const char* n : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                          "mlp.c_proj.weight", "mlp.c_proj.bias"})
      want.push_back("h." + std::to_string(l) + "." + n);
  want.push_back("ln_f.weight");
  want.push_back("ln_f.bias");
  EXPECT_EQ(names, want);
  for (const StTensor& t : got.tensors()) {
    const StTensor* r = ref.find(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    EXPECT_EQ(t.dtype, StDType::F32) << t.name;
    EXPECT_EQ(t.shape, r->shape) << t.name;
    const std::vector<float> x = got.read_f32(t), y = ref.read_f32(*r);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0) << t.name;
  }
  EXPECT_EQ(got.find("wte.weight")->shape, (std::vector<int64_t>{100, 64})) << "the V real rows, not Vp";
}

// ---- bad files: a tiny GPT-2 written here by hand -------------------------------------------------------

const char* kHeads = "\"n_head\":\"2\"";

TEST(HfImport, HandWrittenFileLandsInOurLayout) {
  const std::string path = write_hand(scratch_dir() + "/ok.safetensors", hf_tensors(2, 8), kHeads);
  const HfImport r = import_hf_gpt2(path);
  const GPTConfig& c = r.weights.config;
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.channels, 8);
  EXPECT_EQ(c.max_seq_len, 4);
  EXPECT_EQ(c.vocab_size, 10);
  EXPECT_EQ(c.padded_vocab_size, 128);
  EXPECT_EQ(c.num_heads, 2);
  const Layout layout(c);
  // h.1.attn.c_attn.weight is tensor 2 + 12 + 2 = 16; HF element [i][o] = 16 + (i*24 + o)/1024 is our qkvw (o, i).
  const TensorSpec& qkvw = layout.unit(2).tensor("qkvw");
  EXPECT_EQ(qkvw.rows, 24);
  for (int o = 0; o < 24; o++)
    for (int i = 0; i < 8; i++)
      ASSERT_EQ(r.weights.units[2][qkvw.offset + o * 8 + i], 16.0f + (float)(i * 24 + o) / 1024.0f) << o << "," << i;
  // h.0.mlp.c_proj.weight (tensor 12) is [4C, C]: our fcprojw (C, 4C) element (o, i) is HF [i][o].
  const TensorSpec& fcprojw = layout.unit(1).tensor("fcprojw");
  EXPECT_EQ(r.weights.units[1][fcprojw.offset + 3 * 32 + 17], 12.0f + (float)(17 * 8 + 3) / 1024.0f);
  EXPECT_EQ(r.weights.units[0][9 * 8 + 7], 0.0f + (9 * 8 + 7) / 1024.0f);  // last real wte row
  EXPECT_EQ(r.weights.units[0][10 * 8], 0.0f);                              // first padded row
  ASSERT_EQ(r.weights.units.size(), 3u);  // the root (wte, wpe, ln_f) and the two blocks
  EXPECT_EQ(r.weights.units[0][layout.unit(0).tensor("lnfb").offset + 5], 27.0f + 5 / 1024.0f);
}

class BadHfFile : public ::testing::Test {
 protected:
  std::string error(const std::vector<HandTensor>& ts, const std::string& meta = kHeads, int heads = 0) {
    const std::string path = write_hand(scratch_dir() + "/bad.safetensors", ts, meta);
    const std::string msg = error_of([&] { import_hf_gpt2(path, heads); });
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  static std::vector<HandTensor> without(std::vector<HandTensor> ts, const std::string& name) {
    for (size_t i = 0; i < ts.size(); i++)
      if (ts[i].name == name) ts.erase(ts.begin() + i);
    return ts;
  }
  static HandTensor& at(std::vector<HandTensor>& ts, const std::string& name) {
    for (auto& t : ts)
      if (t.name == name) return t;
    throw Error("no " + name);
  }
};

TEST_F(BadHfFile, MissingTensor) {
  EXPECT_MSG(error(without(hf_tensors(2, 8), "h.1.mlp.c_fc.bias")), "missing tensor 'h.1.mlp.c_fc.bias' (layer 1 of 2");
  EXPECT_MSG(error(without(hf_tensors(2, 8), "wpe.weight")), "missing tensor 'wpe.weight'");
  std::vector<HandTensor> gap = hf_tensors(3, 8);
  for (int k = 0; k < 12; k++) gap.erase(gap.begin() + 2 + 12);  // drop layer 1 entirely: h.0 and h.2 remain
  EXPECT_MSG(error(gap), "missing tensor 'h.1.ln_1.weight'");
  std::vector<HandTensor> none = {{"wte.weight", "F32", {10, 8}}, {"wpe.weight", "F32", {4, 8}},
                                  {"ln_f.weight", "F32", {8}}, {"ln_f.bias", "F32", {8}}};
  EXPECT_MSG(error(none), "no transformer blocks");
}

TEST_F(BadHfFile, InconsistentLayers) {
  std::vector<HandTensor> ts = hf_tensors(2, 8);
  at(ts, "h.1.mlp.c_fc.weight").shape = {8, 16};
  at(ts, "h.1.mlp.c_fc.bias").shape = {16};
  EXPECT_MSG(error(ts), "tensor 'h.1.mlp.c_fc.weight' has shape [8, 16], expected [8, 32]");
  ts = hf_tensors(2, 8);
  at(ts, "h.0.attn.c_attn.weight").shape = {24, 8};  // stored (out, in): not Hugging Face's Conv1D layout
  EXPECT_MSG(error(ts), "tensor 'h.0.attn.c_attn.weight' has shape [24, 8], expected [8, 24] (a Conv1D weight");
  ts = hf_tensors(2, 8);
  at(ts, "wpe.weight").shape = {4, 6};
  EXPECT_MSG(error(ts), "tensor 'wpe.weight' has shape [4, 6], expected [maxT, 8]");
  ts = hf_tensors(2, 8);
  at(ts, "wte.weight").shape = {80};
  EXPECT_MSG(error(ts), "tensor 'wte.weight' has shape [80], expected [V, C]");
}

TEST_F(BadHfFile, UnexpectedOrDuplicatedTensor) {
  std::vector<HandTensor> ts = hf_tensors(1, 8);
  ts.push_back({"score.weight", "F32", {2, 8}});
  EXPECT_MSG(error(ts), "unexpected tensor 'score.weight'");
  ts = hf_tensors(1, 8);
  ts.push_back({"h.01.ln_1.weight", "F32", {8}});
  EXPECT_MSG(error(ts), "unexpected tensor 'h.01.ln_1.weight'");
  ts = hf_tensors(1, 8);
  ts.push_back({"transformer.wte.weight", "F32", {10, 8}});
  EXPECT_MSG(error(ts), "tensor 'wte.weight' appears twice (with and without the 'transformer.' prefix)");
}

TEST_F(BadHfFile, UntiedLmHead) {
  std::vector<HandTensor> ts = hf_tensors(1, 8);
  ts.push_back({"lm_head.weight", "F32", {10, 8}});  // tensor values differ from wte's (j differs)
  EXPECT_MSG(error(ts), "lm_head.weight differs from wte.weight at [0, 0]");
  ts.back().shape = {10, 4};
  EXPECT_MSG(error(ts), "tensor 'lm_head.weight' has shape [10, 4], expected [10, 8] (tied to wte.weight");
}

TEST_F(BadHfFile, NonFloatDtype) {
  std::vector<HandTensor> ts = hf_tensors(1, 8);
  at(ts, "ln_f.bias").dtype = "I64";
  EXPECT_MSG(error(ts), "tensor 'ln_f.bias' has dtype I64, expected F32, F16 or BF16");
}

TEST_F(BadHfFile, HeadsCannotBeInferred) {
  EXPECT_MSG(error(hf_tensors(1, 8), ""), "cannot infer the number of heads: C = 8 is not a multiple of 64");
  EXPECT_MSG(error(hf_tensors(1, 8), "\"n_head\":\"two\""), "__metadata__ n_head is 'two', expected a positive integer");
  EXPECT_MSG(error(hf_tensors(1, 8), "\"n_head\":\"0\""), "expected a positive integer");
  EXPECT_MSG(error(hf_tensors(1, 8), "\"n_head\":\"3\""), "not supported");  // 8 channels in 3 heads
  EXPECT_NO_THROW(import_hf_gpt2(write_hand(scratch_dir() + "/ok.safetensors", hf_tensors(1, 8), ""), 4));
}

TEST_F(BadHfFile, NotASafetensorsFile) {
  const std::string path = scratch_dir() + "/model.bin";
  const std::string junk(2048, 'x');  // header length 0x7878787878787878
  write_file_atomic(path, junk.data(), junk.size());
  EXPECT_MSG(error_of([&] { import_hf_gpt2(path); }), path + ": header length");
}

}  // namespace
}  // namespace gpt::test
