// The engine enforces its own call order (fsdp/engine.h): each call out of order throws, naming the unit,
// on every rank alike (the checks run before any collective, so no rank is left waiting). And it keeps
// itself consistent without help: forward-only passes (eval, sample) leave it in a state the next step
// starts from, and loading parameters drops gathered copies of the old ones.
#include <gtest/gtest.h>

#include "src/train/generate.h"
#include "tests/common/error_of.h"
#include "tests/common/tiny_config.h"
#include "tests/fsdp/fsdp_run.h"
#include "tests/fsdp/mpi_world.h"

namespace gpt::test {
namespace {

RunSpec spec(ShardStrategy st, OffloadMode off = OffloadMode::none, int gather_slots = 2) {
  RunSpec s;
  s.cfg = tiny_config(2, 2, 32, 8, 61);
  s.global_seqs = 12;
  s.fsdp.strategy = st;
  s.fsdp.offload = off;
  s.fsdp.gather_slots = gather_slots;
  return s;
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

TEST(EngineOrder, PassOrderComesFromTheLayout) {
  // the root (embeddings and the final layernorm), then the blocks; backward the root, then the blocks reversed
  const Layout l(tiny_config(3, 2, 32, 8, 61));
  EXPECT_EQ(l.pass_order(Pass::forward), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(l.pass_order(Pass::backward), (std::vector<int>{0, 3, 2, 1}));
  const Layout two(tiny_config(3, 2, 32, 8, 61), WrapPolicy::parse("blocks:2"));
  EXPECT_EQ(two.pass_order(Pass::forward), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(two.pass_order(Pass::backward), (std::vector<int>{0, 2, 1}));
}

TEST(EngineOrder, CallsOutOfOrderThrowNamingTheUnit) {
  for (ShardStrategy st : {ShardStrategy::full, ShardStrategy::none}) {
    ShardedRun run(spec(st), world());
    ShardingEngine& e = *run.engine;  // the full engine (RunSpec default), which checks the order
    const std::string what = FsdpOptions::name(st);
    EXPECT_TRUE(has(error_of([&] { e.acquire(2, Pass::forward); }), "acquire(block1, forward) out of order: expected embed"))
        << what;
    EXPECT_TRUE(has(error_of([&] { e.release(1, Pass::forward); }), "release(block0, forward) of a unit not acquired"))
        << what;
    e.acquire(0, Pass::forward);
    EXPECT_TRUE(has(error_of([&] { e.acquire(2, Pass::forward); }), "expected block0")) << what;
    EXPECT_TRUE(has(error_of([&] { e.grad_buffer(0); }), "grad_buffer(embed) outside its backward")) << what;
    EXPECT_TRUE(has(error_of([&] { e.grad_ready(0); }), "grad_ready(embed) without a grad_buffer")) << what;
    EXPECT_TRUE(has(error_of([&] { e.begin_step(); }), "begin_step while unit embed is held")) << what;
    EXPECT_TRUE(has(error_of([&] { e.acquire(0, Pass::forward); }), "while it is still held")) << what;
    e.release(0, Pass::forward);
    e.begin_step();  // a step starts cleanly after the abandoned pass
    EXPECT_NO_THROW(run.train_step()) << what;
  }
}

// With states offloaded, gradients travel through a slot and a reduction even on one rank, so an update
// before finish_backward has something in flight to be refused for.
TEST(EngineOrder, UpdateBeforeFinishBackwardThrows) {
  ShardedRun run(spec(ShardStrategy::full, OffloadMode::optimizer), world());
  ShardingEngine& e = *run.engine;
  e.begin_step();
  e.begin_micro_step(true);
  const int B = 12 / world().world(), T = run.spec.T;
  std::vector<int> in((size_t)B * T, 1), tg(in.size(), 2);
  run.model->forward(in.data(), tg.data(), B, T, e);
  run.model->backward(1.0f / (B * T), e);
  EXPECT_TRUE(has(error_of([&] { e.update_params([](Backend&, const ShardSegment&) {}); }), "finish_backward first"));
  e.finish_backward();
  EXPECT_NO_THROW(e.update_params([](Backend&, const ShardSegment&) {}));
}

// Evaluation between steps needs no call to the engine: the run with forward-only passes interleaved trains
// exactly what the run without them trains, and a step's traffic is the same with or without them; also
// with no prefetch (--gather-slots 1) and with prefetches that reach the pass's end (4 slots, 4 units).
TEST(EngineOrder, ForwardOnlyPassesBetweenStepsChangeNothing) {
  struct Case {
    ShardStrategy st;
    int slots;
  };
  for (const Case& c : {Case{ShardStrategy::full, 2}, Case{ShardStrategy::grad_op, 2}, Case{ShardStrategy::none, 2},
                        Case{ShardStrategy::full, 1}, Case{ShardStrategy::full, 4}, Case{ShardStrategy::grad_op, 4}}) {
    const ShardStrategy st = c.st;
    const RunSpec sp = spec(st, OffloadMode::none, c.slots);
    ShardedRun plain(sp, world()), with_eval(sp, world());
    const int B = 12 / world().world(), T = plain.spec.T;
    std::vector<int> in((size_t)B * T, 3), tg(in.size(), 4);
    for (int s = 0; s < 3; s++) {
      plain.engine->begin_traffic_step();
      const float a = plain.train_step();
      const int64_t plain_bytes = plain.engine->traffic_step().total_sent();
      with_eval.model->forward(in.data(), tg.data(), B, T, *with_eval.engine);  // eval
      Rng rng(s);  // a sample: the prompt through the key/value cache, then one row per token
      EXPECT_EQ(generate(*with_eval.model, *with_eval.engine, {1, 2, 3}, 6, SampleParams(), rng).size(), 6u);
      with_eval.engine->begin_traffic_step();
      const float b = with_eval.train_step();
      EXPECT_EQ(a, b) << FsdpOptions::name(st) << " K=" << c.slots << " step " << s + 1;
      EXPECT_EQ(with_eval.engine->traffic_step().total_sent(), plain_bytes)
          << FsdpOptions::name(st) << " K=" << c.slots;
    }
    EXPECT_EQ(plain.params(), with_eval.params()) << FsdpOptions::name(st) << " K=" << c.slots;
  }
}

// An inference engine (what eval and sample use) sharded over the ranks: parameter shards and gather slots
// only, no gradient state or gradient slots; sampling through it gathers the same parameters, so it draws
// the same tokens as a training engine; a training step on it throws on every rank alike.
TEST(EngineOrder, InferenceEngineShardsParametersOnly) {
  RunSpec s = spec(ShardStrategy::full);
  ShardedRun train(s, world());
  s.fsdp.inference = true;
  ShardedRun infer(s, world());
  const MemoryLedger& led = infer.be->ledger();
  for (MemCat cat : {MemCat::grad_shard, MemCat::optim_state, MemCat::gathered_grad})
    EXPECT_EQ(led.current(MemDomain::device, cat), 0) << (int)cat;
  EXPECT_EQ(led.current(MemDomain::device, MemCat::param_shard), 4 * infer.engine->geometry().shard_elems());
  Rng r1(9), r2(9);
  const std::vector<int> a = generate(*train.model, *train.engine, {1, 2, 3}, 7, SampleParams(), r1);
  const std::vector<int> b = generate(*infer.model, *infer.engine, {1, 2, 3}, 7, SampleParams(), r2);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(has(error_of([&] { infer.train_step(); }), "inference engine"));
}

// Loading parameters while a unit's old parameters sit gathered (the root unit after a forward) replaces
// them: the next forward sees the loaded values.
TEST(EngineOrder, LoadingParametersDropsStaleGathers) {
  ShardedRun a(spec(ShardStrategy::full), world()), b(spec(ShardStrategy::full), world());
  const int B = 12 / world().world(), T = a.spec.T;
  std::vector<int> in((size_t)B * T, 5), tg(in.size(), 6);
  b.train_step();  // b's parameters now differ from a's
  a.model->forward(in.data(), tg.data(), B, T, *a.engine);  // embed stays gathered in a's root slot
  for (int u = 0; u < a.engine->num_units(); u++) {
    const std::vector<float> full = b.engine->gather_unit_to_host(u);
    a.engine->set_unit_from_host(u, full.data());
  }
  EXPECT_EQ(a.model->forward(in.data(), tg.data(), B, T, *a.engine),
            b.model->forward(in.data(), tg.data(), B, T, *b.engine));
}

}  // namespace
}  // namespace gpt::test
