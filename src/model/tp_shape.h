// How a tensor-parallel group splits the model, as the layout needs it: the group's size T and this rank's
// place in it, and how each tensor is split (TpSplit). The collectives the split needs are the model's
// (tensor_parallel.h); what each tensor's split is, and why, is Layout's (layout.cpp: add_block).
#pragma once
#include <string>

namespace gpt {

// --tp T and --sequence-parallel on|off.
struct TpOptions {
  int size = 1;                    // T: ranks per tensor-parallel group (consecutive ranks, inside a node)
  bool sequence_parallel = false;  // activations between the products split along the rows (on when T > 1)
  // --tp and --sequence-parallel (on, off, or "" for the default); throws naming the flag.
  static TpOptions parse(int size, const std::string& sequence_parallel);
  bool operator==(const TpOptions& o) const { return size == o.size && sequence_parallel == o.sequence_parallel; }
  bool operator!=(const TpOptions& o) const { return !(*this == o); }
  // Rows of the (N, C) activations a rank holds between the products: N / T with sequence parallelism, else N.
  int local_rows(int N) const { return sequence_parallel ? N / size : N; }
};

// This rank's place in its tensor-parallel group of `size` consecutive ranks (size 1: no tensor parallelism).
struct TpShape {
  int size = 1;
  int rank = 0;
  bool operator==(const TpShape& o) const { return size == o.size && rank == o.rank; }
};

// How the group splits one tensor over its ranks:
//   none  every rank holds all of it (layernorms, wpe, the row-parallel products' biases)
//   rows  by rows: rank t holds rows [t R/T, (t+1) R/T) of each of the tensor's `parts` row blocks
//         (column-parallel products split their outputs: qkvw and qkvb in 3 blocks, q k v, so that each rank
//         has whole heads of each; fcw, fcb; and the vocabulary rows of wte)
//   cols  by columns: rank t holds columns [t C/T, (t+1) C/T) of every row (row-parallel products split their
//         inputs: attprojw, fcprojw)
enum class TpSplit { none, rows, cols };

}  // namespace gpt
