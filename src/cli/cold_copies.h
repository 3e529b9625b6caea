// Cold weights for the calibration's products (src/cli/calibrate.cpp): a point cycles through enough copies of
// a product's weight that every call reads them from memory, as a training step does (a unit's weights were
// last touched a micro-step or a pass ago, every other unit's tensors in between), and the copies come from
// slabs lent again from point to point, so that setting a point up does not fault in fresh memory each time.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace gpt {

// Bytes of a sysfs cache size ("32768K", "1M", "512"); 0 when it is not one.
size_t cache_size_bytes(const std::string& text);

// The last-level cache one core reads through: the highest level of cpu0's data or unified caches in sysfs.
// Not sysconf's, which is the whole package's on some (256 MiB for an EPYC whose cores each see a 32 MiB
// slice); sysconf's where sysfs does not say; 0 where neither does.
size_t last_level_cache_bytes();

// How many copies of a weight of `weight_bytes` span twice the last-level cache (64 MiB where the OS does
// not say), at least 1 and at most 64.
int cold_copies(size_t weight_bytes);

// `copies` buffers of n floats each, laid end to end in one slab: at(i) is copy i mod copies.
struct ColdCopies {
  std::shared_ptr<std::vector<float>> slab;  // (copies, n) used of it
  size_t n = 0;
  int copies = 0;
  float* at(size_t i) const { return slab->data() + (i % (size_t)copies) * n; }
};

// `copies` buffers of n floats, every one v. The slab is one no live ColdCopies holds, where one is large
// enough (the smallest such), refilled; else a new one, half again the size asked for, so that the next
// points, of about the same bytes (cold_copies), fit in it; the free slabs too small are dropped then. Fresh
// buffers for every point faulted in up to twice the last-level cache each time, which was half of a quick
// calibration's time (none of it timed). Two live ColdCopies never share a slab, so each one's copies stay
// cold to the other's calls.
ColdCopies cold_buffers(int copies, size_t n, float v);

}  // namespace gpt
