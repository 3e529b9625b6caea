// See tensor_parallel.h. Every collective is started and waited for at once: on GPU ranks (NCCL) the wait
// makes the compute stream wait on the device, never the host; on CPU ranks (MPI) the host waits.
#include "src/model/tensor_parallel.h"

#include "src/core/check.h"
#include "src/util/trace.h"

namespace gpt {

namespace {
// A collective's span on the "tp collectives" track, from its start to its wait: host time, so recorded only
// where the engine's slot tracks are (not on GPU ranks, whose comm stream's track shows it as it ran).
class TpSpan {
 public:
  // kind + label names the span, built only while recording (a plan search runs this millions of times)
  TpSpan(const char* kind, const std::string& label) : live_(trace::on() && trace::slot_tracks_on()) {
    if (live_) trace::begin(trace::kTpComm, kind + label, "comm");
  }
  ~TpSpan() {
    if (live_) trace::end(trace::kTpComm);
  }

 private:
  bool live_;
};
}  // namespace

TpOptions TpOptions::parse(int size, const std::string& sp) {
  GPT_CHECK(size >= 1, "--tp must be >= 1, got ", size);
  GPT_CHECK(sp.empty() || sp == "on" || sp == "off", "--sequence-parallel: expected on or off, got '", sp, "'");
  GPT_CHECK(!(sp == "on" && size == 1), "--sequence-parallel on needs --tp > 1 (one rank has no rows to split)");
  TpOptions o;
  o.size = size;
  o.sequence_parallel = size > 1 && sp != "off";
  return o;
}

TensorParallel::TensorParallel(Communicator& group, bool sequence_parallel, DType compute)
    : group_(group), sp_(sequence_parallel), dt_(compute) {
  GPT_CHECK(!sp_ || group_.world() > 1, "tensor parallel: sequence parallelism needs a group of more than one rank");
}

const void* TensorParallel::gather_rows(const void* mine, void* full, int N, int C, const std::string& label) {
  if (!sp_) return mine;
  TpSpan span("all-gather ", label);
  group_.set_label(label);
  group_.all_gather_async(full, mine, (size_t)local_rows(N) * C, dt_)->wait();
  return full;
}

void* TensorParallel::sum_rows(void* partial, void* mine, int N, int C, const std::string& label) {
  TpSpan span(sp_ ? "reduce-scatter " : "all-reduce ", label);
  group_.set_label(label);
  if (!sp_) {
    group_.all_reduce_async(partial, (size_t)N * C, dt_, ReduceOp::sum)->wait();
    return partial;
  }
  group_.reduce_scatter_async(mine, partial, (size_t)local_rows(N) * C, dt_, ReduceOp::sum)->wait();
  return mine;
}

void TensorParallel::sum_all(void* x, size_t count, const std::string& label) {
  TpSpan span("all-reduce ", label);
  group_.set_label(label);
  group_.all_reduce_async(x, count, dt_, ReduceOp::sum)->wait();
}

void TensorParallel::gather(void* out, const void* in, size_t count, const std::string& label) {
  TpSpan span("all-gather ", label);
  group_.set_label(label);
  group_.all_gather_async(out, in, count, dt_)->wait();
}

void TensorParallel::sum_grads(float* grads, size_t n, const std::string& label) {
  TpSpan span("all-reduce ", label);
  group_.set_label(label);
  group_.all_reduce_async(grads, n, DType::F32, ReduceOp::sum)->wait();
}

void TensorParallel::max_f32(float* x, size_t n, const std::string& label) {
  TpSpan span("all-reduce max ", label);
  group_.set_label(label);
  group_.all_reduce_async(x, n, DType::F32, ReduceOp::max)->wait();
}

void TensorParallel::sum_f32(float* x, size_t n, const std::string& label) {
  TpSpan span("all-reduce ", label);
  group_.set_label(label);
  group_.all_reduce_async(x, n, DType::F32, ReduceOp::sum)->wait();
}

}  // namespace gpt
