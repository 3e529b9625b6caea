// GPT-2's byte-level BPE tokenizer, token-for-token identical to tiktoken's "gpt2" encoding.
// encode: optional split at "<|endoftext|>" -> pre-tokenise (PieceSplitter) -> per piece: the cached
// ids, else the piece itself if it is a token (tiktoken's shortcut), else the BPE merge. Pieces repeat
// a lot in real text, so a cache of merged pieces makes encoding cost mostly the split.
// The cache is guarded by a mutex taken with try_lock for a whole encode() call: concurrent callers
// never wait, the one that does not get the lock simply encodes without the cache.
#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <mutex>
#include <queue>

#include "src/core/check.h"
#include "src/io/gpt2_tokenizer.h"
#include "src/io/tokenizer.h"

namespace gpt::gpt2 {
namespace {

constexpr size_t kSmallPiece = 64;         // bytes; longer pieces use the O(n log n) heap merge
constexpr size_t kMaxCachedPiece = 256;    // bytes; longer pieces are rare and not worth keeping
constexpr size_t kMaxCacheEntries = 1 << 18;

inline const Merge* find_pair(const Vocab& v, int left, int right) {
  auto it = v.pairs.find((static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right));
  return it == v.pairs.end() ? nullptr : &it->second;
}

// tiktoken's scan: each round merges the lowest-rank pair (first on ties); n <= kSmallPiece.
void merge_small(const Vocab& v, std::string_view piece, std::vector<int>* out) {
  int n = static_cast<int>(piece.size());
  int ids[kSmallPiece];    // (n) current parts
  int rank[kSmallPiece];   // (n-1) rank of merging parts i and i+1, INT_MAX if they form no token
  int merged[kSmallPiece]; // (n-1) id of that merge
  auto score = [&](int i) {
    const Merge* m = find_pair(v, ids[i], ids[i + 1]);
    rank[i] = m ? m->rank : INT_MAX;
    merged[i] = m ? m->id : -1;
  };
  for (int i = 0; i < n; ++i) ids[i] = v.byte_id[static_cast<unsigned char>(piece[i])];
  for (int i = 0; i + 1 < n; ++i) score(i);
  while (n > 1) {
    int best = 0;
    for (int i = 1; i + 1 < n; ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == INT_MAX) break;
    ids[best] = merged[best];
    const int tail = n - best - 2;  // parts after best+1
    std::memmove(ids + best + 1, ids + best + 2, sizeof(int) * tail);
    std::memmove(rank + best, rank + best + 1, sizeof(int) * tail);
    std::memmove(merged + best, merged + best + 1, sizeof(int) * tail);
    --n;
    if (best > 0) score(best - 1);
    if (best + 1 < n) score(best);
  }
  out->insert(out->end(), ids, ids + n);
}

// Same result for long pieces: a min-heap of (rank, position) over a linked list of parts. Stale heap
// entries are recognised by per-part version counters.
void merge_long(const Vocab& v, std::string_view piece, std::vector<int>* out) {
  const int n = static_cast<int>(piece.size());
  std::vector<int> ids(n), next(n), prev(n), version(n, 0);  // (n) each, indexed by start byte
  struct Cand {
    int rank, left, right, id, vl, vr;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int l, int r) {
    if (const Merge* m = find_pair(v, ids[l], ids[r])) heap.push({m->rank, l, r, m->id, version[l], version[r]});
  };
  for (int i = 0; i < n; ++i) {
    ids[i] = v.byte_id[static_cast<unsigned char>(piece[i])];
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  for (int i = 0; i + 1 < n; ++i) push(i, i + 1);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    if (version[c.left] != c.vl || version[c.right] != c.vr || next[c.left] != c.right) continue;
    ids[c.left] = c.id;
    ++version[c.left];
    version[c.right] = -1;  // dead
    next[c.left] = next[c.right];
    if (next[c.left] < n) prev[next[c.left]] = c.left;
    if (prev[c.left] >= 0) push(prev[c.left], c.left);
    if (next[c.left] < n) push(c.left, next[c.left]);
  }
  for (int i = 0; i < n; i = next[i]) out->push_back(ids[i]);
}

// Piece bytes -> ids. Keys are views into `keys_` (a deque never moves its elements).
class WordCache {
 public:
  bool find(std::string_view piece, std::vector<int>* out) const {
    auto it = index_.find(piece);
    if (it == index_.end()) return false;
    out->insert(out->end(), ids_.begin() + it->second.first,
                ids_.begin() + it->second.first + it->second.second);
    return true;
  }
  void insert(std::string_view piece, const int* ids, size_t n) {
    if (index_.size() >= kMaxCacheEntries) clear();
    keys_.emplace_back(piece);
    index_.emplace(keys_.back(), std::make_pair(static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)));
    ids_.insert(ids_.end(), ids, ids + n);
  }
  void clear() {
    index_.clear();
    keys_.clear();
    ids_.clear();
  }

 private:
  std::deque<std::string> keys_;
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> index_;  // -> (offset, count)
  std::vector<int> ids_;                                                        // all cached ids
};

class Gpt2Tokenizer : public Tokenizer {
 public:
  explicit Gpt2Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  std::string name() const override { return "gpt2"; }
  int vocab_size() const override { return kVocabSize; }
  int eot_token() const override { return kEotToken; }

  std::vector<int> encode(std::string_view text, bool allow_special) const override {
    std::vector<int> out;
    out.reserve(text.size() / 3 + 16);
    std::unique_lock<std::mutex> lock(cache_mu_, std::try_to_lock);
    WordCache* cache = lock.owns_lock() ? &cache_ : nullptr;
    size_t pos = 0;
    if (allow_special) {
      for (size_t f; (f = text.find(kEotText, pos)) != std::string_view::npos; pos = f + kEotText.size()) {
        encode_ordinary(text.substr(pos, f - pos), cache, &out);
        out.push_back(kEotToken);
      }
    }
    encode_ordinary(text.substr(pos), cache, &out);
    return out;
  }

  std::string decode_token(int id) const override {
    GPT_CHECK(id >= 0 && id < kVocabSize, "gpt2 tokenizer: token id ", id, " is out of range [0, ",
              kVocabSize, ")");
    return vocab_.token_bytes[id];
  }

 private:
  void encode_ordinary(std::string_view text, WordCache* cache, std::vector<int>* out) const {
    PieceSplitter split(text);
    std::string_view piece;
    while (split.next(&piece)) {
      if (piece.size() == 1) {
        out->push_back(vocab_.byte_id[static_cast<unsigned char>(piece[0])]);
        continue;
      }
      const bool cacheable = cache && piece.size() <= kMaxCachedPiece;
      if (cacheable && cache->find(piece, out)) continue;
      const size_t before = out->size();
      auto whole = vocab_.mergeable.find(std::string(piece));
      if (whole != vocab_.mergeable.end()) out->push_back(whole->second);
      else bpe_merge(vocab_, piece, out);
      if (cacheable) cache->insert(piece, out->data() + before, out->size() - before);
    }
  }

  Vocab vocab_;
  mutable std::mutex cache_mu_;
  mutable WordCache cache_;
};

}  // namespace

void bpe_merge(const Vocab& vocab, std::string_view piece, std::vector<int>* out) {
  if (piece.empty()) return;
  if (piece.size() <= kSmallPiece) merge_small(vocab, piece, out);
  else merge_long(vocab, piece, out);
}

std::unique_ptr<Tokenizer> make_gpt2_tokenizer(const std::string& data_dir) {
  return std::make_unique<Gpt2Tokenizer>(
      load_vocab(data_dir + "/gpt2/encoder.json", data_dir + "/gpt2/vocab.bpe"));
}

}  // namespace gpt::gpt2
