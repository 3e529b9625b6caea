// The SIMT emulator's executor (simt.h): a launch's configuration is checked at the call, then the grid is
// queued on its stream (streams.h). It runs its blocks one after another; a block's threads are fibers on
// the host thread. Between two __syncthreads each warp in turn runs as far as it can (its lanes
// in order, each up to its next barrier; a warp barrier such as __syncwarp, a shuffle or a WMMA call is
// passed once all the warp's lanes wait there), then the next warp; once every live thread waits at
// __syncthreads, all go on. Any other state is a barrier that would hang or misbehave on a GPU (a warp
// barrier naming a lane that returned or waits at __syncthreads) and fails the launch with a description.
// Threads that returned count as gone, as on a GPU. A fiber switch is six saved registers and a stack
// pointer (simt_switch_stack below, x86-64): launches start millions of CUDA threads, and ucontext's
// switches cost a system call each.
#include <sys/mman.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/simt/simt.h"
#include "tests/simt/state.h"
#include "tests/simt/streams.h"

// switch_stack(save, to): saves the callee-saved registers on the current stack, stores its pointer in *save,
// then continues on the stack `to` (prepared by start_fibers, or saved by an earlier switch_stack).
extern "C" void simt_switch_stack(void** save, void* to);
asm(R"(
  .text
  .globl simt_switch_stack
  .type simt_switch_stack, @function
simt_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size simt_switch_stack, .-simt_switch_stack
)");

namespace simt {
namespace {

constexpr size_t kStackBytes = 256 << 10;  // per fiber; a guard page below each
constexpr size_t kFenceBytes = 256;        // after the dynamic shared memory, checked after each block
constexpr unsigned char kFence = 0xA5;
constexpr int kMaxWarps = 32;
constexpr size_t kSlotBytes = 16;

struct Fault {
  std::string what;
  cudaError_t code = cudaErrorLaunchFailure;  // a bad configuration: cudaErrorInvalidConfiguration
};

enum class Wait { run, block, warp, done };

struct Fiber {
  void* sp = nullptr;     // saved stack pointer while switched out
  char* stack = nullptr;  // kStackBytes, growing down from stack + kStackBytes
  ThreadPlace place{};
  Wait wait = Wait::run;
  unsigned mask = 0;         // the lanes the warp barrier it waits in names
  uint64_t warp_events = 0;  // warp barriers passed (its parity picks the exchange slots)
};

struct Block {
  std::vector<Fiber> fibers;              // stacks kept between launches
  void* scheduler = nullptr;              // the scheduler's saved stack pointer
  const void* scheduler_stack = nullptr;  // its stack's bounds (for AddressSanitizer's fiber switches)
  size_t scheduler_stack_bytes = 0;
  int current = -1;
  int live = 0;
  const std::function<void()>* body = nullptr;
  std::string fault;  // set by a fiber, read by the scheduler
  std::vector<unsigned char> smem;
  unsigned char* smem_base = nullptr;
  size_t smem_bytes = 0;
  std::array<std::array<std::array<unsigned char, kSlotBytes>, 32>, kMaxWarps> slots[2];
};

thread_local Block* g_block = nullptr;

char* new_stack() {
  const size_t page = 4096;
  void* p =
      mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  mprotect(p, page, PROT_NONE);  // a fiber overflowing its stack faults here instead of corrupting another
  return static_cast<char*>(p) + page;
}

Fiber& me() { return g_block->fibers[static_cast<size_t>(g_block->current)]; }

// Where every fiber starts; it never returns: once the thread is done it switches back for good.
// The two directions of a switch. Under AddressSanitizer (GPT_SIMT_ASAN) it is told which stack becomes
// live, so its checks of stack memory follow the fibers; elsewhere these are the bare switch.
void to_fiber(Block& b, Fiber& f) {
#ifdef __SANITIZE_ADDRESS__
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
  simt_switch_stack(&b.scheduler, f.sp);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  simt_switch_stack(&b.scheduler, f.sp);
#endif
}
void to_scheduler(Block& b, Fiber& f, bool for_good) {
#ifdef __SANITIZE_ADDRESS__
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(for_good ? nullptr : &fake, b.scheduler_stack, b.scheduler_stack_bytes);
  simt_switch_stack(&f.sp, b.scheduler);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  (void)for_good;
  simt_switch_stack(&f.sp, b.scheduler);
#endif
}

[[noreturn]] void fiber_entry() {
  Block& b = *g_block;
#ifdef __SANITIZE_ADDRESS__
  __sanitizer_finish_switch_fiber(nullptr, &b.scheduler_stack, &b.scheduler_stack_bytes);
#endif
  try {
    (*b.body)();
  } catch (const Fault& f) {
    if (b.fault.empty()) b.fault = f.what;
  } catch (const std::exception& e) {
    if (b.fault.empty()) b.fault = std::string("exception in a kernel: ") + e.what();
  } catch (...) {
    if (b.fault.empty()) b.fault = "exception in a kernel";
  }
  Fiber& f = me();
  f.wait = Wait::done;
  b.live--;
  to_scheduler(b, f, true);
  __builtin_unreachable();
}

// A fresh stack that starts fiber_entry when switched to: the six registers switch_stack pops, then
// fiber_entry as its return address, then a dummy return address of fiber_entry's own (so the stack is
// aligned as at a call: 8 below a 16-byte boundary).
void* fresh_stack(char* stack) {
  auto* top = reinterpret_cast<uintptr_t*>(reinterpret_cast<uintptr_t>(stack + kStackBytes) & ~uintptr_t{15});
  top[-1] = 0;
  top[-2] = reinterpret_cast<uintptr_t>(&fiber_entry);
  for (int r = 3; r <= 8; r++) top[-r] = 0;
  return top - 8;
}

void wait_here(Wait w, unsigned mask) {
  Fiber& f = me();
  f.wait = w;
  f.mask = mask;
  to_scheduler(*g_block, f, false);
}

std::string describe(const Fiber& f) {
  const ThreadPlace& p = f.place;
  return "thread (" + std::to_string(p.thread.x) + "," + std::to_string(p.thread.y) + "," + std::to_string(p.thread.z) +
         ") of block (" + std::to_string(p.block.x) + "," + std::to_string(p.block.y) + "," +
         std::to_string(p.block.z) + ")";
}

// Releases warp w if its lanes wait at a warp barrier (true), once none of them can run. Faults on a warp
// barrier that a lane of the warp cannot reach: it returned, or it waits at __syncthreads.
bool release_warp(Block& b, int w, int threads) {
  const int first = w * 32, last = std::min(threads, first + 32);
  int waiting = -1;
  for (int i = first; i < last; i++)
    if (b.fibers[i].wait == Wait::warp) waiting = i;
  if (waiting < 0) return false;
  if (b.fibers[waiting].mask != 0xffffffffu) throw Fault{"a warp operation with a partial lane mask (not emulated)"};
  for (int i = first; i < last; i++) {
    const Fiber& f = b.fibers[i];
    if (f.wait == Wait::done) throw Fault{"a warp barrier or shuffle names " + describe(f) + ", which has returned"};
    if (f.wait == Wait::block)
      throw Fault{describe(f) + " waits at __syncthreads while its warp waits at a warp barrier"};
    if (f.warp_events != b.fibers[waiting].warp_events)
      throw Fault{"the lanes of a warp passed different numbers of warp barriers (diverged)"};
  }
  for (int i = first; i < last; i++) b.fibers[i].wait = Wait::run, b.fibers[i].warp_events++;
  return true;
}

// Runs warp w's lanes (in lane order, or backward; each up to its next barrier) through every warp barrier
// it can pass, until they all wait at __syncthreads or have returned.
void run_warp(Block& b, int w, int threads, bool lanes_backward) {
  const int first = w * 32, last = std::min(threads, first + 32);
  do {
    for (int k = first; k < last; k++) {
      const int i = lanes_backward ? first + last - 1 - k : k;
      if (b.fibers[i].wait != Wait::run) continue;
      b.current = i;
      to_fiber(b, b.fibers[i]);
      if (!b.fault.empty()) throw Fault{b.fault};
    }
  } while (release_warp(b, w, threads));
}

// Between block barriers each warp runs as far as it can before the next warp starts: a legal GPU schedule,
// and the one that exposes a missing __syncthreads between warps, since a warp then reads shared memory
// other warps have not written yet. Blocks (and consecutive launches) take turns among four orders (warps
// forward or backward, lanes forward or backward), so a reader meets its writer both before and after it.
void run_block(Block& b, int threads, unsigned order) {
  const int warps = (threads + 31) / 32;
  const bool warps_backward = order % 2 == 1, lanes_backward = order / 2 % 2 == 1;
  for (;;) {
    for (int k = 0; k < warps; k++) run_warp(b, warps_backward ? warps - 1 - k : k, threads, lanes_backward);
    if (b.live == 0) return;
    for (int i = 0; i < threads; i++)
      if (b.fibers[i].wait == Wait::block) b.fibers[i].wait = Wait::run;
  }
}

void start_fibers(Block& b, dim3 block_idx, dim3 grid, dim3 block) {
  const int threads = static_cast<int>(block.x * block.y * block.z);
  if (b.fibers.size() < static_cast<size_t>(threads)) b.fibers.resize(threads);
  for (int i = 0; i < threads; i++) {
    Fiber& f = b.fibers[i];
    if (!f.stack && !(f.stack = new_stack())) throw Fault{"out of memory for fiber stacks"};
    f.place.thread = make_uint3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
    f.place.block = make_uint3(block_idx.x, block_idx.y, block_idx.z);
    f.place.block_dim = block;
    f.place.grid_dim = grid;
    f.wait = Wait::run;
    f.warp_events = 0;
    f.sp = fresh_stack(f.stack);
  }
  b.live = threads;
  // Dynamic shared memory starts as NaN bytes (a kernel must write before it reads), fenced at its end.
  std::memset(b.smem_base, 0xFF, b.smem_bytes);
  std::memset(b.smem_base + b.smem_bytes, kFence, kFenceBytes);
}

void check_config(const void* kernel, dim3 grid, dim3 block, size_t smem) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
    throw Fault{"invalid block (" + std::to_string(block.x) + "," + std::to_string(block.y) + "," +
                    std::to_string(block.z) + "): at most 1024 threads",
                cudaErrorInvalidConfiguration};
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
    throw Fault{
        "invalid grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," + std::to_string(grid.z) + ")",
        cudaErrorInvalidConfiguration};
  const size_t allowed = std::max<size_t>(48 << 10, state().max_dynamic_shared(kernel));
  if (smem > allowed)
    throw Fault{std::to_string(smem) + " bytes of dynamic shared memory, more than the " + std::to_string(allowed) +
                    " this kernel may use (above 48 KiB needs cudaFuncSetAttribute)",
                cudaErrorInvalidValue};
}

}  // namespace

const ThreadPlace& here() { return me().place; }

void* dynamic_shared() { return g_block->smem_base; }

void syncthreads() { wait_here(Wait::block, 0); }
void syncwarp(unsigned mask) { wait_here(Wait::warp, mask); }

void warp_exchange(unsigned mask, const void* in, void* out, size_t bytes, int src) {
  if (bytes > kSlotBytes) fault("shuffle of a value wider than 16 bytes");
  Fiber& f = me();
  const int tid = static_cast<int>(g_block->current);
  const int warp = tid / 32, lane = tid % 32;
  if (warp >= kMaxWarps || src < 0 || src >= 32) fault("shuffle source lane out of range");
  auto& slots = g_block->slots[f.warp_events & 1][warp];
  std::memcpy(slots[lane].data(), in, bytes);
  wait_here(Wait::warp, mask);
  if (warp * 32 + src >= static_cast<int>(f.place.block_dim.x * f.place.block_dim.y * f.place.block_dim.z))
    fault("shuffle from a lane the block does not have");
  std::memcpy(out, slots[src].data(), bytes);
}

void fault(const char* what) { throw Fault{what}; }

namespace {

// The grid, block after block, on this thread; a fault becomes the device's error, naming the launch site.
void run_grid(dim3 grid, dim3 block, size_t smem, const std::string& site, const std::function<void()>& body) {
  static thread_local Block b;
  static thread_local unsigned launches = 0;  // consecutive launches of one block start at different orders
  launches++;
  Block* outer = g_block;
  g_block = &b;
  try {
    b.body = &body;
    b.fault.clear();
    b.smem.assign(smem + kFenceBytes + 128, 0);
    b.smem_base =
        reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(b.smem.data()) + 127) & ~uintptr_t{127});
    b.smem_bytes = smem;
    const int threads = static_cast<int>(block.x * block.y * block.z);
    for (unsigned z = 0; z < grid.z; z++)
      for (unsigned y = 0; y < grid.y; y++)
        for (unsigned x = 0; x < grid.x; x++) {
          start_fibers(b, dim3(x, y, z), grid, block);
          run_block(b, threads, launches + x + grid.x * (y + grid.y * z));
          for (size_t i = 0; i < kFenceBytes; i++)
            if (b.smem_base[smem + i] != kFence)
              throw Fault{"a thread of block (" + std::to_string(x) + "," + std::to_string(y) + "," +
                          std::to_string(z) + ") wrote past the end of its dynamic shared memory"};
        }
  } catch (const Fault& f) {
    state().set_fault(f.code, "the kernel launched at " + site + " failed in the SIMT emulator: " + f.what);
#ifdef __SANITIZE_ADDRESS__
    // The block's other fibers stopped mid-kernel: their stacks' sanitizer state starts afresh next launch.
    for (Fiber& fib : b.fibers)
      if (fib.stack) ASAN_UNPOISON_MEMORY_REGION(fib.stack, kStackBytes);
#endif
  }
  g_block = outer;
}

}  // namespace

// GPT_SIMT_FAULT_AT=N: the process's N-th kernel launch faults when it runs, as a GPU kernel's illegal address
// does: the fault is sticky (every later synchronising call and cudaGetLastError return it), so a test can see
// what a run does after a device fault. True for that launch.
bool injected_fault(const std::string& site) {
  static const long at = [] {
    const char* s = std::getenv("GPT_SIMT_FAULT_AT");
    return s ? std::atol(s) : 0L;
  }();
  static std::atomic<long> launches{0};
  if (at <= 0 || ++launches != at) return false;
  std::fprintf(stderr, "[simt] GPT_SIMT_FAULT_AT=%ld: the kernel launched at %s will fault\n", at, site.c_str());
  return true;
}

void launch(const void* kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* file, int line,
            std::function<void()> body) {
  try {
    check_config(kernel, grid, block, smem);
  } catch (const Fault& f) {  // a bad configuration fails the launch call itself, as on a GPU
    state().set_error(f.code, "kernel launch failed in the SIMT emulator: " + f.what);
    return;
  }
  const std::string site = std::string(file) + ":" + std::to_string(line);
  if (injected_fault(site)) {
    enqueue(stream, [site] {
      state().set_fault(cudaErrorIllegalAddress, "the kernel launched at " + site + " faulted (GPT_SIMT_FAULT_AT)",
                        true);
    });
    return;
  }
  enqueue(stream, [=, body = std::move(body)] { run_grid(grid, block, smem, site, body); });
}

}  // namespace simt
