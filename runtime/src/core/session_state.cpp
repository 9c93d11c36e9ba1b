// SPDX-License-Identifier: MIT
// Saving and restoring a session's streaming state (tern_session_save_state / tern_session_load_state), on either
// backend.
//
// Layout, little-endian:
//   0   char[8]  "TERNSTAT"
//   8   u32      format version (1)
//   12  u32      entries: the session's stateful ops
//   16  u64      model fingerprint: FNV-1a of the model's graph (ops, params, tensor descriptions) and of the first
//                and last 256 bytes of every tensor's data
//   24  i64      position: tokens the state holds
//   32  u64      payload bytes
//   40  u64      checksum of every other byte (FNV-1a over 8-byte words): header, entries and payload
//   48  entries x {u32 op index, u32 layout, u64 bytes}
//   ..  payload: each stateful op's bytes in op order
// Layout 0: the CPU kernel's bytes (CpuKernel::save_state). The Vulkan backend saves its device state in the same
// bytes (Backend::save_state: every stateful op it runs has the CPU kernel's slots, rows and rings), so a state saved
// on one backend loads on the other. Blobs written before the field had a name hold 0 there.
// Layout 1: a CPU KV store under kv_storage F16, the same slots with float16 keys and values (half the bytes). A
// state loads only into a session whose op has the layout it was saved with: a float16 state is not widened into
// a float32 session (its results would match neither), nor a float32 one rounded into a float16 session. Any other
// layout is rejected (reserved).
// A blob loads only into a session of the same model whose ops hold the same state sizes at that position (same
// max_tokens where the state depends on it); everything is checked before anything changes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/session.h"
#include "format/half.h"

namespace tern {
namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'S', 'T', 'A', 'T'};
constexpr uint32_t kStateVersion = 1;
constexpr size_t kHeaderBytes = 48, kEntryBytes = 16;
constexpr uint32_t kCpuLayout = 0;      // an entry's layout: the CPU kernel's bytes, on both backends
constexpr uint32_t kHalfKvLayout = 1;   // a KV store's keys and values as float16 (kv_storage F16, CPU)

const char* layout_name(uint32_t layout) {
  return layout == kCpuLayout ? "float32 keys and values (kv_storage F32)" : "float16 keys and values (kv_storage F16)";
}

constexpr uint64_t kFnvOffset = kBlobChecksumSeed, kFnvPrime = 1099511628211ull;

uint64_t fnv(uint64_t h, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}


uint64_t fingerprint(const Model& model) {
  uint64_t h = fnv(kFnvOffset, model.graph_bytes(), model.graph_size());
  for (const TensorInfo& t : model.tensors()) {
    const size_t edge = size_t(std::min<uint64_t>(t.size, 256));
    h = fnv(h, t.data, edge);
    h = fnv(h, t.data + t.size - edge, edge);
  }
  return h;
}

template <typename T>
void put(uint8_t*& p, T v) {
  std::memcpy(p, &v, sizeof v);
  p += sizeof v;
}

template <typename T>
T get(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

}  // namespace

uint64_t blob_checksum(uint64_t h, const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kFnvPrime;
  }
  return fnv(h, p + i, n - i);
}

Result<size_t> Session::save_state(void* buf, size_t size) const {
  uint64_t payload = 0;
  uint32_t entries = 0;
  for (const Node& node : model_.nodes()) {
    if (!backend_->has_state(node.index)) continue;
    payload += backend_->saved_state_bytes(node.index, position_);
    ++entries;
  }
  const uint64_t total = kHeaderBytes + uint64_t(entries) * kEntryBytes + payload;
  if (buf == nullptr) return size_t(total);
  if (size < total) {
    return InvalidArgument("the state needs " + std::to_string(total) + " bytes; the buffer has " + std::to_string(size));
  }
  auto* out = static_cast<uint8_t*>(buf);
  uint8_t* p = out + kHeaderBytes;
  uint8_t* data = p + size_t(entries) * kEntryBytes;
  for (const Node& node : model_.nodes()) {
    if (!backend_->has_state(node.index)) continue;
    const uint64_t bytes = backend_->saved_state_bytes(node.index, position_);
    put<uint32_t>(p, uint32_t(node.index));
    put<uint32_t>(p, backend_->state_layout(node.index));
    put<uint64_t>(p, bytes);
    TERN_RETURN_IF_ERROR(backend_->save_state(node.index, position_, data));
    data += bytes;
  }
  p = out;
  std::memcpy(p, kMagic, sizeof kMagic);
  p += sizeof kMagic;
  put<uint32_t>(p, kStateVersion);
  put<uint32_t>(p, entries);
  put<uint64_t>(p, fingerprint(model_));
  put<int64_t>(p, position_);
  put<uint64_t>(p, payload);
  put<uint64_t>(p, blob_checksum(blob_checksum(kFnvOffset, out, 40), out + kHeaderBytes, size_t(total) - kHeaderBytes));
  return size_t(total);
}

Status check_saved_floats(const std::string& where, const uint8_t* floats, uint64_t bytes) {
  for (uint64_t i = 0; i + sizeof(float) <= bytes; i += sizeof(float)) {
    float f;
    std::memcpy(&f, floats + i, sizeof f);
    if (!std::isfinite(f)) {
      return InvalidArgument(where + ": the saved state holds " + (std::isnan(f) ? "NaN" : "an infinity") + " at byte " +
                             std::to_string(i) + " of its rows; a state Tern saves is always finite");
    }
  }
  return Status::Ok();
}

Status check_saved_halves(const std::string& where, const uint8_t* halves, uint64_t bytes) {
  for (uint64_t i = 0; i + sizeof(uint16_t) <= bytes; i += sizeof(uint16_t)) {
    uint16_t h;
    std::memcpy(&h, halves + i, sizeof h);
    if (!half_is_finite(h)) {
      return InvalidArgument(where + ": the saved state holds " + ((h & 0x03ffu) ? "NaN" : "an infinity") +
                             " at byte " + std::to_string(i) + " of its float16 rows; a state Tern saves is finite " +
                             "unless a key or value passed 65504");
    }
  }
  return Status::Ok();
}

Status Session::load_state(const void* buf, size_t size) {
  if (buf == nullptr) return InvalidArgument("load_state: the buffer is null");
  const auto* in = static_cast<const uint8_t*>(buf);
  if (size < kHeaderBytes || std::memcmp(in, kMagic, sizeof kMagic) != 0) {
    return InvalidArgument("not a Tern session state (" + std::to_string(size) + " bytes, no \"TERNSTAT\" header)");
  }
  const uint8_t* p = in + sizeof kMagic;
  const auto version = get<uint32_t>(p);
  const auto entries = get<uint32_t>(p);
  const auto model_id = get<uint64_t>(p);
  const auto position = get<int64_t>(p);
  const auto payload = get<uint64_t>(p);
  const auto sum = get<uint64_t>(p);
  if (uint64_t(size) < kHeaderBytes + uint64_t(entries) * kEntryBytes ||
      payload != uint64_t(size) - kHeaderBytes - uint64_t(entries) * kEntryBytes) {
    return InvalidArgument("session state of " + std::to_string(size) + " bytes is truncated or has trailing bytes (its header announces " +
                           std::to_string(entries) + " ops and " + std::to_string(payload) + " bytes of state)");
  }
  if (blob_checksum(blob_checksum(kFnvOffset, in, 40), in + kHeaderBytes, size - kHeaderBytes) != sum) {
    return InvalidArgument("the session state is corrupt (checksum mismatch)");
  }
  if (version != kStateVersion) {
    return Unsupported("session state format version " + std::to_string(version) + " is not supported (this runtime reads " +
                       std::to_string(kStateVersion) + ")");
  }
  if (model_id != fingerprint(model_)) {
    return InvalidArgument("the session state was saved from a different model (its fingerprint does not match this " +
                           model_.architecture() + " model's)");
  }
  if (position < 0 || position > sequence_limit_) {
    return InvalidArgument("the session state holds " + std::to_string(position) + " tokens; this session's " +
                           (sequence_limit_ > max_tokens_ ? "sequence limit is " + std::to_string(sequence_limit_)
                                                          : "max_tokens is " + std::to_string(max_tokens_)));
  }
  // The ops, their layouts and sizes must be this session's.
  const uint8_t* const states = in + kHeaderBytes + size_t(entries) * kEntryBytes;
  const uint8_t* data = states;
  uint32_t mine = 0;
  for (const Node& node : model_.nodes()) {
    if (!backend_->has_state(node.index)) continue;
    if (mine == entries) return InvalidArgument("the session state lists fewer stateful ops than this session has");
    const auto index = get<uint32_t>(p);
    const auto layout = get<uint32_t>(p);
    const auto bytes = get<uint64_t>(p);
    if (index != uint32_t(node.index)) {
      return InvalidArgument("the session state's op " + std::to_string(mine) + " is op " + std::to_string(index) +
                             "; this session's is " + node.label());
    }
    if (layout != kCpuLayout && layout != kHalfKvLayout) {
      return InvalidArgument(node.label() + ": the saved state has layout " + std::to_string(layout) +
                             ", which this " + backend_->name() + " session cannot load: the CPU and " +
                             "Vulkan backends save and load layouts 0 (the CPU kernels' bytes) and 1 (their float16 " +
                             "keys and values) only");
    }
    if (layout != backend_->state_layout(node.index)) {
      return InvalidArgument(node.label() + ": the state was saved with " + layout_name(layout) + "; this " +
                             backend_->name() + " session holds " + layout_name(backend_->state_layout(node.index)) +
                             " (create it with the kv_storage the state was saved with)");
    }
    const uint64_t want = backend_->saved_state_bytes(node.index, position);
    if (bytes != want) {
      return InvalidArgument(node.label() + ": the saved state has " + std::to_string(bytes) + " bytes, this session holds " +
                             std::to_string(want) + " at position " + std::to_string(position) +
                             " (a session created with other options, e.g. max_tokens?)");
    }
    if (uint64_t(data - states) + bytes > payload) {
      return InvalidArgument("the session state's ops hold more bytes than its payload of " + std::to_string(payload));
    }
    TERN_RETURN_IF_ERROR(backend_->check_state(node.index, position, data));
    data += bytes;
    ++mine;
  }
  if (mine != entries) return InvalidArgument("the session state lists more stateful ops than this session has");
  if (data != in + size) return InvalidArgument("the session state's payload holds bytes that no op's state accounts for");
  data = states;
  ++epoch_;
  for (const Node& node : model_.nodes()) {
    if (!backend_->has_state(node.index)) continue;
    TERN_RETURN_IF_ERROR(backend_->load_state(node.index, position, data));
    data += backend_->saved_state_bytes(node.index, position);
  }
  position_ = position;
  return Status::Ok();
}

}  // namespace tern
