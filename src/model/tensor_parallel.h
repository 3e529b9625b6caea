// Tensor parallelism as the model sees it: Megatron's split of every block over a group of T ranks (the
// layout's TpSplit says which tensor is split how, layout.cpp), and the collectives that split needs, which
// the model issues itself where the math needs them, through this class (as it draws its parameters through
// ParamSource). The FSDP engine shards each rank's local units over its data-parallel group and never sees
// the tensor-parallel one.
//
// The operators, Megatron's f and g (arXiv 1909.08053) and their sequence-parallel forms (arXiv 2205.05198):
//   gather_rows  before a column-parallel product (qkv, fc, the LM head), which reads the whole input (N, C):
//                with sequence parallelism each rank holds N/T rows between the products, so this is an
//                all-gather of the rows; without, every rank holds all N rows already, and it is nothing
//   sum_rows     after a row-parallel product (attproj, fcproj), whose output on each rank is a partial sum
//                over its slice of the inputs: the sum over the group, each rank keeping its N/T rows (a
//                reduce-scatter) with sequence parallelism, all N rows (an all-reduce) without
// Each is the other's conjugate in backward: the gradient of gather_rows' input is sum_rows of the gradient of
// its output, and the gradient of sum_rows' input is gather_rows of its output's. So per block and
// micro-step, forward and backward each move 2 all-reduces of (N, C) without sequence parallelism, or the
// same bytes as 2 all-gathers and 2 reduce-scatters with it; a recompute repeats forward's.
// Parameters every rank holds whole (Layout::replicated_span) get partial gradients wherever their inputs are
// a rank's own rows: with sequence parallelism, the layernorms, the row-parallel biases and wpe, summed over
// the group by sum_grads before the engine reduces them; without, every rank computes the same full gradient.
// The vocab-parallel embedding and loss use max_f32 and sum_f32 on per-row statistics (gpt_tp.cpp).
#pragma once
#include <cstddef>
#include <string>

#include "src/core/dtype.h"
#include "src/dist/communicator.h"
#include "src/model/tp_shape.h"

namespace gpt {

class TensorParallel {
 public:
  // group: the T ranks of this rank's tensor-parallel group; compute: the dtype activations travel in.
  TensorParallel(Communicator& group, bool sequence_parallel, DType compute);
  int size() const { return group_.world(); }
  int rank() const { return group_.rank(); }
  bool sequence_parallel() const { return sp_; }
  Communicator& group() { return group_; }
  // Rows of the (N, C) activations this rank holds between the products (N / T with sequence parallelism,
  // else N), and the first of them in the (B, T) grid.
  int local_rows(int N) const { return sp_ ? N / size() : N; }
  int first_row(int N) const { return sp_ ? rank() * (N / size()) : 0; }

  // (N, C) whole rows from this rank's (local_rows(N), C): all-gathered into `full`, or `mine` itself.
  const void* gather_rows(const void* mine, void* full, int N, int C, const std::string& label);
  // The sum over the group of `partial` (N, C): this rank's rows of it reduce-scattered into `mine`, or all of
  // them all-reduced in place. Returns where the (local_rows(N), C) result is.
  void* sum_rows(void* partial, void* mine, int N, int C, const std::string& label);
  // The sum over the group, in place, of `count` activations on every rank's whole rows (sampling's few rows:
  // an all-reduce, whether or not training splits the rows).
  void sum_all(void* x, size_t count, const std::string& label);
  // out (size * count) = every rank's `in` (count) one after another (sampling's logits, in vocabulary order).
  void gather(void* out, const void* in, size_t count, const std::string& label);
  // The sum over the group, in place, of fp32 gradients (a replicated span's partial gradients).
  void sum_grads(float* grads, size_t n, const std::string& label);
  // Per-row statistics of the vocab-parallel loss, fp32, in place.
  void max_f32(float* x, size_t n, const std::string& label);
  void sum_f32(float* x, size_t n, const std::string& label);

 private:
  Communicator& group_;
  bool sp_;
  DType dt_;
};

}  // namespace gpt
