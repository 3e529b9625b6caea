// Hugging Face GPT-2 safetensors <-> our per-unit buffers (names, layout and rules in hf_gpt2.h).
// Both directions walk one table that pairs each Hugging Face block tensor with our layout's tensor; the
// expected Hugging Face shape is derived from our layout's (rows, cols), so the two cannot drift apart.
// Import checks every name, shape and dtype, and config.json against them, before reading any tensor data.
// The files (one, or the shards of an index) come from io/hf_index.h, config.json's rules from io/hf_config.h.
#include "src/io/hf_gpt2.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/hf_config.h"
#include "src/io/hf_index.h"
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

// The file's tensors sorted by role, every name known and none missing.
struct HfNames {
  std::map<std::string, const HfTensorRef*> top;           // wte.weight, wpe.weight, ln_f.*, lm_head.weight
  std::map<int, std::vector<const HfTensorRef*>> layers;  // layer -> kBlock order
  int skipped = 0, prefixed = 0;
  int num_layers() const { return layers.rbegin()->first + 1; }
};

HfNames sort_names(const HfSource& src) {
  const std::string& path = src.path;
  HfNames n;
  std::set<std::string> seen;
  for (const HfTensorRef& ref : src.tensors) {
    const StTensor& t = *ref.tensor;
    std::string name = t.name;
    if (name.compare(0, std::strlen(kPrefix), kPrefix) == 0) {
      name = name.substr(std::strlen(kPrefix));
      n.prefixed++;
    }
    GPT_CHECK(seen.insert(name).second, path, ": tensor '", name,
              "' appears twice (with and without the 'transformer.' prefix)");
    if (name == "wte.weight" || name == "wpe.weight" || name == "ln_f.weight" || name == "ln_f.bias" ||
        name == "lm_head.weight") {
      n.top[name] = &ref;
      continue;
    }
    int layer;
    std::string rest;
    bool known = false;
    if (parse_block_name(name, &layer, &rest)) {
      for (const char* s : kSkipped) known |= rest == s;
      if (known) {
        n.skipped++;
        continue;
      }
      for (int k = 0; k < kBlockTensors; k++) {
        if (rest != kBlock[k].hf) continue;
        auto& slots = n.layers[layer];
        slots.resize(kBlockTensors, nullptr);
        slots[k] = &ref;
        known = true;
      }
    }
    GPT_CHECK(known, ref.file->path(), ": unexpected tensor '", t.name, "': not part of Hugging Face's GPT-2 layout (wte, wpe, "
              "h.<i>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_f, lm_head)");
  }
  for (const char* name : {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"})
    GPT_CHECK(n.top.count(name), path, ": missing tensor '", name, "' (a Hugging Face GPT-2 model has it)");
  GPT_CHECK(!n.layers.empty(), path, ": no transformer blocks (tensors h.0.*) in the file");
  const int L = n.num_layers();
  for (int l = 0; l < L; l++) {
    auto it = n.layers.find(l);
    for (int k = 0; k < kBlockTensors; k++)
      GPT_CHECK(it != n.layers.end() && it->second[k], path, ": missing tensor 'h.", l, ".", kBlock[k].hf,
                "' (layer ", l, " of ", L, ", the highest layer in the file being h.", L - 1, ")");
  }
  return n;
}

// __metadata__ n_head (or num_attention_heads) of the files; shards that state it must agree. 0 if none does.
int heads_in_metadata(const HfSource& src, std::string* note) {
  int heads = 0;
  std::string from;
  for (const auto& file : src.files)
    for (const char* key : {"n_head", "num_attention_heads"}) {
      const std::string* v = file->find_metadata(key);
      if (!v) continue;
      const int h = heads_from_metadata(*v, key, file->path());
      GPT_CHECK(!heads || h == heads, file->path(), ": __metadata__ ", key, " is ", h, ", but ", from, " says ", heads);
      if (!heads) *note = str("heads from __metadata__ ", key);
      heads = h;
      from = str(file->path(), " __metadata__ ", key);
    }
  return heads;
}

// The number of heads (see hf_gpt2.h for the order of the sources) and a note saying which source gave it.
// A caller's count that config.json contradicts is an error: transformers would read the folder otherwise.
int resolve_heads(const HfSource& src, const HfConfig* config, int C, int num_heads, std::string* note) {
  if (config) {
    const int h = config->n_head.value;
    GPT_CHECK(num_heads <= 0 || num_heads == h, "the number of heads given (--n-head ", num_heads, ") contradicts ",
              config->path, ": \"n_head\" is ", h, config->n_head.stated ? "" : " (GPT2Config's default: the file has "
              "no n_head)", ", and transformers reads the model with that; drop --n-head or correct config.json");
    *note = num_heads > 0 ? "heads given, as config.json says"
                          : config->n_head.stated ? "heads from config.json" : "heads from config.json's default (12)";
    return h;
  }
  if (num_heads > 0) {
    *note = "heads given";
    return num_heads;
  }
  if (const int h = heads_in_metadata(src, note)) return h;
  GPT_CHECK(C % kHeadSize == 0, src.path, ": cannot infer the number of heads: C = ", C, " is not a multiple of 64 "
            "(GPT-2's head size), and there is no config.json and no __metadata__ n_head; pass --n-head");
  *note = "heads = C/64";
  return C / kHeadSize;
}

// L from the blocks, C and V from wte, maxT from wpe; config.json checked against them; the heads as
// resolve_heads finds them.
GPTConfig shape_of(const HfSource& src, const HfNames& n, const HfConfig* config, int num_heads,
                   std::string* heads_note) {
  const StTensor& wte = *n.top.at("wte.weight")->tensor;
  const StTensor& wpe = *n.top.at("wpe.weight")->tensor;
  const std::string& wte_file = n.top.at("wte.weight")->file->path();
  const std::string& wpe_file = n.top.at("wpe.weight")->file->path();
  GPT_CHECK(wte.shape.size() == 2 && wte.shape[0] > 0 && wte.shape[1] > 0, wte_file, ": tensor '", wte.name,
            "' has shape ", shape_str(wte.shape), ", expected [V, C] (vocabulary, channels)");
  GPT_CHECK(wpe.shape.size() == 2 && wpe.shape[0] > 0 && wpe.shape[1] == wte.shape[1], wpe_file, ": tensor '",
            wpe.name, "' has shape ", shape_str(wpe.shape), ", expected [maxT, ", wte.shape[1], "] (C = ", wte.shape[1],
            " from wte.weight)");
  GPT_CHECK(wte.shape[0] <= INT32_MAX && wte.shape[1] <= INT32_MAX && wpe.shape[0] <= INT32_MAX, src.path,
            ": dimensions of wte.weight ", shape_str(wte.shape), " / wpe.weight ", shape_str(wpe.shape), " are too large");
  GPTConfig cfg;
  cfg.vocab_size = (int)wte.shape[0];
  cfg.channels = (int)wte.shape[1];
  cfg.max_seq_len = (int)wpe.shape[0];
  cfg.num_layers = n.num_layers();
  if (config) check_hf_config(*config, cfg);
  cfg.num_heads = resolve_heads(src, config, cfg.channels, num_heads, heads_note);
  try {
    cfg.finalize();
  } catch (const Error& e) {
    fail(src.path, ": the model's shape is not supported (", e.what(), ")");
  }
  return cfg;
}

// Every tensor's shape and dtype against the layout, before any data is read. Returns the dtypes seen.
std::set<std::string> check_tensors(const HfNames& n, const Layout& layout) {
  const GPTConfig& cfg = layout.config();
  const int64_t C = cfg.channels;
  std::set<std::string> dtypes;
  auto check = [&](const HfTensorRef* ref, const std::vector<int64_t>& want, const char* why) {
    const StTensor& t = *ref->tensor;
    GPT_CHECK(t.shape == want, ref->file->path(), ": tensor '", t.name, "' has shape ", shape_str(t.shape),
              ", expected ", shape_str(want), " (", why, "; ", cfg.describe(), ")");
    GPT_CHECK(t.dtype == StDType::F32 || t.dtype == StDType::F16 || t.dtype == StDType::BF16, ref->file->path(),
              ": tensor '", t.name, "' has dtype ", st_dtype_name(t.dtype), ", expected F32, F16 or BF16");
    dtypes.insert(st_dtype_name(t.dtype));
  };
  const std::vector<int64_t>& wte = n.top.at("wte.weight")->tensor->shape;
  check(n.top.at("wte.weight"), wte, "[V, C]");
  check(n.top.at("wpe.weight"), n.top.at("wpe.weight")->tensor->shape, "[maxT, C]");
  check(n.top.at("ln_f.weight"), {C}, "C from wte.weight");
  check(n.top.at("ln_f.bias"), {C}, "C from wte.weight");
  if (n.top.count("lm_head.weight")) check(n.top.at("lm_head.weight"), wte, "tied to wte.weight");
  for (int l = 0; l < cfg.num_layers; l++)
    for (int k = 0; k < kBlockTensors; k++)
      check(n.layers.at(l)[k], hf_shape(*layout.locate(kBlock[k].ours, 0).spec, kBlock[k].conv1d),
            kBlock[k].conv1d ? "a Conv1D weight [in, out], C from wte.weight" : "C from wte.weight");
  return dtypes;
}

std::vector<float> read(const HfTensorRef* ref) { return ref->file->read_f32(*ref->tensor); }

// The tensors' data into our units (Conv1D weights transposed); an lm_head must equal wte.
void read_weights(const HfNames& n, const Layout& layout, std::vector<std::vector<float>>& units) {
  const int64_t C = layout.config().channels;
  units.resize(layout.num_units());
  for (int u = 0; u < layout.num_units(); u++) units[u].assign((size_t)layout.unit(u).numel, 0.0f);
  auto put = [&](const char* ours, int layer, const std::vector<float>& v) {
    const TensorPlace t = layout.locate(ours, layer);
    std::memcpy(units[t.unit].data() + t.spec->offset, v.data(), v.size() * sizeof(float));
  };
  std::vector<float> v = read(n.top.at("wte.weight"));  // (V, C); rows V..Vp-1 of our wte stay zero
  put("wte", -1, v);
  if (n.top.count("lm_head.weight")) {
    const std::vector<float> head = read(n.top.at("lm_head.weight"));  // (V, C)
    for (size_t i = 0; i < v.size(); i++)
      GPT_CHECK(std::memcmp(&head[i], &v[i], sizeof(float)) == 0, n.top.at("lm_head.weight")->file->path(),
                ": lm_head.weight differs from wte.weight at [", i / C, ", ", i % C, "] (", head[i], " vs ", v[i],
                "): our model ties the output layer to the token embedding, so an untied lm_head cannot be imported");
  }
  put("wpe", -1, read(n.top.at("wpe.weight")));
  for (int l = 0; l < layout.config().num_layers; l++) {
    for (int k = 0; k < kBlockTensors; k++) {
      const TensorPlace t = layout.locate(kBlock[k].ours, l);
      v = read(n.layers.at(l)[k]);
      if (kBlock[k].conv1d) {  // hf (in, out) -> ours (out, in)
        transpose(v.data(), units[t.unit].data() + t.spec->offset, t.spec->cols, t.spec->rows);
      } else {
        put(kBlock[k].ours, l, v);
      }
    }
  }
  put("lnfw", -1, read(n.top.at("ln_f.weight")));
  put("lnfb", -1, read(n.top.at("ln_f.bias")));
}

}  // namespace

HfImport import_hf_gpt2(const std::string& path, int num_heads) {
  const HfSource src = open_hf_source(path);
  const HfNames names = sort_names(src);
  HfConfig config;
  if (!src.config_path.empty()) config = read_hf_config(src.config_path);
  std::string heads_note;
  HfImport r;
  GPTConfig& cfg = r.weights.config;
  cfg = shape_of(src, names, src.config_path.empty() ? nullptr : &config, num_heads, &heads_note);
  const Layout layout(cfg);
  const std::set<std::string> dtypes = check_tensors(names, layout);
  read_weights(names, layout, r.weights.units);
  std::string dt;
  for (const std::string& d : dtypes) dt += (dt.empty() ? "" : "+") + d;
  r.summary = str(dt, " weights", src.index_path.empty() ? "" : str(" in ", src.files.size(), " shards"), ", ",
                  heads_note, src.config_path.empty() ? ", no config.json" : ", config.json agrees",
                  names.prefixed ? ", 'transformer.' prefix" : "",
                  names.top.count("lm_head.weight") ? ", lm_head.weight tied to wte" : "",
                  names.skipped ? str(", skipped ", names.skipped, " attention mask buffers") : std::string(),
                  cfg.padded_vocab_size != cfg.vocab_size ? str(", vocabulary padded to ", cfg.padded_vocab_size) : "");
  return r;
}

void save_hf_gpt2(const std::string& path, const std::string& config_path, const Layout& layout,
                  const std::vector<const float*>& units) {
  GPT_CHECK((int)units.size() == layout.num_units(), path, ": save_hf_gpt2 got ", units.size(),
            " unit buffers, the layout has ", layout.num_units());
  const GPTConfig& cfg = layout.config();
  const int64_t C = cfg.channels;
  auto at = [&](const char* name, int layer) {  // the tensor's first element in the caller's units
    const TensorPlace t = layout.locate(name, layer);
    return units[t.unit] + t.spec->offset;
  };

  // Declare every tensor with its data source, in Hugging Face's order: wte, wpe, h.0 ... h.{L-1}, ln_f.
  struct Out {
    StTensorDecl decl;
    const float* src;
    const TensorSpec* conv1d;  // non-null: transpose this (rows, cols) matrix on the way out
  };
  std::vector<Out> outs;
  outs.push_back({{"wte.weight", {cfg.vocab_size, C}}, at("wte", -1), nullptr});
  outs.push_back({{"wpe.weight", {cfg.max_seq_len, C}}, at("wpe", -1), nullptr});
  for (int l = 0; l < cfg.num_layers; l++) {
    for (const BlockTensor& b : kBlock) {
      const TensorSpec& t = *layout.locate(b.ours, l).spec;
      outs.push_back({{str("h.", l, ".", b.hf), hf_shape(t, b.conv1d)}, at(b.ours, l), b.conv1d ? &t : nullptr});
    }
  }
  outs.push_back({{"ln_f.weight", {C}}, at("lnfw", -1), nullptr});
  outs.push_back({{"ln_f.bias", {C}}, at("lnfb", -1), nullptr});

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
  // Both files are complete on disk before either is renamed into place: the folder is never left with a
  // new config.json beside a half-written model, and the renames follow each other.
  const std::string config = hf_config_json(cfg);
  AtomicWriter cw(config_path);
  cw.write(config.data(), config.size());
  w.commit();
  cw.commit();
}

}  // namespace gpt
