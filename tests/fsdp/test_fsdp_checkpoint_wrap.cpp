// Checkpoints across wraps (the files record the wrap; loading reshards tensor by tensor): a run saved under
// one wrap resumes under another and continues bit for bit as the uninterrupted run; and a file of version 2,
// the legacy layout (the final layernorm in a unit of its own), written here byte by byte as checkpoint.cpp's
// header comment describes the format, loads into today's layout with every parameter and Adam moment where
// it belongs.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "src/io/atomic_file.h"
#include "src/train/checkpoint.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

RunSpec spec(const char* wrap) {
  RunSpec s;
  s.cfg = tiny_config(3, 2, 32, 16, 89);
  s.global_seqs = 12;
  s.wrap = WrapPolicy::parse(wrap);
  return s;
}

TEST(FsdpCheckpointWrap, ResumeUnderAnotherWrapIsBitExact) {
  Communicator& w = world();
  // min-params:N with N one past a block: two blocks per unit (a layout of its own, not block's)
  const std::string two = "min-params:" + std::to_string(Layout(spec("block").cfg).block_numel() + 1);
  for (auto [saved, resumed] : {std::pair<std::string, std::string>{"blocks:2", "block"}, {"block", "blocks:3"},
                                {"blocks:3", two}}) {
    const std::string dir = shared_dir("wrap");
    ShardedRun a(spec(saved.c_str()), w);
    for (int i = 0; i < 3; i++) a.train_step();
    TrainProgress p;
    p.step = a.step;
    save_checkpoint(dir, *a.engine, p, 1);
    for (int i = 0; i < 3; i++) a.train_step();

    ShardedRun b(spec(resumed.c_str()), w);
    const TrainProgress q = load_checkpoint(find_latest_checkpoint(dir), *b.engine);
    EXPECT_EQ(q.saved_wrap, saved);
    b.step = (int)q.step;
    for (int i = 0; i < 3; i++) b.train_step();
    EXPECT_EQ(b.params(), a.params()) << saved << " -> " << resumed;
  }
}

// A version-2 rank file: magic, 23 words, the legacy layout's unit table, then param, m, v per unit; m and v
// are the parameters times 2 and times 3, so each lands where its parameter does or the test sees it.
void write_v2_rank_file(const std::string& path, const GPTConfig& c, int world, int rank, int64_t step,
                        const std::vector<std::vector<float>>& legacy_units, uint32_t* crc, int64_t* bytes) {
  const Layout legacy = Layout::legacy(c);
  std::vector<char> out(8);
  std::memcpy(out.data(), "GPTCKPT1", 8);
  auto put = [&](const void* p, size_t n) { out.insert(out.end(), (const char*)p, (const char*)p + n); };
  int64_t words[23] = {2, world, rank, world, 0, c.num_layers, c.num_heads, c.channels, c.max_seq_len,
                       c.vocab_size, c.padded_vocab_size, legacy.num_units(), step, 1, 2, 3, 4, 0, 0, 0, 0, 0, step};
  put(words, sizeof words);
  for (int u = 0; u < legacy.num_units(); u++) {
    const int64_t numel = legacy.unit(u).numel, padded = (numel + world - 1) / world * world, shard = padded / world;
    const int64_t m[4] = {numel, padded, shard, rank * shard};
    put(m, sizeof m);
  }
  for (int u = 0; u < legacy.num_units(); u++) {
    const int64_t numel = legacy.unit(u).numel, shard = (numel + world - 1) / world;
    std::vector<float> param((size_t)shard, 0.0f), m((size_t)shard, 0.0f), v((size_t)shard, 0.0f);  // (shard) fp32
    for (int64_t i = 0; i < shard && rank * shard + i < numel; i++) {
      param[i] = legacy_units[u][rank * shard + i];
      m[i] = 2 * param[i];
      v[i] = 3 * param[i];
    }
    put(param.data(), param.size() * 4);
    put(m.data(), m.size() * 4);
    put(v.data(), v.size() * 4);
  }
  std::ofstream(path, std::ios::binary).write(out.data(), (std::streamsize)out.size());
  *crc = crc32_update(0, out.data(), out.size());
  *bytes = (int64_t)out.size();
}

TEST(FsdpCheckpointWrap, VersionTwoFileLoadsIntoEveryWrap) {
  Communicator& w = world();
  const int N = w.world();
  const std::string dir = shared_dir("v2") + "/ckpt_00000007";
  RunSpec s = spec("block");
  ShardedRun ref(s, w);
  ref.train_step();
  const std::vector<std::vector<float>> want = ref.params();  // the default layout's units
  std::vector<const float*> ptrs;
  for (const std::vector<float>& u : want) ptrs.push_back(u.data());
  const Layout legacy = Layout::legacy(s.cfg);
  std::vector<std::vector<float>> old;
  for (int u = 0; u < legacy.num_units(); u++) {
    old.emplace_back((size_t)legacy.unit(u).numel, 0.0f);
    copy_unit(legacy, u, Layout(s.cfg), ptrs, old.back().data());
  }
  if (w.rank() == 0) {
    std::filesystem::create_directories(dir);
    std::string man = "gpt-checkpoint 1\nstep 7\nworld " + std::to_string(N) + "\n";
    for (int r = 0; r < N; r++) {
      char name[32];
      std::snprintf(name, sizeof name, "rank_%05d.bin", r);
      uint32_t crc = 0;
      int64_t bytes = 0;
      write_v2_rank_file(dir + "/" + name, s.cfg, N, r, 7, old, &crc, &bytes);
      man += std::string("file ") + name + " " + std::to_string(bytes) + " " + std::to_string(crc) + "\n";
    }
    std::ofstream(dir + "/manifest.txt") << man;
  }
  w.barrier();
  for (const char* wrap : {"block", "blocks:2", "blocks:3"}) {
    ShardedRun b(spec(wrap), w);
    const TrainProgress q = load_checkpoint(dir, *b.engine);
    EXPECT_EQ(q.step, 7);
    EXPECT_EQ(q.saved_wrap, "block (a version-2 file)");
    EXPECT_EQ(b.params(), want) << wrap;
    std::vector<float> p, m, v;
    for (int u = 0; u < b.engine->num_units(); u++) {
      b.engine->shard_to_host(u, ShardState::param, p);
      b.engine->shard_to_host(u, ShardState::adam_m, m);
      b.engine->shard_to_host(u, ShardState::adam_v, v);
      for (size_t i = 0; i < p.size(); i++) {
        ASSERT_EQ(m[i], 2 * p[i]) << wrap << " unit " << u << " element " << i;
        ASSERT_EQ(v[i], 3 * p[i]) << wrap << " unit " << u << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace gpt::test
