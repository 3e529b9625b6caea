// Parsing and grouping of WrapPolicy (see wrap.h).
#include "src/model/wrap.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "src/core/check.h"

namespace gpt {

namespace {
// A positive integer with an optional k/M/B suffix, or -1.
int64_t parse_count(const std::string& s) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return -1;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || v < 1) return -1;
  int64_t scale = 1;
  if (*end == 'k') scale = 1000, end++;
  else if (*end == 'M') scale = 1000000, end++;
  else if (*end == 'B') scale = 1000000000, end++;
  if (*end != '\0' || v > INT64_MAX / scale) return -1;
  return v * scale;
}
}  // namespace

WrapPolicy WrapPolicy::parse(const std::string& s) {
  WrapPolicy w;
  if (s == "block") return w;
  if (s.rfind("blocks:", 0) == 0) {
    const int64_t k = parse_count(s.substr(7));
    GPT_CHECK(k >= 1 && k <= 1000000, "--wrap blocks:K needs an integer K >= 1, got '", s, "'");
    w.kind = Kind::blocks;
    w.n = k;
    return w;
  }
  if (s.rfind("min-params:", 0) == 0) {
    const int64_t n = parse_count(s.substr(11));
    GPT_CHECK(n >= 1 && n <= kMaxN, "--wrap min-params:N needs a parameter count N in [1, 1e15] (suffix k, M or B ",
              "allowed), got '", s, "'");
    w.kind = Kind::min_params;
    w.n = n;
    return w;
  }
  fail("--wrap: expected block, blocks:K or min-params:N, got '", s, "'");
}

std::string WrapPolicy::str() const {
  switch (kind) {
    case Kind::block: return "block";
    case Kind::blocks: return "blocks:" + std::to_string(n);
    case Kind::min_params: return "min-params:" + std::to_string(n);
  }
  return "block";
}

std::vector<int> WrapPolicy::groups(int L, int64_t block_numel) const {
  std::vector<int> g;
  if (kind == Kind::block) return std::vector<int>((size_t)L, 1);
  // blocks:K is K per unit; min-params:N the fewest blocks whose parameters reach N (ceil(N / block)).
  int64_t per = n;
  if (kind == Kind::min_params) per = block_numel > 0 ? n / block_numel + (n % block_numel != 0) : 1;
  const int k = (int)std::min<int64_t>(std::max<int64_t>(per, 1), std::max(L, 1));
  for (int done = 0; done < L; done += k) g.push_back(std::min(k, L - done));
  return g;
}

}  // namespace gpt
