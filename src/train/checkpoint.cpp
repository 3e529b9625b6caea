// Sharded checkpoint files (see checkpoint.h). A rank file is:
//   "GPTCKPT1" then int64 words: version, world, rank, group, strategy, L, NH, C, maxT, V, Vp, num_units,
//   step, rng[4], data.shard, data.offset, bad_steps, rng has_spare, rng spare (bits), and from version 2 on
//   updates (the AdamW updates applied: step less the skipped ones), from version 3 on the wrap (kind as
//   WrapPolicy::Kind, then its n), from version 4 on the tensor-parallel size T; then per unit: numel, padded,
//   shard_numel, shard_offset; then per unit its param, m and v shards as fp32 (shard_numel each). A version-1
//   file has no updates word and reads as updates = step. Files of versions 1 and 2 have the legacy layout
//   (Layout::legacy: one block per unit and the final layernorm in a unit of its own); before version 4, T = 1.
//   Rank r is tensor-parallel rank r % T of data-parallel rank r / T (dist/mesh.h); its units are that
//   tensor-parallel rank's slices (Layout with TpShape{T, r % T}), sharded over its data-parallel group.
// Loading reshards across world sizes, wraps and tensor-parallel sizes alike (SavedShards::read_into): each
// tensor of the run's layout is read from where the file's layout put it, through the whole tensor when the
// two split it over different groups (tp_runs, tp_place), so a run saved at T = 2 x DP = 2 resumes at T = 1 x
// DP = 4 or T = 4, one saved with --wrap blocks:4 resumes under --wrap block, and a version-2 file resumes
// under any wrap.
// manifest.txt: "gpt-checkpoint 1", "step S", "world N", then "file NAME BYTES CRC32" per rank.
#include "src/train/checkpoint.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "src/dist/collective_check.h"
#include "src/io/atomic_file.h"
#include "src/util/watchdog.h"

namespace fs = std::filesystem;

namespace gpt {
namespace {

constexpr char kMagic[8] = {'G', 'P', 'T', 'C', 'K', 'P', 'T', '1'};
constexpr int kVersion = 4;
constexpr int kFixedWords = 26;  // version 4's; version 3 has the first 25, version 2 the first 23, version 1 22
int fixed_words(int64_t version) { return version == 1 ? 22 : version == 2 ? 23 : version == 3 ? 25 : kFixedWords; }
// The shards a checkpoint keeps per unit, in file order (the gradient is not kept: a step starts from zero).
constexpr ShardState kSaved[] = {ShardState::param, ShardState::adam_m, ShardState::adam_v};
constexpr int kSavedStates = 3;

struct UnitMeta {
  int64_t numel, padded, shard_numel, shard_offset;
};
struct RankFile {
  std::string path;
  int64_t world = 0, rank = 0, group = 0, strategy = 0, step = 0, bad_steps = 0, updates = 0;
  int64_t tp = 1;       // version 4 on: the tensor-parallel size T
  GPTConfig config;
  WrapPolicy wrap;      // version 3 on
  bool legacy = false;  // versions 1 and 2: Layout::legacy
  Layout layout() const { return legacy ? Layout::legacy(config) : Layout(config, wrap, TpShape{(int)tp, (int)(rank % tp)}); }
  Rng rng;
  DataPosition data;
  std::vector<UnitMeta> units;
  int64_t data_start = 0;  // byte offset of the first shard
  int64_t unit_data_offset(int u, int which) const {
    int64_t off = data_start;
    for (int i = 0; i < u; i++) off += kSavedStates * units[i].shard_numel * 4;
    return off + which * units[u].shard_numel * 4;
  }
};

std::string rank_file_name(int r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank_%05d.bin", r);
  return buf;
}

std::string ckpt_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "ckpt_%08lld", (long long)step);
  return buf;
}

RankFile read_rank_header(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  GPT_CHECK(f, "checkpoint file ", path, ": cannot open");
  const int64_t size = (int64_t)fs::file_size(path);
  char magic[8];
  f.read(magic, 8);
  GPT_CHECK(f && std::memcmp(magic, kMagic, 8) == 0, "checkpoint file ", path, ": bad magic (not a gpt checkpoint)");
  int64_t w[kFixedWords];
  f.read(reinterpret_cast<char*>(w), 8);
  GPT_CHECK(f && w[0] >= 1 && w[0] <= kVersion, "checkpoint file ", path,
            f ? ": unsupported version " + std::to_string(w[0]) + " (expected 1 to 4)" : ": truncated header");
  const int words = fixed_words(w[0]);
  f.read(reinterpret_cast<char*>(w + 1), 8 * (words - 1));
  GPT_CHECK(f, "checkpoint file ", path, ": truncated header");
  RankFile h;
  h.path = path;
  h.world = w[1], h.rank = w[2], h.group = w[3], h.strategy = w[4];
  GPT_CHECK(h.world >= 1 && h.world <= 1 << 20 && h.rank >= 0 && h.rank < h.world && h.group >= 1 &&
                h.group <= h.world,
            "checkpoint file ", path, ": bad world/rank/group ", h.world, "/", h.rank, "/", h.group);
  for (int i = 5; i <= 10; i++)
    GPT_CHECK(w[i] >= 1 && w[i] <= (int64_t)1 << 30, "checkpoint file ", path, ": model dimension ", w[i], " out of range");
  h.config.num_layers = (int)w[5], h.config.num_heads = (int)w[6], h.config.channels = (int)w[7];
  h.config.max_seq_len = (int)w[8], h.config.vocab_size = (int)w[9];
  try {
    h.config.finalize();
  } catch (const Error& e) {
    fail("checkpoint file ", path, ": ", e.what());
  }
  GPT_CHECK(w[10] == h.config.padded_vocab_size, "checkpoint file ", path, ": padded vocab ", w[10], " != ",
            h.config.padded_vocab_size);
  h.legacy = w[0] < 3;
  if (!h.legacy) {
    GPT_CHECK(w[23] >= 0 && w[23] <= (int64_t)WrapPolicy::Kind::min_params && w[24] >= 1 &&
                  w[24] <= WrapPolicy::kMaxN && (w[23] != (int64_t)WrapPolicy::Kind::block || w[24] == 1),
              "checkpoint file ", path, ": bad wrap ", w[23], ":", w[24], " (expected a kind 0..2 and a count in [1, 1e15])");
    h.wrap.kind = (WrapPolicy::Kind)w[23];
    h.wrap.n = w[24];
  }
  if (w[0] >= 4) {
    h.tp = w[25];
    GPT_CHECK(h.tp >= 1 && h.world % h.tp == 0 && h.group <= h.world / h.tp, "checkpoint file ", path,
              ": tensor-parallel size ", h.tp, " does not divide its world ", h.world, " into data-parallel groups of ",
              h.group, " or more ranks");
  }
  Layout layout = Layout::legacy(h.config);
  try {
    layout = h.layout();
  } catch (const Error& e) {  // a recorded T no layout of this model can be split over
    fail("checkpoint file ", path, ": its tensor-parallel size cannot split the model: ", e.what());
  }
  const int64_t nu = w[11];
  GPT_CHECK(nu == layout.num_units(), "checkpoint file ", path, ": ", nu, " units, but ", h.config.num_layers,
            " layers under --wrap ", h.wrap.str(), " make ", layout.num_units());
  h.step = w[12];
  for (int i = 0; i < 4; i++) std::memcpy(&h.rng.s[i], &w[13 + i], 8);
  h.rng.has_spare = (uint64_t)w[20];
  std::memcpy(&h.rng.spare, &w[21], 8);
  h.data.shard = w[17], h.data.offset = w[18], h.bad_steps = w[19];
  h.updates = words > 22 ? w[22] : h.step;
  GPT_CHECK(h.step >= 0 && h.data.shard >= 0 && h.data.offset >= 0, "checkpoint file ", path, ": negative progress fields");
  GPT_CHECK(h.updates >= 0 && h.updates <= h.step, "checkpoint file ", path, ": ", h.updates,
            " optimizer updates applied in ", h.step, " steps (expected 0 to ", h.step, ")");
  std::vector<int64_t> um((size_t)nu * 4);
  f.read(reinterpret_cast<char*>(um.data()), (std::streamsize)(um.size() * 8));
  GPT_CHECK(f, "checkpoint file ", path, ": truncated unit table");
  int64_t expect = 8 + 8 * words + 8 * (int64_t)um.size();
  h.data_start = expect;
  for (int u = 0; u < nu; u++) {
    UnitMeta m{um[4 * u], um[4 * u + 1], um[4 * u + 2], um[4 * u + 3]};
    // Division, not shard_numel * group: a hostile shard_numel must not overflow (then wrap into a match).
    GPT_CHECK(m.numel == layout.unit(u).numel && m.padded >= m.numel && m.padded % h.group == 0 &&
                  m.shard_numel == m.padded / h.group && m.shard_offset == (h.rank / h.tp % h.group) * m.shard_numel,
              "checkpoint file ", path, ": inconsistent geometry for unit ", layout.unit(u).name);
    GPT_CHECK(m.shard_numel <= (size - expect) / 12, "checkpoint file ", path, ": size ", size,
              " bytes, too small for the shards of unit ", layout.unit(u).name);
    h.units.push_back(m);
    expect += 3 * m.shard_numel * 4;  // stays <= size by the check above
  }
  GPT_CHECK(size == expect, "checkpoint file ", path, ": size ", size, " bytes, expected ", expect);
  return h;
}

struct Manifest {
  int64_t step = 0, world = 0;
  struct Entry { std::string name; int64_t bytes; uint32_t crc; };
  std::vector<Entry> files;
};

Manifest read_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest.txt";
  std::istringstream in(read_file(path));
  Manifest m;
  std::string tag;
  int version = 0;
  GPT_CHECK(in >> tag >> version && tag == "gpt-checkpoint" && version == 1, "checkpoint manifest ", path,
            ": bad first line (expected 'gpt-checkpoint 1')");
  GPT_CHECK(in >> tag >> m.step && tag == "step" && in >> tag >> m.world && tag == "world" && m.world >= 1,
            "checkpoint manifest ", path, ": bad step/world lines");
  for (int64_t r = 0; r < m.world; r++) {
    Manifest::Entry e;
    GPT_CHECK(in >> tag >> e.name >> e.bytes >> e.crc && tag == "file" && e.name == rank_file_name((int)r),
              "checkpoint manifest ", path, ": bad entry for rank ", r);
    m.files.push_back(e);
  }
  return m;
}

void verify_file(const std::string& dir, const Manifest::Entry& e) {
  const std::string path = dir + "/" + e.name;
  std::ifstream f(path, std::ios::binary);
  GPT_CHECK(f, "checkpoint file ", path, ": missing");
  std::vector<char> buf(1 << 20);
  uint32_t crc = 0;
  int64_t n = 0;
  while (f) {
    f.read(buf.data(), (std::streamsize)buf.size());
    crc = crc32_update(crc, buf.data(), (size_t)f.gcount());
    n += f.gcount();
  }
  GPT_CHECK(n == e.bytes && crc == e.crc, "checkpoint file ", path, ": checksum or size mismatch with manifest (",
            n, " bytes, crc ", crc, "; manifest says ", e.bytes, " bytes, crc ", e.crc, ")");
}

// A checkpoint's shards, read by range through files kept open. Tensor-parallel rank t's units are in the
// files of ranks r with r % T == t; a data-parallel group's first G ranks hold them all (the replicas across
// groups hold the same shards, so only the first group is read).
class SavedShards {
 public:
  explicit SavedShards(std::vector<RankFile> files) : files_(std::move(files)), tp_((int)files_[0].tp) {
    for (int t = 0; t < tp_; t++) {
      RankFile one = files_[0];
      one.rank = t;  // the layout of tensor-parallel rank t
      layouts_.push_back(one.layout());
    }
  }
  const RankFile& first() const { return files_[0]; }
  int tp() const { return tp_; }
  const Layout& layout(int t) const { return layouts_[t]; }

  // out[0 .. hi-lo) = elements [lo, hi) of tensor-parallel rank t's unit u, state kSaved[which] (the unit's
  // padding: 0).
  void read(int t, int u, int which, int64_t lo, int64_t hi, float* out) {
    std::fill(out, out + (hi - lo), 0.0f);
    for (const RankFile& f : files_) {
      if (f.rank % tp_ != t || f.rank / tp_ >= f.group) continue;
      const UnitMeta& m = f.units[u];
      const int64_t a = std::max(lo, m.shard_offset), b = std::min({hi, m.shard_offset + m.shard_numel, m.numel});
      if (a >= b) continue;
      std::ifstream& in = stream(f.path);
      in.seekg(f.unit_data_offset(u, which) + (a - m.shard_offset) * 4);
      in.read(reinterpret_cast<char*>(out + (a - lo)), (b - a) * 4);
      GPT_CHECK(in, "checkpoint file ", f.path, ": read failed");
    }
  }

  // out[0 .. hi-lo) = elements [lo, hi) of unit u of `dst`, a layout of the same model under any wrap and
  // tensor-parallel shape: tensor by tensor from wherever the files put it (padding: 0).
  void read_into(const Layout& dst, int u, int which, int64_t lo, int64_t hi, float* out) {
    std::fill(out, out + (hi - lo), 0.0f);
    if (dst.tp().size == tp_) {  // the same slices: whole runs of units, tensor by tensor (Layout::map_range)
      const int t = dst.tp().rank;
      for (const UnitSpan& s : dst.map_range(u, lo, hi, layouts_[t]))
        read(t, s.src_unit, which, s.src, s.src + s.numel, out + (s.dst - lo));
      return;
    }
    for (const TensorSpec& t : dst.unit(u).tensors) {  // through the whole tensor: dst's runs, then their places
      const int64_t a = std::max(lo, t.offset) - t.offset, b = std::min(hi, t.offset + t.numel) - t.offset;
      if (a >= b) continue;
      const TensorSpec& saved = *layouts_[0].locate(t.name, t.layer).spec;
      for (const TpRun& run : tp_runs(t, dst.tp())) {
        const int64_t la = std::max(a, run.local), lb = std::min(b, run.local + run.numel);
        for (int64_t x = la; x < lb;) {  // x: an element of dst's slice; run.full + (x - run.local) of the whole
          const TpPlace p = tp_place(saved, tp_, run.full + (x - run.local));
          const int64_t n = std::min(p.numel, lb - x);
          const TensorPlace src = layouts_[p.rank].locate(t.name, t.layer);
          read(p.rank, src.unit, which, src.spec->offset + p.local, src.spec->offset + p.local + n,
               out + (t.offset + x - lo));
          x += n;
        }
      }
    }
  }

 private:
  std::ifstream& stream(const std::string& path) {
    auto it = open_.find(path);
    if (it == open_.end()) {
      it = open_.emplace(path, std::ifstream(path, std::ios::binary)).first;
      GPT_CHECK(it->second, "checkpoint file ", path, ": cannot open");
    }
    it->second.clear();
    return it->second;
  }

  std::vector<RankFile> files_;
  int tp_ = 1;
  std::vector<Layout> layouts_;                 // [tensor-parallel rank]
  std::map<std::string, std::ifstream> open_;  // path -> its stream
};

std::vector<RankFile> read_all_headers(const std::string& dir, const Manifest& man) {
  std::vector<RankFile> files;
  for (int64_t r = 0; r < man.world; r++) {
    files.push_back(read_rank_header(dir + "/" + rank_file_name((int)r)));
    GPT_CHECK(files.back().world == man.world && files.back().rank == r && files.back().step == man.step,
              "checkpoint file ", files.back().path, ": header disagrees with the manifest");
    // read_range indexes every file's unit table by the first file's units: all must share one geometry.
    GPT_CHECK(files.back().config == files[0].config && files.back().group == files[0].group &&
                  files.back().wrap == files[0].wrap && files.back().legacy == files[0].legacy &&
                  files.back().tp == files[0].tp,
              "checkpoint file ", files.back().path, ": model config, shard group, wrap or tensor-parallel size differs from ",
              files[0].path);
  }
  return files;
}

// Fault injection for tests: GPT_TEST_KILL_IN_CHECKPOINT=S kills the process (SIGKILL, no cleanup)
// halfway through writing the checkpoint of step S, as a power cut or OOM kill would.
void crash_hook(int64_t step, int unit, int units) {
  static const char* env = std::getenv("GPT_TEST_KILL_IN_CHECKPOINT");
  if (env && std::atoll(env) == step && unit == units / 2) std::raise(SIGKILL);
}

}  // namespace

std::string save_checkpoint(const std::string& run_dir, ShardingEngine& engine, const TrainProgress& p, int keep,
                            Communicator* all) {
  Communicator& world = all ? *all : engine.world();
  const int64_t tp = engine.layout().tp().size;
  GPT_CHECK(world.world() == engine.world().world() * tp, "checkpoint: the world of ", world.world(),
            " ranks is not the engine's ", engine.world().world(), " data-parallel ranks x ", tp);
  const std::string dir = run_dir + "/" + ckpt_dir_name(p.step);
  collective_check(world, "checkpoint", [&] {
    std::error_code ec;
    fs::create_directories(dir, ec);
    GPT_CHECK(!ec, "--out: cannot create checkpoint directory ", dir, ": ", ec.message());
  });
  const GPTConfig& c = engine.layout().config();
  uint32_t crc = 0;
  int64_t bytes = 0;
  collective_check(world, "checkpoint", [&] {
    AtomicWriter w(dir + "/" + rank_file_name(world.rank()));
    w.write(kMagic, 8);
    int64_t words[kFixedWords] = {kVersion, world.world(), world.rank(), engine.shard_group_size(), (int64_t)engine.options().strategy,
                                  c.num_layers, c.num_heads, c.channels, c.max_seq_len, c.vocab_size,
                                  c.padded_vocab_size, engine.num_units(), p.step, 0, 0, 0, 0,
                                  p.data.shard, p.data.offset, p.bad_steps, 0, 0, p.updates,
                                  (int64_t)engine.layout().wrap().kind, engine.layout().wrap().n, tp};
    for (int i = 0; i < 4; i++) std::memcpy(&words[13 + i], &p.rng.s[i], 8);
    words[20] = (int64_t)p.rng.has_spare;
    std::memcpy(&words[21], &p.rng.spare, 8);
    w.write(words, sizeof words);
    for (int u = 0; u < engine.num_units(); u++) {
      const UnitGeometry& s = engine.shard(u);
      int64_t m[4] = {s.numel, s.padded, s.shard_numel, s.shard_offset};
      w.write(m, sizeof m);
    }
    std::vector<float> host;
    for (int u = 0; u < engine.num_units(); u++) {
      for (int which = 0; which < kSavedStates; which++) {
        engine.shard_to_host(u, kSaved[which], host);
        w.write(host.data(), host.size() * sizeof(float));
      }
      crash_hook(p.step, u, engine.num_units());
      watchdog::beat("checkpoint write");
    }
    crc = w.crc32();
    bytes = (int64_t)w.bytes_written();
    w.commit();
  });
  std::ostringstream man;
  man << "gpt-checkpoint 1\nstep " << p.step << "\nworld " << world.world() << "\n";
  for (int r = 0; r < world.world(); r++) {
    const double rc = world.world() > 1 ? world.all_reduce_scalar(r == world.rank() ? crc : 0.0, ReduceOp::sum) : crc;
    const double rb = world.world() > 1 ? world.all_reduce_scalar(r == world.rank() ? bytes : 0.0, ReduceOp::sum) : bytes;
    man << "file " << rank_file_name(r) << " " << (int64_t)rb << " " << (uint32_t)rc << "\n";
  }
  collective_check(world, "checkpoint manifest", [&] {
    if (world.rank() != 0) return;
    const std::string text = man.str();
    write_file_atomic(dir + "/manifest.txt", text.data(), text.size());
    // prune: keep the newest `keep` complete checkpoints
    std::vector<std::string> complete;
    for (const auto& e : fs::directory_iterator(run_dir))
      if (e.path().filename().string().rfind("ckpt_", 0) == 0 && fs::exists(e.path() / "manifest.txt"))
        complete.push_back(e.path().string());
    std::sort(complete.begin(), complete.end());
    for (size_t i = 0; keep > 0 && i + keep < complete.size(); i++) fs::remove_all(complete[i]);
  });
  world.barrier();
  return dir;
}

std::string find_latest_checkpoint(const std::string& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return "";
  std::vector<std::string> complete;
  for (const auto& e : fs::directory_iterator(run_dir))
    if (e.path().filename().string().rfind("ckpt_", 0) == 0 && fs::exists(e.path() / "manifest.txt"))
      complete.push_back(e.path().string());
  std::sort(complete.begin(), complete.end());
  return complete.empty() ? "" : complete.back();
}

void verify_checkpoint(const std::string& dir, Communicator& world, const GPTConfig& run) {
  collective_check(world, "resume", [&] {
    const Manifest man = read_manifest(dir);
    for (size_t i = world.rank(); i < man.files.size(); i += world.world()) verify_file(dir, man.files[i]);
    const std::vector<RankFile> files = read_all_headers(dir, man);
    GPT_CHECK(files[0].config == run, "checkpoint ", dir, ": model config differs from this run (checkpoint ",
              files[0].config.describe(), "; run ", run.describe(), ")");
  });
}

TrainProgress load_checkpoint(const std::string& dir, ShardingEngine& engine, bool verify, Communicator* all) {
  Communicator& world = all ? *all : engine.world();
  if (verify) verify_checkpoint(dir, world, engine.layout().config());
  std::vector<RankFile> files;
  collective_check(world, "resume", [&] { files = read_all_headers(dir, read_manifest(dir)); });
  SavedShards saved(files);
  std::vector<float> buf;  // (shard) fp32: one state of this rank's shard of a unit
  for (int u = 0; u < engine.num_units(); u++) {
    const UnitGeometry& s = engine.shard(u);
    for (int which = 0; which < kSavedStates; which++) {
      buf.assign((size_t)s.shard_numel, 0.0f);  // the unit's padding stays 0
      saved.read_into(engine.layout(), u, which, s.shard_offset, s.shard_offset + s.shard_numel, buf.data());
      engine.shard_from_host(u, kSaved[which], buf);
    }
  }
  TrainProgress p;
  p.step = files[0].step;
  p.rng = files[0].rng;
  p.data = files[0].data;
  p.bad_steps = (int)files[0].bad_steps;
  p.updates = files[0].updates;
  p.saved_wrap = files[0].legacy ? "block (a version-2 file)" : files[0].wrap.str();
  p.saved_tp = (int)files[0].tp;
  return p;
}

GPTConfig checkpoint_config(const std::string& dir) { return read_all_headers(dir, read_manifest(dir))[0].config; }

ConsolidatedModel consolidate_checkpoint(const std::string& dir) {
  Manifest man = read_manifest(dir);
  for (const auto& e : man.files) verify_file(dir, e);
  std::vector<RankFile> files = read_all_headers(dir, man);
  ConsolidatedModel out;
  out.config = files[0].config;
  const Layout layout(out.config);
  SavedShards saved(files);
  for (int u = 0; u < layout.num_units(); u++) {
    out.units.emplace_back((size_t)layout.unit(u).numel, 0.0f);
    saved.read_into(layout, u, 0, 0, layout.unit(u).numel, out.units.back().data());
  }
  return out;
}

}  // namespace gpt
