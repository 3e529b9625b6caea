// Micro-benchmarks behind `gpt bench`: host AdamW against the machine's memory bandwidth (the limit of a
// one-pass optimizer), and GPT-2 tokenizer encode speed.
#pragma once
#include <cstdint>
#include <string>

namespace gpt {

// Times cpu::adamw_update over n fp32 parameters, and a probe that streams the same bytes (read p g m v,
// write p m v) with no arithmetic: the floor of any one-pass AdamW on this machine.
void bench_host_adamw(int64_t n, int reps, bool json);
// Encodes a text file with the GPT-2 tokenizer: cold (empty cache) and warm MB/s.
void bench_encode(const std::string& path, const std::string& data_dir, bool json);

}  // namespace gpt
