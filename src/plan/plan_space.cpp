// See plan_space.h: the dimensions of the search, per tensor-parallel size.
#include "src/plan/plan_space.h"

#include <algorithm>

#include "src/core/check.h"
#include "src/model/layout.h"

namespace gpt {
namespace {

template <class T>
std::vector<T> pinned_or(const std::optional<T>& pin, std::vector<T> all) {
  return pin ? std::vector<T>{*pin} : all;
}

// The ranks of one node, as the simulated step takes them (sim_step.h): a tensor-parallel group fits inside.
int ranks_per_node(const PlanRequest& rq) {
  return rq.ranks_per_node > 0 ? rq.ranks_per_node : std::min(rq.base.world, rq.hw->devices_per_node);
}

// T in 1..R dividing the heads, the padded vocabulary and the world; or the pinned --tp, checked as a run would be.
std::vector<int> tp_sizes(const PlanRequest& rq, int R) {
  const GPTConfig& cfg = rq.base.cfg;
  const int N = rq.base.world;
  const PlanPins& p = rq.pins;
  if (p.tp) {
    check_tp_run(TpOptions{*p.tp, false}, cfg, N, 1, rq.base.T, "--world");
    GPT_CHECK(!(p.sequence_parallel.value_or(false) && *p.tp == 1),
              "--sequence-parallel on needs --tp > 1 (one rank has no rows to split)");
    return {*p.tp};
  }
  std::vector<int> out;
  for (int T = p.sequence_parallel.value_or(false) ? 2 : 1; T <= std::min(N, R); T++)
    if (cfg.num_heads % T == 0 && cfg.padded_vocab_size % T == 0 && N % T == 0) out.push_back(T);
  GPT_CHECK(!out.empty(), "--sequence-parallel on: no --tp > 1 divides the model's ", cfg.num_heads,
            " heads, the padded vocabulary ", cfg.padded_vocab_size, " and --world ", N, " within a node of ", R,
            " ranks");
  return out;
}

std::vector<std::pair<ShardStrategy, int>> strategies(const PlanPins& p, int dp) {
  std::vector<std::pair<ShardStrategy, int>> all;
  if (dp == 1) {  // full and none are one program at one rank (G = 1): none is searched only when pinned
    all = {{ShardStrategy::full, 0}};
    if (p.strategy && *p.strategy == ShardStrategy::none) all = {{ShardStrategy::none, 0}};
  } else {
    all = {{ShardStrategy::full, 0}, {ShardStrategy::grad_op, 0}, {ShardStrategy::none, 0}};
    for (int G = 2; G < dp; G++)
      if (dp % G == 0) all.push_back({ShardStrategy::hybrid, G});
  }
  std::vector<std::pair<ShardStrategy, int>> out;
  for (const auto& s : all)
    if ((!p.strategy || *p.strategy == s.first) && (!p.shard_group || *p.shard_group == s.second)) out.push_back(s);
  if (p.strategy && *p.strategy == ShardStrategy::hybrid && p.shard_group && out.empty())
    out.push_back({ShardStrategy::hybrid, *p.shard_group});  // the engine's checks will say why it cannot run
  return out;
}

// Rule 1's blocks:K, K = ceil(L/u) (u = 1..L), for T = 1; every K under tensor parallelism, where a wrap of as
// many units with larger ones can be faster (a larger gather holds the one channel longer, and the group's
// collectives, waited at once, queue behind it at other moments).
std::vector<WrapPolicy> wraps(int L, int tp) {
  std::vector<WrapPolicy> out;
  int last = 0;
  for (int u = L; u >= 1; u--) {  // K = ceil(L/u) rises as u falls
    const int K = tp > 1 ? L - u + 1 : (L + u - 1) / u;
    if (K == last) continue;
    last = K;
    out.push_back(K == 1 ? WrapPolicy{} : WrapPolicy::parse(str("blocks:", K)));
  }
  return out;
}

// "T x world = 64 x 4 = 256" (--tp 1) or "T x world / tp = 64 x 4 / 2 = 128 (--tp 2)", for each mesh tried.
std::string multiples_text(const std::vector<int>& tps, const MemPlanInput& b) {
  std::string s;
  for (size_t i = 0; i < tps.size(); i++) {
    const int64_t tokens = (int64_t)b.T * (b.world / tps[i]);
    s += i ? ", or " : "";
    s += tps[i] == 1 ? str("T x world = ", b.T, " x ", b.world, " = ", tokens)
                     : str("T x world / tp = ", b.T, " x ", b.world, " / ", tps[i], " = ", tokens, " (--tp ", tps[i], ")");
  }
  return s;
}

// The meshes whose data-parallel ranks can each take whole sequences of the global batch.
std::vector<MeshSpace> meshes(const PlanRequest& rq, int R) {
  const MemPlanInput& b = rq.base;
  const std::vector<int> tps = tp_sizes(rq, R);
  std::vector<MeshSpace> out;
  int64_t past_limit = 0;  // the fewest sequences per rank of a mesh past gpt's limit
  for (int T : tps) {
    const int64_t seq_tokens = (int64_t)b.T * (b.world / T);
    if (rq.total_batch < seq_tokens || rq.total_batch % seq_tokens != 0) continue;
    if (rq.total_batch / seq_tokens > (1 << 20)) {
      if (!past_limit) past_limit = rq.total_batch / seq_tokens;
      continue;
    }
    MeshSpace m;
    m.tp = T;
    m.dp = b.world / T;
    m.seqs_per_rank = (int)(rq.total_batch / seq_tokens);
    out.push_back(m);
  }
  GPT_CHECK(!out.empty() || !past_limit, "--total-batch ", rq.total_batch, ": ", past_limit,
            " sequences per rank per step is past the 2^20 gpt accepts");
  const bool only_one = tps.size() == 1 && tps[0] == 1 && !rq.pins.tp;
  GPT_CHECK(!out.empty(), "--total-batch ", rq.total_batch, ": must be a positive multiple of ", multiples_text(tps, b),
            " (every data-parallel rank takes whole sequences)",
            only_one ? str("; no --tp > 1 divides the model's ", b.cfg.num_heads, " heads, the padded vocabulary ",
                           b.cfg.padded_vocab_size, " and --world ", b.world, " within a node of ", R, " ranks")
                     : std::string());
  return out;
}

// Pinned -B: the meshes whose data-parallel ranks' sequences it divides.
void keep_meshes_of_pinned_B(const PlanRequest& rq, std::vector<MeshSpace>& ms) {
  if (!rq.pins.B) return;
  const int B = *rq.pins.B;
  std::string each;
  for (const MeshSpace& m : ms) each += str(each.empty() ? "" : ", ", m.seqs_per_rank, " (--tp ", m.tp, ")");
  const std::vector<MeshSpace> all = ms;
  ms.erase(std::remove_if(ms.begin(), ms.end(), [&](const MeshSpace& m) { return m.seqs_per_rank % B != 0; }),
           ms.end());
  if (all.size() == 1)
    GPT_CHECK(!ms.empty(), "-B ", B, ": does not divide the ", all[0].seqs_per_rank,
              " sequences each rank takes per step (--total-batch ", rq.total_batch, " / (T x world",
              all[0].tp > 1 ? " / tp" : "", "))");
  GPT_CHECK(!ms.empty(), "-B ", B, ": does not divide the sequences each data-parallel rank takes per step in any mesh: ",
            each);
}

}  // namespace

bool sequence_parallel_fits(int tp, int B, int T) { return tp > 1 && ((int64_t)B * T) % tp == 0; }

PlanSpace make_plan_space(const PlanRequest& rq) {
  const MemPlanInput& b = rq.base;
  const PlanPins& p = rq.pins;
  PlanSpace s;
  s.ranks_per_node = ranks_per_node(rq);
  s.meshes = meshes(rq, s.ranks_per_node);
  keep_meshes_of_pinned_B(rq, s.meshes);
  for (MeshSpace& m : s.meshes) {
    m.sps = m.tp == 1 ? std::vector<bool>{false} : pinned_or(p.sequence_parallel, {true, false});
    m.strategies = strategies(p, m.dp);
    m.wraps = pinned_or(p.wrap, wraps(b.cfg.num_layers, m.tp));
    std::vector<int> Bs;
    for (int B = 1; B <= m.seqs_per_rank; B++)
      if (m.seqs_per_rank % B == 0) Bs.push_back(B);
    m.Bs = pinned_or(p.B, Bs);
    m.reduces = pinned_or(p.reduce, m.dp > 1 ? std::vector<DType>{DType::F32, DType::BF16} : std::vector<DType>{DType::F32});
    m.no_syncs = pinned_or(p.no_sync, m.dp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false});
  }
  const int L = b.cfg.num_layers;
  std::vector<RecomputePolicy> rc = {RecomputePolicy::parse("none"), RecomputePolicy::parse("selective")};
  for (int k : {4, 2})
    if (k < L) rc.push_back(RecomputePolicy::parse(str("every:", k)));
  rc.push_back(RecomputePolicy::parse("full"));
  s.recomputes = pinned_or(p.recompute, rc);
  std::vector<OffloadSet> off = {OffloadSet{}};
  if (rq.hw->kind != "cpu")
    for (const char* o : {"activations", "optimizer", "optimizer,activations", "params", "params,activations"})
      off.push_back(OffloadSet::parse(o));
  s.offloads = pinned_or(p.offload, off);
  s.coarsest_wrap = p.wrap ? *p.wrap : wraps(L, 1).back();
  s.slots = pinned_or(p.gather_slots, {1, 2, 3});
  return s;
}

}  // namespace gpt
