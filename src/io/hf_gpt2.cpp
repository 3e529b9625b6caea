// Hugging Face GPT-2 safetensors <-> our per-unit buffers (names, layout and rules in hf_gpt2.h).
// Both directions walk one table that pairs each Hugging Face block tensor with our layout's tensor; the
// expected Hugging Face shape is derived from our layout's (rows, cols), so the two cannot drift apart.
// Import checks every name, shape and dtype before reading any tensor data.
#include "src/io/hf_gpt2.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "src/core/check.h"
#include "src/io/safetensors.h"

namespace gpt {

namespace {

constexpr const char* kPrefix = "transformer.";
constexpr int kHeadSize = 64;  // every GPT-2 size (124M ... 1.5B) has 64 channels per head

struct BlockTensor {
  const char* hf;    // name after "h.<i>."
  const char* ours;  // layout tensor of the block unit
  bool conv1d;       // stored [in, out] = our (cols, rows): transposed on the way in and out
};
constexpr BlockTensor kBlock[] = {
    {"ln_1.weight", "ln1w", false},       {"ln_1.bias", "ln1b", false},
    {"attn.c_attn.weight", "qkvw", true}, {"attn.c_attn.bias", "qkvb", false},
    {"attn.c_proj.weight", "attprojw", true}, {"attn.c_proj.bias", "attprojb", false},
    {"ln_2.weight", "ln2w", false},       {"ln_2.bias", "ln2b", false},
    {"mlp.c_fc.weight", "fcw", true},     {"mlp.c_fc.bias", "fcb", false},
    {"mlp.c_proj.weight", "fcprojw", true}, {"mlp.c_proj.bias", "fcprojb", false}};
constexpr int kBlockTensors = sizeof(kBlock) / sizeof(kBlock[0]);
constexpr const char* kSkipped[] = {"attn.bias", "attn.masked_bias"};  // causal-mask buffers, not weights

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The Hugging Face shape of one of our layout tensors.
std::vector<int64_t> hf_shape(const TensorSpec& t, bool conv1d) {
  if (conv1d) return {t.cols, t.rows};
  return {t.numel};
}

// "h.<i>.<rest>" -> i and rest; false for any other name. i is decimal without leading zeros.
bool parse_block_name(const std::string& name, int* layer, std::string* rest) {
  if (name.compare(0, 2, "h.") != 0) return false;
  size_t i = 2, v = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i < 2 + 6) v = v * 10 + (size_t)(name[i++] - '0');
  if (i == 2 || i >= name.size() || name[i] != '.' || (name[2] == '0' && i > 3)) return false;
  *layer = (int)v;
  *rest = name.substr(i + 1);
  return true;
}

// src (rows, cols) row-major -> dst (cols, rows) row-major, in 32 x 32 tiles so that both sides stay in
// cache (GPT-2 1.5B's matrices are 6400 x 1600).
void transpose(const float* src, float* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) dst[c * rows + r] = src[r * cols + c];
    }
}

int heads_from_metadata(const std::string& value, const char* key, const std::string& path) {
  bool ok = !value.empty() && value.size() <= 6 && value[0] != '0';
  for (char c : value) ok = ok && c >= '0' && c <= '9';
  GPT_CHECK(ok, path, ": __metadata__ ", key, " is '", value, "', expected a positive integer (or pass the number of "
            "heads: gpt import --n-head)");
  return std::stoi(value);
}

}  // namespace

HfImport import_hf_gpt2(const std::string& path, int num_heads) {
  SafetensorsReader file(path);

  // --- names: strip the prefix, sort into top-level and per-layer tensors ------------------------------
  std::map<std::string, const StTensor*> top;             // wte.weight, wpe.weight, ln_f.*, lm_head.weight
  std::map<int, std::vector<const StTensor*>> layers;    // layer -> kBlock order
  int skipped = 0, prefixed = 0;
  std::set<std::string> seen;
  for (const StTensor& t : file.tensors()) {
    std::string name = t.name;
    if (name.compare(0, std::strlen(kPrefix), kPrefix) == 0) {
      name = name.substr(std::strlen(kPrefix));
      prefixed++;
    }
    GPT_CHECK(seen.insert(name).second, path, ": tensor '", name,
              "' appears twice (with and without the 'transformer.' prefix)");
    if (name == "wte.weight" || name == "wpe.weight" || name == "ln_f.weight" || name == "ln_f.bias" ||
        name == "lm_head.weight") {
      top[name] = &t;
      continue;
    }
    int layer;
    std::string rest;
    bool known = false;
    if (parse_block_name(name, &layer, &rest)) {
      for (const char* s : kSkipped)
        if (rest == s) known = true;
      if (known) {
        skipped++;
        continue;
      }
      for (int k = 0; k < kBlockTensors; k++) {
        if (rest != kBlock[k].hf) continue;
        auto& slots = layers[layer];
        slots.resize(kBlockTensors, nullptr);
        slots[k] = &t;
        known = true;
      }
    }
    GPT_CHECK(known, path, ": unexpected tensor '", t.name, "': not part of Hugging Face's GPT-2 layout (wte, wpe, "
              "h.<i>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_f, lm_head)");
  }
  for (const char* n : {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"})
    GPT_CHECK(top.count(n), path, ": missing tensor '", n, "' (a Hugging Face GPT-2 model has it)");
  GPT_CHECK(!layers.empty(), path, ": no transformer blocks (tensors h.0.*) in the file");
  const int L = layers.rbegin()->first + 1;
  for (int l = 0; l < L; l++) {
    auto it = layers.find(l);
    for (int k = 0; k < kBlockTensors; k++)
      GPT_CHECK(it != layers.end() && it->second[k], path, ": missing tensor 'h.", l, ".", kBlock[k].hf,
                "' (layer ", l, " of ", L, ", the highest layer in the file being h.", L - 1, ")");
  }

  // --- the shape, from wte and wpe ------------------------------------------------------------------------
  const StTensor& wte = *top["wte.weight"];
  const StTensor& wpe = *top["wpe.weight"];
  GPT_CHECK(wte.shape.size() == 2 && wte.shape[0] > 0 && wte.shape[1] > 0, path, ": tensor 'wte.weight' has shape ",
            shape_str(wte.shape), ", expected [V, C] (vocabulary, channels)");
  GPT_CHECK(wpe.shape.size() == 2 && wpe.shape[0] > 0 && wpe.shape[1] == wte.shape[1], path,
            ": tensor 'wpe.weight' has shape ", shape_str(wpe.shape), ", expected [maxT, ", wte.shape[1],
            "] (C = ", wte.shape[1], " from wte.weight)");
  GPT_CHECK(wte.shape[0] <= INT32_MAX && wte.shape[1] <= INT32_MAX && wpe.shape[0] <= INT32_MAX, path,
            ": dimensions of wte.weight ", shape_str(wte.shape), " / wpe.weight ", shape_str(wpe.shape), " are too large");
  const int C = (int)wte.shape[1];
  std::string heads_note;
  if (num_heads > 0) {
    heads_note = "heads given";
  } else if (const std::string* v = file.find_metadata("n_head")) {
    num_heads = heads_from_metadata(*v, "n_head", path);
    heads_note = "heads from __metadata__ n_head";
  } else if (const std::string* v = file.find_metadata("num_attention_heads")) {
    num_heads = heads_from_metadata(*v, "num_attention_heads", path);
    heads_note = "heads from __metadata__ num_attention_heads";
  } else {
    GPT_CHECK(C % kHeadSize == 0, path, ": cannot infer the number of heads: C = ", C,
              " is not a multiple of 64 (GPT-2's head size) and the file's __metadata__ has no n_head; pass --n-head");
    num_heads = C / kHeadSize;
    heads_note = "heads = C/64";
  }
  HfImport r;
  GPTConfig& cfg = r.weights.config;
  cfg.vocab_size = (int)wte.shape[0];
  cfg.channels = C;
  cfg.max_seq_len = (int)wpe.shape[0];
  cfg.num_layers = L;
  cfg.num_heads = num_heads;
  try {
    cfg.finalize();
  } catch (const Error& e) {
    fail(path, ": the model's shape is not supported (", e.what(), ")");
  }
  const Layout layout(cfg);

  // --- every tensor's shape and dtype, before reading data ---------------------------------------------
  std::set<std::string> dtypes;
  auto check = [&](const StTensor& t, const std::vector<int64_t>& want, const char* why) {
    GPT_CHECK(t.shape == want, path, ": tensor '", t.name, "' has shape ", shape_str(t.shape), ", expected ",
              shape_str(want), " (", why, "; ", cfg.describe(), ")");
    GPT_CHECK(t.dtype == StDType::F32 || t.dtype == StDType::F16 || t.dtype == StDType::BF16, path, ": tensor '",
              t.name, "' has dtype ", st_dtype_name(t.dtype), ", expected F32, F16 or BF16");
    dtypes.insert(st_dtype_name(t.dtype));
  };
  check(wte, wte.shape, "[V, C]");
  check(wpe, wpe.shape, "[maxT, C]");
  check(*top["ln_f.weight"], {C}, "C from wte.weight");
  check(*top["ln_f.bias"], {C}, "C from wte.weight");
  const StTensor* lm_head = top.count("lm_head.weight") ? top["lm_head.weight"] : nullptr;
  if (lm_head) check(*lm_head, wte.shape, "tied to wte.weight");
  const UnitSpec& block0 = layout.unit(layout.block_unit(0));
  for (int l = 0; l < L; l++)
    for (int k = 0; k < kBlockTensors; k++)
      check(*layers[l][k], hf_shape(block0.tensor(kBlock[k].ours), kBlock[k].conv1d),
            kBlock[k].conv1d ? "a Conv1D weight [in, out], C from wte.weight" : "C from wte.weight");

  // --- the data -------------------------------------------------------------------------------------------
  auto& units = r.weights.units;
  units.resize(layout.num_units());
  for (int u = 0; u < layout.num_units(); u++) units[u].assign((size_t)layout.unit(u).numel, 0.0f);
  const UnitSpec& embed = layout.unit(layout.embed_unit());
  std::vector<float> v = file.read_f32(wte);  // (V, C); rows V..Vp-1 of our wte stay zero
  std::memcpy(units[0].data() + embed.tensor("wte").offset, v.data(), v.size() * sizeof(float));
  if (lm_head) {
    const std::vector<float> head = file.read_f32(*lm_head);  // (V, C)
    for (size_t i = 0; i < v.size(); i++)
      GPT_CHECK(std::memcmp(&head[i], &v[i], sizeof(float)) == 0, path, ": lm_head.weight differs from wte.weight at [",
                i / C, ", ", i % C, "] (", head[i], " vs ", v[i], "): our model ties the output layer to the token "
                "embedding, so an untied lm_head cannot be imported");
  }
  v = file.read_f32(wpe);
  std::memcpy(units[0].data() + embed.tensor("wpe").offset, v.data(), v.size() * sizeof(float));
  for (int l = 0; l < L; l++) {
    const UnitSpec& unit = layout.unit(layout.block_unit(l));
    float* dst = units[layout.block_unit(l)].data();
    for (int k = 0; k < kBlockTensors; k++) {
      const TensorSpec& t = unit.tensor(kBlock[k].ours);
      v = file.read_f32(*layers[l][k]);
      if (kBlock[k].conv1d) {
        transpose(v.data(), dst + t.offset, t.cols, t.rows);  // hf (in, out) -> ours (out, in)
      } else {
        std::memcpy(dst + t.offset, v.data(), v.size() * sizeof(float));
      }
    }
  }
  const UnitSpec& head = layout.unit(layout.head_unit());
  for (const auto& [hf, ours] : {std::pair<const char*, const char*>{"ln_f.weight", "lnfw"}, {"ln_f.bias", "lnfb"}}) {
    v = file.read_f32(*top[hf]);
    std::memcpy(units[layout.head_unit()].data() + head.tensor(ours).offset, v.data(), v.size() * sizeof(float));
  }

  std::string dt;
  for (const std::string& d : dtypes) dt += (dt.empty() ? "" : "+") + d;
  r.summary = str(dt, " weights, ", heads_note, prefixed ? ", 'transformer.' prefix" : "",
                  lm_head ? ", lm_head.weight tied to wte" : "",
                  skipped ? str(", skipped ", skipped, " attention mask buffers") : std::string(),
                  cfg.padded_vocab_size != cfg.vocab_size ? str(", vocabulary padded to ", cfg.padded_vocab_size) : "");
  return r;
}

void save_hf_gpt2(const std::string& path, const Layout& layout, const std::vector<const float*>& units) {
  GPT_CHECK((int)units.size() == layout.num_units(), path, ": save_hf_gpt2 got ", units.size(),
            " unit buffers, the layout has ", layout.num_units());
  const GPTConfig& cfg = layout.config();
  const int64_t C = cfg.channels;
  const UnitSpec& embed = layout.unit(layout.embed_unit());
  const UnitSpec& head = layout.unit(layout.head_unit());

  // Declare every tensor with its data source, in Hugging Face's order: wte, wpe, h.0 ... h.{L-1}, ln_f.
  struct Out {
    StTensorDecl decl;
    const float* src;
    const TensorSpec* conv1d;  // non-null: transpose this (rows, cols) matrix on the way out
  };
  std::vector<Out> outs;
  outs.push_back({{"wte.weight", {cfg.vocab_size, C}}, units[0] + embed.tensor("wte").offset, nullptr});
  outs.push_back({{"wpe.weight", {cfg.max_seq_len, C}}, units[0] + embed.tensor("wpe").offset, nullptr});
  for (int l = 0; l < cfg.num_layers; l++) {
    const UnitSpec& unit = layout.unit(layout.block_unit(l));
    for (const BlockTensor& b : kBlock) {
      const TensorSpec& t = unit.tensor(b.ours);
      outs.push_back({{str("h.", l, ".", b.hf), hf_shape(t, b.conv1d)}, units[layout.block_unit(l)] + t.offset,
                      b.conv1d ? &t : nullptr});
    }
  }
  outs.push_back({{"ln_f.weight", {C}}, units[layout.head_unit()] + head.tensor("lnfw").offset, nullptr});
  outs.push_back({{"ln_f.bias", {C}}, units[layout.head_unit()] + head.tensor("lnfb").offset, nullptr});

  std::vector<StTensorDecl> decls;
  for (const Out& o : outs) decls.push_back(o.decl);
  SafetensorsWriter w(path, decls, {{"format", "pt"}, {"n_head", std::to_string(cfg.num_heads)}});
  std::vector<float> buf;  // (cols, rows) of the matrix being transposed
  for (const Out& o : outs) {
    if (!o.conv1d) {
      w.write_next(o.src);
      continue;
    }
    buf.resize((size_t)o.conv1d->numel);
    transpose(o.src, buf.data(), o.conv1d->rows, o.conv1d->cols);
    w.write_next(buf.data());
  }
  w.commit();
}

}  // namespace gpt
