// Flag parsing for FsdpOptions.
#include "src/fsdp/options.h"

#include "src/core/check.h"

namespace gpt {

EngineKind FsdpOptions::parse_engine(const std::string& s) {
  if (s == "full") return EngineKind::full;
  if (s == "naive") return EngineKind::naive;
  fail("--engine: expected full or naive, got '", s, "'");
}

const char* FsdpOptions::name(EngineKind e) { return e == EngineKind::naive ? "naive" : "full"; }

ShardStrategy FsdpOptions::parse_strategy(const std::string& s) {
  if (s == "full") return ShardStrategy::full;
  if (s == "grad_op") return ShardStrategy::grad_op;
  if (s == "none") return ShardStrategy::none;
  if (s == "hybrid") return ShardStrategy::hybrid;
  fail("--shard: expected full, grad_op, none or hybrid, got '", s, "'");
}

OffloadMode FsdpOptions::parse_offload(const std::string& s) {
  if (s == "none") return OffloadMode::none;
  if (s == "optimizer") return OffloadMode::optimizer;
  if (s == "params") return OffloadMode::params;
  fail("--offload: expected none, optimizer or params, got '", s, "'");
}

DType FsdpOptions::parse_reduce_dtype(const std::string& s) {
  if (s == "fp32") return DType::F32;
  if (s == "bf16") return DType::BF16;
  fail("--reduce-dtype: expected fp32 or bf16, got '", s, "'");
}

const char* FsdpOptions::name(ShardStrategy s) {
  switch (s) {
    case ShardStrategy::full: return "full";
    case ShardStrategy::grad_op: return "grad_op";
    case ShardStrategy::none: return "none";
    case ShardStrategy::hybrid: return "hybrid";
  }
  return "?";
}

const char* FsdpOptions::name(OffloadMode m) {
  switch (m) {
    case OffloadMode::none: return "none";
    case OffloadMode::optimizer: return "optimizer";
    case OffloadMode::params: return "params";
  }
  return "?";
}

const char* FsdpOptions::reduce_dtype_name(DType d) { return d == DType::F32 ? "fp32" : "bf16"; }

}  // namespace gpt
