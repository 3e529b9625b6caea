// Sequential loader over llm.c token shards (format and batch semantics in data_loader.h).
// Every shard header is validated up front (cheap: 1 KiB each), so a bad file fails at start-up rather than
// hours into a run; the token ids of a shard are range-checked once, the first time that shard is mapped.
// Shards are read through mmap: the loader touches only the pages of the batches it serves.
#include "src/io/data_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>

#include "src/core/check.h"
#include "src/io/atomic_file.h"

namespace gpt {

namespace {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int64_t kHeaderBytes = 256 * sizeof(int32_t);

// Reads and checks the header of an open shard; returns ntok.
int64_t check_shard_header(int fd, const std::string& path) {
  struct stat st;
  GPT_CHECK(::fstat(fd, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  const int64_t size = (int64_t)st.st_size;
  GPT_CHECK(size >= kHeaderBytes, path, ": file is ", size, " bytes, shorter than the 1024-byte shard header");
  int32_t header[256];  // [magic, version, ntok, 0...]
  ssize_t got = ::pread(fd, header, sizeof header, 0);
  GPT_CHECK(got == (ssize_t)sizeof header, path, ": cannot read the shard header");
  GPT_CHECK(header[0] == kShardMagic, path, ": bad magic ", header[0], ", expected ", kShardMagic,
            " (an llm.c token shard)");
  GPT_CHECK(header[1] == kShardVersion, path, ": unsupported shard version ", header[1], ", expected ",
            kShardVersion);
  const int64_t ntok = header[2];
  GPT_CHECK(ntok > 0, path, ": header says ", ntok, " tokens, expected a positive count");
  const int64_t expected = kHeaderBytes + 2 * ntok;  // ntok < 2^31, no overflow in 64 bits
  GPT_CHECK(size == expected, path, ": file is ", size, " bytes, expected ", expected, " (1024 + 2 * ", ntok,
            " tokens): truncated or corrupt");
  return ntok;
}

int open_shard(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  GPT_CHECK(fd >= 0, path, ": cannot open token shard: ", std::strerror(errno));
  return fd;
}

void check_token_ids(const uint16_t* ids, int64_t ntok, int vocab_size, const std::string& path) {
  if (vocab_size <= 0) return;
  for (int64_t i = 0; i < ntok; i++)
    GPT_CHECK(ids[i] < vocab_size, path, ": token id ", ids[i], " at token offset ", i,
              " is >= vocab size ", vocab_size);
}

}  // namespace

struct DataLoader::Impl {
  std::vector<std::string> files;
  std::vector<int64_t> ntok;       // tokens per shard
  std::vector<bool> ids_checked;   // ids range-checked once per shard
  int B = 0, T = 0, rank = 0, world = 1, vocab = 0;
  int64_t global = 0;              // world * B * T tokens per global micro-batch
  DataPosition pos;
  // The mapped shard.
  int64_t mapped = -1;
  void* map = nullptr;
  size_t map_bytes = 0;

  ~Impl() { unmap(); }

  void unmap() {
    if (map) ::munmap(map, map_bytes);
    map = nullptr;
    mapped = -1;
  }

  const uint16_t* tokens() const {  // (ntok,) ids of the mapped shard
    return reinterpret_cast<const uint16_t*>(static_cast<const char*>(map) + kHeaderBytes);
  }

  void map_shard(int64_t s) {
    if (mapped == s) return;
    unmap();
    const std::string& path = files[s];
    int fd = open_shard(path);
    try {
      GPT_CHECK(check_shard_header(fd, path) == ntok[s], path, ": token count changed since the loader opened it");
    } catch (...) {
      ::close(fd);
      throw;
    }
    map_bytes = (size_t)(kHeaderBytes + 2 * ntok[s]);
    void* p = ::mmap(nullptr, map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    GPT_CHECK(p != MAP_FAILED, path, ": cannot mmap ", map_bytes, " bytes: ", std::strerror(err));
    map = p;
    mapped = s;
    ::madvise(map, map_bytes, MADV_SEQUENTIAL);
    if (!ids_checked[s]) {
      check_token_ids(tokens(), ntok[s], vocab, path);
      ids_checked[s] = true;
    }
  }

  // Moves to the next shard (wrapping) while the current one can't hold a global micro-batch at pos.
  void normalize() {
    if (pos.offset + global + 1 > ntok[pos.shard]) {
      pos.shard = (pos.shard + 1) % (int64_t)files.size();
      pos.offset = 0;
    }
  }
};

DataLoader::DataLoader(const std::string& pattern, int B, int T, int rank, int world, int vocab_size)
    : impl_(new Impl) {
  std::unique_ptr<Impl> guard(impl_);
  GPT_CHECK(B > 0 && T > 0, "data loader: -B and -T must be positive, got B=", B, " T=", T);
  GPT_CHECK(world > 0 && rank >= 0 && rank < world, "data loader: rank ", rank, " outside world size ", world);
  Impl& m = *impl_;
  m.B = B, m.T = T, m.rank = rank, m.world = world, m.vocab = vocab_size;
  m.global = (int64_t)world * B * T;  // each factor < 2^31: fits in int64
  m.files = glob_files(pattern, "data pattern");
  for (const auto& path : m.files) {
    int fd = open_shard(path);
    int64_t n;
    try {
      n = check_shard_header(fd, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    GPT_CHECK(n >= m.global + 1, path, ": has ", n, " tokens, fewer than one global micro-batch needs (world ",
              world, " * B ", B, " * T ", T, " + 1 = ", m.global + 1, ")");
    m.ntok.push_back(n);
  }
  m.ids_checked.assign(m.files.size(), false);
  // every shard's ids are checked now, so a bad id is reported (file and offset) before training starts
  for (int64_t s = (int64_t)m.files.size() - 1; s >= 0; s--) m.map_shard(s);
  guard.release();
}

DataLoader::~DataLoader() { delete impl_; }

void DataLoader::next_batch(int* inputs, int* targets) {
  Impl& m = *impl_;
  m.map_shard(m.pos.shard);
  const int64_t n = (int64_t)m.B * m.T;
  const uint16_t* tok = m.tokens() + m.pos.offset + (int64_t)m.rank * n;  // (B*T + 1,) this rank's rows
  for (int64_t i = 0; i < n; i++) {
    inputs[i] = tok[i];
    targets[i] = tok[i + 1];
  }
  m.pos.offset += m.global;
  m.normalize();
}

void DataLoader::reset() { impl_->pos = DataPosition{}; }

DataPosition DataLoader::position() const { return impl_->pos; }

void DataLoader::set_position(const DataPosition& p) {
  Impl& m = *impl_;
  const int64_t nshards = (int64_t)m.files.size();
  GPT_CHECK(p.shard >= 0 && p.shard < nshards, "data position: shard ", p.shard, " outside [0, ", nshards,
            ") (the data pattern now matches ", nshards, " files)");
  GPT_CHECK(p.offset >= 0 && p.offset <= m.ntok[p.shard], "data position: offset ", p.offset, " outside [0, ",
            m.ntok[p.shard], "] for ", m.files[p.shard]);
  m.pos = p;
  m.normalize();
}

int64_t DataLoader::batches_per_pass() const {
  int64_t n = 0;  // a shard's batches start at 0, global, 2 global, ... while one more token follows the batch
  for (int64_t t : impl_->ntok) n += (t - 1) / impl_->global;
  return n;
}

void DataLoader::check_batches(int64_t wanted, const std::string& flag) const {
  const int64_t n = batches_per_pass();
  GPT_CHECK(wanted <= n, flag, " ", wanted, ": the data (", impl_->files.size(), " shard(s), first ", impl_->files.front(),
            ") holds ", n, " batches of ", impl_->global, " tokens, so more would count some twice");
}

int64_t DataLoader::total_tokens() const {
  int64_t n = 0;
  for (int64_t t : impl_->ntok) n += t;
  return n;
}

const std::vector<std::string>& DataLoader::files() const { return impl_->files; }

void write_token_shard(const std::string& path, const std::vector<int>& tokens) {
  GPT_CHECK(!tokens.empty(), path, ": refusing to write a token shard with no tokens");
  GPT_CHECK(tokens.size() <= (size_t)std::numeric_limits<int32_t>::max(), path, ": ", tokens.size(),
            " tokens do not fit one shard (at most 2^31 - 1)");
  int32_t header[256] = {kShardMagic, kShardVersion, (int32_t)tokens.size()};
  std::vector<uint16_t> ids(tokens.size());  // (ntok,)
  for (size_t i = 0; i < tokens.size(); i++) {
    GPT_CHECK(tokens[i] >= 0 && tokens[i] <= 65535, path, ": token id ", tokens[i], " at offset ", i,
              " does not fit uint16 [0, 65535]");
    ids[i] = (uint16_t)tokens[i];
  }
  AtomicWriter w(path);
  w.write(header, sizeof header);
  w.write(ids.data(), ids.size() * sizeof(uint16_t));
  w.commit();
}

std::vector<uint16_t> read_token_shard(const std::string& path) {
  int fd = open_shard(path);
  std::vector<uint16_t> ids;
  try {
    int64_t ntok = check_shard_header(fd, path);
    ids.resize((size_t)ntok);
    size_t want = (size_t)ntok * sizeof(uint16_t), done = 0;
    while (done < want) {
      ssize_t got = ::pread(fd, reinterpret_cast<char*>(ids.data()) + done, want - done, kHeaderBytes + done);
      GPT_CHECK(got > 0, path, ": short read of token ids");
      done += (size_t)got;
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return ids;
}

}  // namespace gpt
