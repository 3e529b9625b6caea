// Dataset preparation for `gpt tokenize`: text in, llm.c token shards out. Each input file is one document;
// documents are joined with the end-of-text token (none before the first), the LAST val_fraction of the
// token stream becomes the validation split (as nanoGPT's shakespeare prep does), and each split is cut
// into shards of at most shard_size tokens: train_000000.bin, train_000001.bin, ..., val_000000.bin, ...
// Beside them goes the tokenizer record, gpt_tokenizer.json (io/token_record.h): which tokenizer made
// the ids, and the input's size and CRC-32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct PrepareOptions {
  std::string input;                 // a text file, or a directory whose *.txt files (sorted) are the documents
  std::string out_dir;               // created when missing; receives the shards
  std::string tokenizer = "gpt2";    // "byte" | "gpt2"
  std::string data_dir = "data";     // holds gpt2/encoder.json and gpt2/vocab.bpe
  double val_fraction = 0.1;         // fraction of tokens, taken from the end, that go to val; in [0, 1)
  int64_t shard_size = 100000000;    // tokens per shard file, at most 2^31 - 1
  int64_t chunk_bytes = 1 << 20;     // text is encoded in pieces of about this size (progress, memory)
  bool force_progress = false;       // draw the progress bar even when stderr is not a terminal
  bool quiet = false;                // no summary line on stdout
};

struct PrepareSummary {
  int64_t documents = 0, bytes = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  std::vector<std::string> train_files, val_files;
  uint32_t crc32 = 0;       // CRC-32 of the documents' bytes, back to back
  std::string record_file;  // the tokenizer record written beside the shards
};

// Validates the options (flag names in the messages), tokenizes, writes the shards and then the record
// atomically (an earlier run's record is removed first, so no crash leaves one describing other shards),
// removes stale shards of an earlier run with the same names beyond the new count, and prints a one-line
// summary.
PrepareSummary prepare_dataset(const PrepareOptions& opts);

}  // namespace gpt
