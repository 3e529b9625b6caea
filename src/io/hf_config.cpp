// config.json of a Hugging Face GPT-2 folder (rules in hf_config.h): parsed with the project's JSON reader
// (io/json_min.h); each field is looked up once, typed, and refused in one line when the model cannot
// honour it.
#include "src/io/hf_config.h"

#include <climits>
#include <cstdlib>
#include <set>

#include "src/core/check.h"
#include "src/io/atomic_file.h"
#include "src/io/json_min.h"

namespace gpt {

namespace {

constexpr int kGpt2Vocab = 50257;  // GPT-2's BPE vocabulary; <|endoftext|> is its last id
constexpr int kByteVocab = 257;    // our byte tokenizer: 256 bytes and <|endoftext|>

// The root object's members by name, each key at most once.
class Fields {
 public:
  Fields(const JsonValue& root, const std::string& path) : root_(root), path_(path) {
    std::set<std::string> seen;  // n log n, whatever the number of keys
    for (const auto& m : root.members)
      GPT_CHECK(seen.insert(m.first).second, path, ": key \"", m.first, "\" appears twice");
  }
  const JsonValue* find(const char* key) const {
    for (const auto& m : root_.members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
  // A positive integer field; GPT2Config's default when absent.
  HfConfig::Field positive(const char* key, int fallback) const {
    HfConfig::Field f{fallback, false};
    const JsonValue* v = find(key);
    if (!v) return f;
    uint64_t n = 0;
    GPT_CHECK(v->as_u64(&n) && n >= 1 && n <= (uint64_t)INT_MAX, path_, ": \"", key, "\" is ", describe(*v),
              ", expected a positive integer");
    return {(int)n, true};
  }
  // A string field that must be one of `allowed` (the first is GPT2Config's default).
  void one_of(const char* key, std::initializer_list<const char*> allowed, const char* why) const {
    const JsonValue* v = find(key);
    if (!v) return;
    GPT_CHECK(v->kind == JsonValue::Kind::string, path_, ": \"", key, "\" is ", describe(*v), ", expected a string");
    std::string list;
    for (const char* a : allowed) {
      if (v->text == a) return;
      list += std::string(list.empty() ? "\"" : " or \"") + a + "\"";
    }
    fail(path_, ": \"", key, "\" is \"", v->text, "\", expected ", list, " (", why, ")");
  }
  // A boolean field that must hold `want` (GPT2Config's default) for our model.
  void boolean(const char* key, bool want, const char* why) const {
    const JsonValue* v = find(key);
    if (!v) return;
    GPT_CHECK(v->kind == JsonValue::Kind::boolean, path_, ": \"", key, "\" is ", describe(*v), ", expected ",
              want ? "true" : "false");
    GPT_CHECK(v->boolean == want, path_, ": \"", key, "\" is ", v->boolean ? "true" : "false", ", but ", why);
  }
  std::string describe(const JsonValue& v) const {
    if (v.kind == JsonValue::Kind::number) return v.text;
    if (v.kind == JsonValue::Kind::string) return str("the string \"", v.text, "\"");
    if (v.kind == JsonValue::Kind::boolean) return v.boolean ? "true" : "false";
    return v.kind_name();
  }

 private:
  const JsonValue& root_;
  const std::string& path_;
};

void check_epsilon(const Fields& f, const std::string& path) {
  const JsonValue* v = f.find("layer_norm_epsilon");
  if (!v) return;
  GPT_CHECK(v->kind == JsonValue::Kind::number, path, ": \"layer_norm_epsilon\" is ", f.describe(*v),
            ", expected a number");
  GPT_CHECK(std::strtod(v->text.c_str(), nullptr) == 1e-5, path, ": \"layer_norm_epsilon\" is ", v->text,
            ", but our LayerNorm uses 1e-5");
}

void check_inner(const Fields& f, const HfConfig& c) {
  const JsonValue* v = f.find("n_inner");
  if (!v || v->kind == JsonValue::Kind::null) return;
  const HfConfig::Field inner = f.positive("n_inner", 0);
  GPT_CHECK((int64_t)inner.value == 4 * (int64_t)c.n_embd.value, c.path, ": \"n_inner\" is ", inner.value,
            ", but our MLP is 4 * n_embd = ", 4 * (int64_t)c.n_embd.value, " wide (null also means that)");
}

std::string field_text(const char* key, const HfConfig::Field& f) {
  return f.stated ? str("\"", key, "\" is ", f.value) : str("\"", key, "\" is absent, so GPT2Config's default ", f.value);
}

}  // namespace

HfConfig read_hf_config(const std::string& path) {
  const JsonValue root = parse_json(read_file(path), path);
  GPT_CHECK(root.kind == JsonValue::Kind::object, path, ": the file is ", root.kind_name(),
            ", expected a JSON object (transformers' GPT2Config)");
  const Fields f(root, path);
  HfConfig c;
  c.path = path;
  f.one_of("model_type", {"gpt2"}, "a GPT-2 model is what gpt import reads");
  c.n_layer = f.positive("n_layer", 12);
  c.n_head = f.positive("n_head", 12);
  c.n_embd = f.positive("n_embd", 768);
  c.n_positions = f.positive("n_positions", 1024);
  c.vocab_size = f.positive("vocab_size", kGpt2Vocab);
  c.n_ctx = f.positive("n_ctx", 0);
  check_inner(f, c);
  f.one_of("activation_function", {"gelu_new", "gelu_pytorch_tanh"}, "our MLP computes the tanh GELU");
  check_epsilon(f, path);
  f.boolean("tie_word_embeddings", true, "our output layer is tied to the token embedding");
  f.boolean("scale_attn_weights", true, "our attention scales the scores by 1/sqrt(head size)");
  f.boolean("scale_attn_by_inverse_layer_idx", false, "our attention does not scale by layer");
  f.boolean("add_cross_attention", false, "our model has no cross-attention");
  return c;
}

void check_hf_config(const HfConfig& c, const GPTConfig& t) {
  auto same = [&](const char* key, const HfConfig::Field& f, int tensors, const std::string& what) {
    GPT_CHECK(f.value == tensors, c.path, ": ", field_text(key, f), ", but the tensors say ", tensors, " (", what, ")");
  };
  same("n_layer", c.n_layer, t.num_layers, str("blocks h.0 ... h.", t.num_layers - 1));
  same("n_embd", c.n_embd, t.channels, "the columns of wte.weight");
  same("n_positions", c.n_positions, t.max_seq_len, "the rows of wpe.weight");
  same("vocab_size", c.vocab_size, t.vocab_size, "the rows of wte.weight");
  if (c.n_ctx.stated) same("n_ctx", c.n_ctx, t.max_seq_len, "the rows of wpe.weight");
  GPT_CHECK(t.channels % c.n_head.value == 0, c.path, ": ", field_text("n_head", c.n_head),
            ", which does not divide the tensors' ", t.channels, " channels (the columns of wte.weight)");
}

std::string hf_config_json(const GPTConfig& cfg) {
  // <|endoftext|> ends and starts documents; an unknown vocabulary has no known id (null).
  const std::string eot = cfg.vocab_size == kGpt2Vocab || cfg.vocab_size == kByteVocab
                              ? std::to_string(cfg.vocab_size - 1) : std::string("null");
  return str("{\n"
             "  \"model_type\": \"gpt2\",\n"
             "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
             "  \"n_layer\": ", cfg.num_layers, ",\n"
             "  \"n_head\": ", cfg.num_heads, ",\n"
             "  \"n_embd\": ", cfg.channels, ",\n"
             "  \"n_positions\": ", cfg.max_seq_len, ",\n"
             "  \"n_ctx\": ", cfg.max_seq_len, ",\n"
             "  \"vocab_size\": ", cfg.vocab_size, ",\n"
             "  \"n_inner\": null,\n"
             "  \"activation_function\": \"gelu_new\",\n"
             "  \"layer_norm_epsilon\": 1e-05,\n"
             "  \"tie_word_embeddings\": true,\n"
             "  \"scale_attn_weights\": true,\n"
             "  \"scale_attn_by_inverse_layer_idx\": false,\n"
             "  \"reorder_and_upcast_attn\": false,\n"
             "  \"add_cross_attention\": false,\n"
             "  \"bos_token_id\": ", eot, ",\n"
             "  \"eos_token_id\": ", eot, ",\n"
             "  \"torch_dtype\": \"float32\"\n"
             "}\n");
}

}  // namespace gpt
