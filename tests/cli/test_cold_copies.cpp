// The calibration's cold weights (src/cli/cold_copies.h): sysfs cache sizes read as bytes, enough copies to
// span twice the cache, and slabs lent again only once no live point holds them, refilled every time.
#include <gtest/gtest.h>

#include <set>

#include "src/cli/cold_copies.h"

namespace gpt {
namespace {

TEST(ColdCopies, CacheSizesReadAsBytes) {
  EXPECT_EQ(cache_size_bytes("32768K"), 32768u * 1024);
  EXPECT_EQ(cache_size_bytes("2M"), 2u << 20);
  EXPECT_EQ(cache_size_bytes("512"), 512u);
  EXPECT_EQ(cache_size_bytes(""), 0u);
  EXPECT_EQ(cache_size_bytes("big"), 0u);
  EXPECT_EQ(cache_size_bytes("32X"), 0u);
}

TEST(ColdCopies, CopiesSpanTwiceTheCacheWithinOneAndSixtyFour) {
  const size_t llc = last_level_cache_bytes();
  const double span = llc > 0 ? 2.0 * (double)llc : 64.0 * (1 << 20);
  const size_t w = 1 << 20;
  EXPECT_GE(cold_copies(w) * (double)w, std::min(span, 64.0 * w));
  EXPECT_LT((cold_copies(w) - 1) * (double)w, span);
  EXPECT_EQ(cold_copies(1), 64);
  EXPECT_EQ(cold_copies((size_t)1 << 40), 1);
}

TEST(ColdCopies, LiveSlabsAreNeverSharedAndFreeOnesAreRefilled) {
  std::set<const float*> live;
  {
    const ColdCopies a = cold_buffers(4, 1000, 0.25f), b = cold_buffers(4, 1000, 0.5f);
    EXPECT_NE(a.slab, b.slab);
    EXPECT_EQ(a.at(5), a.at(1));  // copy 5 is copy 1
    EXPECT_EQ(a.at(1) - a.at(0), 1000);
    for (size_t i = 0; i < 4000; i++) ASSERT_EQ(a.slab->at(i), 0.25f);
    a.at(3)[7] = 9;
    live = {a.slab->data(), b.slab->data()};
  }
  // Both free now: the next points take them again (no new memory), each filled with its own value.
  const ColdCopies c = cold_buffers(2, 2000, 0.0f), d = cold_buffers(8, 500, 1.0f);
  EXPECT_EQ(live.count(c.slab->data()) + live.count(d.slab->data()), 2u);
  for (size_t i = 0; i < 4000; i++) ASSERT_EQ(c.slab->at(i), 0.0f);
  for (size_t i = 0; i < 4000; i++) ASSERT_EQ(d.slab->at(i), 1.0f);
  // One larger than either: a new slab with room for the next of about its size.
  const ColdCopies e = cold_buffers(4, 1500, 2.0f);
  EXPECT_EQ(live.count(e.slab->data()), 0u);
  EXPECT_GE(e.slab->size(), 6000u + 3000u);
}

}  // namespace
}  // namespace gpt
