// Hugging Face GPT-2 folders (io/hf_config.h, io/hf_index.h): config.json checked against the tensors, and
// sharded checkpoints (model-0000k-of-0000n.safetensors + model.safetensors.index.json) checked across their
// files. Every bad folder is a good one with one edit, and must give one line naming the file and the field
// or tensor. The good folders' losses are tested against PyTorch in test_hf_gpt2.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/hf_config.h"
#include "src/io/hf_gpt2.h"
#include "src/io/json_min.h"
#include "tests/common/error_of.h"
#include "tests/common/hf_hand_files.h"
#include "tests/common/test_paths.h"

namespace gpt::test {
namespace {

#define EXPECT_MSG(msg, needle) EXPECT_NE((msg).find(needle), std::string::npos) << (msg)

void write_text(const std::string& path, const std::string& text) { write_file_atomic(path, text.data(), text.size()); }

// ---- config.json --------------------------------------------------------------------------------------

// config.json for hf_tensors(2, 8) (L 2, C 8, maxT 4, V 10) in 2 heads, with fields replaced, added, or removed
// (value "").
std::string config_json(const std::vector<std::pair<std::string, std::string>>& edits = {}) {
  std::vector<std::pair<std::string, std::string>> f = {{"model_type", "\"gpt2\""}, {"n_layer", "2"}, {"n_head", "2"},
                                                        {"n_embd", "8"},   {"n_positions", "4"},  {"vocab_size", "10"}};
  for (const auto& [key, value] : edits) {
    bool found = false;
    for (auto& g : f)
      if (g.first == key) g.second = value, found = true;
    if (!found) f.push_back({key, value});
  }
  std::string s = "{";
  for (const auto& [key, value] : f)
    if (!value.empty()) s += (s.size() > 1 ? ", \"" : "\"") + key + "\": " + value;
  return s + "}";
}

class HfConfigJson : public ::testing::Test {
 protected:
  // A folder with model.safetensors (no n_head in its metadata) and this config.json; returns the folder.
  std::string folder(const std::string& config) {
    const std::string dir = scratch_dir();
    write_hand(dir + "/model.safetensors", hf_tensors(2, 8), "");
    write_text(dir + "/config.json", config);
    return dir;
  }
  // The one-line error importing the folder, which must start with the config.json's path.
  std::string error(const std::string& config, int heads = 0) {
    const std::string dir = folder(config);
    const std::string msg = error_of([&] { import_hf_gpt2(dir, heads); });
    EXPECT_EQ(msg.rfind(dir + "/config.json: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
};

TEST_F(HfConfigJson, AGoodConfigGivesTheHeads) {
  const HfImport r = import_hf_gpt2(folder(config_json()));
  EXPECT_EQ(r.weights.config.num_heads, 2);  // C/64 could not give any: C = 8
  EXPECT_NE(r.summary.find("heads from config.json, config.json agrees"), std::string::npos) << r.summary;
  // The fields the model honours are accepted in each spelling GPT2Config allows.
  for (const auto& edit : std::vector<std::pair<std::string, std::string>>{
           {"n_ctx", "4"}, {"n_inner", "null"}, {"n_inner", "32"}, {"activation_function", "\"gelu_new\""},
           {"activation_function", "\"gelu_pytorch_tanh\""}, {"layer_norm_epsilon", "1e-05"},
           {"layer_norm_epsilon", "0.00001"}, {"tie_word_embeddings", "true"}, {"scale_attn_weights", "true"},
           {"attn_pdrop", "0.1"}, {"architectures", "[\"GPT2LMHeadModel\"]"}, {"bos_token_id", "50256"}})
    EXPECT_NO_THROW(import_hf_gpt2(folder(config_json({edit})))) << edit.first << " " << edit.second;
  // A --n-head that agrees is taken.
  EXPECT_EQ(import_hf_gpt2(folder(config_json()), 2).weights.config.num_heads, 2);
}

TEST_F(HfConfigJson, EachSizeThatContradictsTheTensorsIsAnError) {
  EXPECT_MSG(error(config_json({{"n_layer", "3"}})), "\"n_layer\" is 3, but the tensors say 2 (blocks h.0 ... h.1)");
  EXPECT_MSG(error(config_json({{"n_embd", "16"}})), "\"n_embd\" is 16, but the tensors say 8 (the columns of wte.weight)");
  EXPECT_MSG(error(config_json({{"n_positions", "1024"}})), "\"n_positions\" is 1024, but the tensors say 4 (the rows of wpe");
  EXPECT_MSG(error(config_json({{"vocab_size", "50257"}})), "\"vocab_size\" is 50257, but the tensors say 10 (the rows of wte");
  EXPECT_MSG(error(config_json({{"n_ctx", "8"}})), "\"n_ctx\" is 8, but the tensors say 4 (the rows of wpe.weight)");
  EXPECT_MSG(error(config_json({{"n_head", "3"}})), "\"n_head\" is 3, which does not divide the tensors' 8 channels");
  EXPECT_MSG(error(config_json({{"n_inner", "16"}})), "\"n_inner\" is 16, but our MLP is 4 * n_embd = 32 wide");
  // An absent size is GPT2Config's default, as from_pretrained would take it.
  EXPECT_MSG(error(config_json({{"n_embd", ""}})), "\"n_embd\" is absent, so GPT2Config's default 768, but the tensors say 8");
  EXPECT_MSG(error(config_json({{"n_head", ""}})), "\"n_head\" is absent, so GPT2Config's default 12, which does not divide");
}

TEST_F(HfConfigJson, FieldsTheModelCannotHonourAreRefused) {
  EXPECT_MSG(error(config_json({{"model_type", "\"llama\""}})), "\"model_type\" is \"llama\", expected \"gpt2\"");
  EXPECT_MSG(error(config_json({{"activation_function", "\"gelu\""}})),
             "\"activation_function\" is \"gelu\", expected \"gelu_new\" or \"gelu_pytorch_tanh\" (our MLP computes the tanh GELU)");
  EXPECT_MSG(error(config_json({{"layer_norm_epsilon", "1e-6"}})), "\"layer_norm_epsilon\" is 1e-6, but our LayerNorm uses 1e-5");
  EXPECT_MSG(error(config_json({{"tie_word_embeddings", "false"}})),
             "\"tie_word_embeddings\" is false, but our output layer is tied to the token embedding");
  EXPECT_MSG(error(config_json({{"scale_attn_weights", "false"}})), "\"scale_attn_weights\" is false, but");
  EXPECT_MSG(error(config_json({{"scale_attn_by_inverse_layer_idx", "true"}})),
             "\"scale_attn_by_inverse_layer_idx\" is true, but our attention does not scale by layer");
  EXPECT_MSG(error(config_json({{"add_cross_attention", "true"}})), "\"add_cross_attention\" is true, but");
}

TEST_F(HfConfigJson, ACorruptConfigIsAnError) {
  EXPECT_MSG(error("{\"n_layer\": 2,"), "byte ");
  EXPECT_MSG(error(""), "byte 0");
  EXPECT_MSG(error("[2, 2, 8]"), "the file is an array, expected a JSON object (transformers' GPT2Config)");
  EXPECT_MSG(error(config_json({{"n_head", "\"2\""}})), "\"n_head\" is the string \"2\", expected a positive integer");
  EXPECT_MSG(error(config_json({{"n_layer", "2.0"}})), "\"n_layer\" is 2.0, expected a positive integer");
  EXPECT_MSG(error(config_json({{"n_layer", "-2"}})), "\"n_layer\" is -2, expected a positive integer");
  EXPECT_MSG(error(config_json({{"n_head", "0"}})), "\"n_head\" is 0, expected a positive integer");
  EXPECT_MSG(error(config_json({{"n_positions", "99999999999"}})), "\"n_positions\" is 99999999999, expected a positive");
  EXPECT_MSG(error(config_json({{"tie_word_embeddings", "\"yes\""}})), "\"tie_word_embeddings\" is the string \"yes\", expected true");
  EXPECT_MSG(error(config_json({{"layer_norm_epsilon", "\"1e-5\""}})), "\"layer_norm_epsilon\" is the string \"1e-5\", expected a number");
  EXPECT_MSG(error(config_json({{"model_type", "2"}})), "\"model_type\" is 2, expected a string");
  EXPECT_MSG(error("{\"n_head\": 2, \"n_head\": 4}"), "key \"n_head\" appears twice");
}

TEST_F(HfConfigJson, ANHeadThatContradictsConfigJsonIsAnError) {
  const std::string dir = folder(config_json());
  const std::string msg = error_of([&] { import_hf_gpt2(dir, 4); });
  EXPECT_MSG(msg, "the number of heads given (--n-head 4) contradicts " + dir + "/config.json: \"n_head\" is 2");
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(HfConfigExport, ConfigJsonDescribesTheModel) {
  // Read back with the JSON reader: the fields GPT2Config needs, for a GPT-2-vocabulary model and another.
  GPTConfig c;
  c.num_layers = 3, c.num_heads = 4, c.channels = 64, c.max_seq_len = 48, c.vocab_size = 50257;
  c.finalize();
  const JsonValue j = parse_json(hf_config_json(c), "config.json");
  std::map<std::string, std::string> got;
  for (const auto& [key, v] : j.members) got[key] = v.kind == JsonValue::Kind::boolean ? (v.boolean ? "true" : "false") : v.text;
  EXPECT_EQ(got["model_type"], "gpt2");
  EXPECT_EQ(got["n_layer"], "3");
  EXPECT_EQ(got["n_head"], "4");
  EXPECT_EQ(got["n_embd"], "64");
  EXPECT_EQ(got["n_positions"], "48");
  EXPECT_EQ(got["n_ctx"], "48");
  EXPECT_EQ(got["vocab_size"], "50257");  // V, not the padded 50304: export writes V rows of wte
  EXPECT_EQ(got["activation_function"], "gelu_new");
  EXPECT_EQ(got["tie_word_embeddings"], "true");
  EXPECT_EQ(got["bos_token_id"], "50256");
  EXPECT_EQ(got["eos_token_id"], "50256");
  EXPECT_EQ(std::stod(got["layer_norm_epsilon"]), 1e-5);
  for (const auto& m : j.members) {
    if (m.first == "architectures") {
      EXPECT_EQ(m.second.items.at(0).text, "GPT2LMHeadModel");
    }
  }
  c.vocab_size = 1000;
  c.finalize();
  const JsonValue k = parse_json(hf_config_json(c), "config.json");
  for (const auto& m : k.members) {
    if (m.first == "eos_token_id") {
      EXPECT_EQ(m.second.kind, JsonValue::Kind::null) << "no known <|endoftext|>";
    }
  }
}

// ---- sharded checkpoints ------------------------------------------------------------------------------

std::string shard_name(int k, int n) {
  char b[64];
  std::snprintf(b, sizeof b, "model-%05d-of-%05d.safetensors", k + 1, n);
  return b;
}

// hf_tensors(2, 8) cut in two (wte ... h.0.* in the first shard, the rest in the second), the weight_map
// naming each tensor's shard, and config.json for 2 heads.
struct Shards {
  std::string dir = scratch_dir();
  std::vector<std::vector<HandTensor>> parts;
  std::map<std::string, std::string> weight_map;
  std::string metadata = "{\"total_size\": 12345}";
  std::vector<std::string> shard_meta = {"\"format\":\"pt\"", "\"format\":\"pt\""};  // each shard's __metadata__
  bool config = true;                                                              // write config.json
  Shards() {
    const std::vector<HandTensor> all = hf_tensors(2, 8);
    parts.resize(2);
    for (size_t i = 0; i < all.size(); i++) parts[i < 14 ? 0 : 1].push_back(all[i]);
    for (int k = 0; k < 2; k++)
      for (const HandTensor& t : parts[k]) weight_map[t.name] = shard_name(k, 2);
  }
  std::string index() const { return dir + "/model.safetensors.index.json"; }
  std::string write() const {
    for (size_t k = 0; k < parts.size(); k++) write_hand(dir + "/" + shard_name((int)k, 2), parts[k], shard_meta[k]);
    std::string map;
    for (const auto& [name, file] : weight_map) map += (map.empty() ? "\"" : ", \"") + name + "\": \"" + file + "\"";
    write_text(index(), "{\"metadata\": " + metadata + ", \"weight_map\": {" + map + "}}");
    if (config) write_text(dir + "/config.json", config_json());
    return dir;
  }
  // The one-line error importing the folder; it must start with `file` (the index, or a shard).
  std::string error(const std::string& file) const {
    write();
    const std::string msg = error_of([&] { import_hf_gpt2(dir); });
    EXPECT_EQ(msg.rfind(file + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
};

TEST(HfShards, AGoodShardedFolderImports) {
  Shards s;
  const HfImport r = import_hf_gpt2(s.write());
  EXPECT_EQ(r.weights.config.num_layers, 2);
  EXPECT_EQ(r.weights.config.num_heads, 2);
  EXPECT_NE(r.summary.find("F32 weights in 2 shards"), std::string::npos) << r.summary;
  EXPECT_NO_THROW(import_hf_gpt2(s.index()));                    // the index itself
  EXPECT_NO_THROW(import_hf_gpt2(s.dir + "/config.json"));       // a config.json stands for its folder
}

TEST(HfShards, AMissingShardIsAnError) {
  Shards s;
  s.write();
  std::filesystem::remove(s.dir + "/" + shard_name(1, 2));
  const std::string msg = error_of([&] { import_hf_gpt2(s.dir); });
  EXPECT_EQ(msg, s.index() + ": shard " + s.dir + "/" + shard_name(1, 2) + " is missing (the weight_map puts 14 tensors in it)");
}

TEST(HfShards, ATensorInTwoShardsIsAnError) {
  Shards s;
  s.parts[1].push_back(s.parts[0][3]);  // h.0.ln_1.bias in both
  EXPECT_MSG(s.error(s.index()), "tensor 'h.0.ln_1.bias' is in two shards, " + s.dir + "/" + shard_name(0, 2) + " and " +
                                     s.dir + "/" + shard_name(1, 2) + " (shards must not overlap)");
}

TEST(HfShards, AWeightMapThatDisagreesWithTheShardsIsAnError) {
  Shards s;
  s.weight_map["ln_f.bias"] = shard_name(0, 2);  // it is in the second shard
  EXPECT_MSG(s.error(s.index()), "the weight_map puts tensor 'ln_f.bias' in " + shard_name(0, 2) + ", but it is in " +
                                     s.dir + "/" + shard_name(1, 2));
  Shards t;
  t.weight_map["h.1.attn.bias"] = shard_name(1, 2);  // named, but in no shard
  EXPECT_MSG(t.error(t.index()), "tensor 'h.1.attn.bias' is not in " + t.dir + "/" + shard_name(1, 2) +
                                     ", the shard the weight_map names for it");
  Shards u;
  u.parts[1].push_back({"h.1.attn.masked_bias", "F32", {}});  // in a shard, not in the weight_map
  EXPECT_MSG(u.error(u.dir + "/" + shard_name(1, 2)), "tensor 'h.1.attn.masked_bias' is not in the weight_map of " + u.index());
}

TEST(HfShards, TheGpt2TensorsMustAllBeThere) {
  Shards s;
  s.parts[1].pop_back();  // ln_f.bias, from its shard and the weight_map
  s.weight_map.erase("ln_f.bias");
  EXPECT_MSG(s.error(s.dir), "missing tensor 'ln_f.bias' (a Hugging Face GPT-2 model has it)");
  Shards t;
  t.parts[1][0].shape = {16};  // h.1.ln_1.weight
  EXPECT_MSG(t.error(t.dir + "/" + shard_name(1, 2)), "tensor 'h.1.ln_1.weight' has shape [16], expected [8]");
}

TEST(HfShards, WithoutConfigJsonTheShardsMetadataMustAgreeOnTheHeads) {
  Shards s;
  s.config = false;
  s.shard_meta = {"\"n_head\":\"2\"", "\"format\":\"pt\""};
  const HfImport r = import_hf_gpt2(s.write());
  EXPECT_EQ(r.weights.config.num_heads, 2);
  EXPECT_NE(r.summary.find("heads from __metadata__ n_head, no config.json"), std::string::npos) << r.summary;
  s.shard_meta[1] = "\"n_head\":\"4\"";
  EXPECT_EQ(s.error(s.dir + "/" + shard_name(1, 2)), s.dir + "/" + shard_name(1, 2) + ": __metadata__ n_head is 4, but " +
                                                         s.dir + "/" + shard_name(0, 2) + " __metadata__ n_head says 2");
}

TEST(HfShards, ACorruptIndexIsAnError) {
  const auto index_error = [](const std::string& text) {
    Shards s;
    s.write();
    write_text(s.index(), text);
    const std::string msg = error_of([&] { import_hf_gpt2(s.dir); });
    EXPECT_EQ(msg.rfind(s.index() + ": ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  };
  EXPECT_MSG(index_error("{\"weight_map\": {"), "byte ");
  EXPECT_MSG(index_error("[]"), "the index is an array, expected");
  EXPECT_MSG(index_error("{\"metadata\": {}}"), "no \"weight_map\"");
  EXPECT_MSG(index_error("{\"weight_map\": {}}"), "\"weight_map\" is empty");
  EXPECT_MSG(index_error("{\"weight_map\": []}"), "\"weight_map\" is an array");
  EXPECT_MSG(index_error("{\"weight_map\": {\"wte.weight\": 1}}"), "weight_map \"wte.weight\" is a number, expected a shard file name");
  EXPECT_MSG(index_error("{\"weight_map\": {\"wte.weight\": \"../x.safetensors\"}}"),
             "weight_map \"wte.weight\" names '../x.safetensors', expected a file name in the index's folder");
  EXPECT_MSG(index_error("{\"weight_map\": {\"wte.weight\": \"a\", \"wte.weight\": \"b\"}}"),
             "tensor 'wte.weight' appears twice in the weight_map");
  EXPECT_MSG(index_error("{\"metadata\": {\"total_size\": \"big\"}, \"weight_map\": {\"wte.weight\": \"a\"}}"),
             "metadata \"total_size\" is a string, expected a non-negative integer");
}

TEST(HfShards, AFolderWithoutWeightsIsAnError) {
  const std::string dir = scratch_dir();
  write_text(dir + "/config.json", config_json());
  EXPECT_EQ(error_of([&] { import_hf_gpt2(dir); }),
            dir + ": a folder with neither model.safetensors nor model.safetensors.index.json (a Hugging Face GPT-2 "
                  "folder holds one of them)");
}

}  // namespace
}  // namespace gpt::test
