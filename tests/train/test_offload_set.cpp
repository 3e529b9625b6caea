// The --offload list (src/fsdp/offload_set.h): every accepted spelling and what it sets, its round trip
// through str(), and every malformed list refused with one line naming the flag.
#include <gtest/gtest.h>

#include "src/core/check.h"
#include "src/fsdp/offload_set.h"

namespace gpt {
namespace {

TEST(OffloadSet, ParsesEveryListAndRoundTrips) {
  struct Case { const char* flag; OffloadMode states; bool activations; const char* canonical; };
  const Case cases[] = {{"none", OffloadMode::none, false, "none"},
                        {"optimizer", OffloadMode::optimizer, false, "optimizer"},
                        {"params", OffloadMode::params, false, "params"},
                        {"activations", OffloadMode::none, true, "activations"},
                        {"params,activations", OffloadMode::params, true, "params,activations"},
                        {"activations,optimizer", OffloadMode::optimizer, true, "optimizer,activations"}};
  for (const Case& c : cases) {
    const OffloadSet o = OffloadSet::parse(c.flag);
    EXPECT_EQ(o.states, c.states) << c.flag;
    EXPECT_EQ(o.activations, c.activations) << c.flag;
    EXPECT_EQ(o.str(), c.canonical) << c.flag;
    const OffloadSet back = OffloadSet::parse(o.str());
    EXPECT_EQ(back.states, o.states);
    EXPECT_EQ(back.activations, o.activations);
  }
}

TEST(OffloadSet, RefusesMalformedListsNamingTheFlag) {
  for (const char* bad : {"", ",", "params,", ",params", "params,optimizer", "optimizer,optimizer",
                          "activations,activations", "none,activations", "cloud", "Params", "params activations"}) {
    try {
      OffloadSet::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--offload"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gpt
