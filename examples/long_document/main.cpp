// SPDX-License-Identifier: MIT
// long_document: scores a text of any length with a bounded-memory model, streaming it through the session's state
// one segment at a time, and prints bits per byte, the memory the session allocated and what dense attention would
// have needed for the same length.
//
//   long_document MODEL.tern TEXT [--segment N] [--bytes N] [--threads N]
//
// The model must keep bounded state and unlimited positions (sliding or chunked windows, adaptive span,
// Transformer-XL or compressive memories; sinusoidal or relative positions): tern_session_sequence_limit then exceeds
// max_tokens and the session continues past it. A model with dense attention or learned positions (the shipped
// kjv-byte model) holds at most max_tokens tokens: the example says so and stops.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tern/tern.hpp"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "long_document: %s\n", message.c_str());
  return 1;
}

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1024.0 * 1024.0));
  return buf;
}

// -log p(target) in nats from one row of logits [vocab] (log-softmax in double precision).
double nll(const float* row, int64_t vocab, int32_t target) {
  double mx = row[0];
  for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, double(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
  return std::log(sum) + mx - double(row[target]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: long_document MODEL.tern TEXT [--segment N] [--bytes N] [--threads N]\n");
    return 2;
  }
  int64_t segment = 256, max_bytes = 0;
  int threads = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--segment")) segment = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--bytes")) max_bytes = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else return fail(std::string("unknown option ") + argv[i]);
  }
  if (segment < 1) return fail("--segment must be positive");

  std::ifstream in(argv[2], std::ios::binary);
  if (!in) return fail(std::string(argv[2]) + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (max_bytes > 0 && int64_t(text.size()) > max_bytes) text.resize(size_t(max_bytes));
  if (text.size() < 2) return fail(std::string(argv[2]) + ": need at least 2 bytes");

  tern::Error err;
  tern::ModelHandle model = tern::ModelHandle::load(argv[1], &err);
  if (err) return fail(err.message);
  std::vector<int32_t> ids;
  if ((err = tern::tokenize(model, text, &ids))) return fail(err.message);
  const int64_t n = int64_t(ids.size());

  // max_tokens stays the model's context: a bounded model's state is sized by its windows and memories, and its
  // session goes on past max_tokens. Calls are one segment.
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  so.max_batch = segment;
  tern::SessionHandle session = tern::SessionHandle::create(model, so, &err);
  if (err) return fail(err.message);
  const int64_t limit = tern_session_sequence_limit(session.get());
  if (limit < n) {
    return fail("this model's sequence holds at most " + std::to_string(limit) +
                " tokens (its state grows with the sequence, or its positions come from a table: dense attention, "
                "learned positions); streaming " + std::to_string(n) + " needs a model with bounded state");
  }

  const int64_t vocab = session.vocab_size();
  std::vector<float> logits(size_t(segment * vocab));
  double total = 0;  // nats
  int64_t predicted = 0;
  for (int64_t start = 0; start < n; start += segment) {
    const int64_t len = std::min(segment, n - start);
    if ((err = session.append(ids.data() + start, len, logits.data()))) return fail(err.message);
    for (int64_t i = 0; i < len && start + i + 1 < n; ++i) {  // row i predicts token start + i + 1
      total += nll(logits.data() + i * vocab, vocab, ids[size_t(start + i + 1)]);
      ++predicted;
    }
  }

  tern_memory_plan used{}, dense{};
  tern_session_memory(session.get(), &used);
  dense = session.plan(n);
  const uint64_t session_bytes = used.packed_weight_bytes + used.arena_bytes + used.state_bytes;
  std::printf("%s: %lld bytes streamed in segments of %lld: %.4f bits per byte\n", argv[2], static_cast<long long>(n),
              static_cast<long long>(segment), total / std::log(2.0) / double(predicted));
  std::printf("session memory: %s (state %s, arena %s, packed weights %s), the same at any length\n",
              mib(session_bytes).c_str(), mib(used.state_bytes).c_str(), mib(used.arena_bytes).c_str(),
              mib(used.packed_weight_bytes).c_str());
  std::printf("dense attention for %lld tokens: %s of n x n scores per layer\n", static_cast<long long>(n),
              mib(dense.dense_attention_bytes).c_str());
  return 0;
}
