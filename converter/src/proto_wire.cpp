// SPDX-License-Identifier: MIT
#include "proto_wire.h"

#include <string>

namespace tern::convert {

namespace {

// Reads a base-128 varint at *pos (at most 10 bytes); false when the message ends first or it runs longer.
bool read_varint(std::string_view m, size_t* pos, uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= m.size()) return false;
    const uint8_t b = uint8_t(m[(*pos)++]);
    v |= uint64_t(b & 0x7F) << shift;
    if ((b & 0x80) == 0) {
      *value = v;
      return true;
    }
  }
  return false;
}

uint64_t read_little_endian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = v << 8 | uint8_t(bytes[i]);
  return v;
}

}  // namespace

Status for_each_proto_field(std::string_view message, std::string_view what,
                            const std::function<Status(const ProtoField&)>& visit) {
  auto malformed = [&](size_t at, const std::string& why) {
    return InvalidArgument("malformed " + std::string(what) + " at byte " + std::to_string(at) + ": " + why);
  };
  size_t pos = 0;
  while (pos < message.size()) {
    const size_t start = pos;
    uint64_t key = 0;
    if (!read_varint(message, &pos, &key)) return malformed(start, "truncated field key");
    ProtoField field;
    if ((key >> 3) == 0 || (key >> 3) > 0x1FFFFFFF) return malformed(start, "field number out of range");
    field.number = uint32_t(key >> 3);
    const uint32_t type = uint32_t(key & 7);
    switch (type) {
      case 0:
        field.type = WireType::kVarint;
        if (!read_varint(message, &pos, &field.varint)) return malformed(start, "truncated varint");
        break;
      case 1:
      case 5: {
        const size_t n = type == 1 ? 8 : 4;
        if (message.size() - pos < n) return malformed(start, "truncated fixed-size field");
        field.type = type == 1 ? WireType::kFixed64 : WireType::kFixed32;
        field.varint = read_little_endian(message.substr(pos, n));
        pos += n;
        break;
      }
      case 2: {
        uint64_t length = 0;
        if (!read_varint(message, &pos, &length)) return malformed(start, "truncated length");
        if (length > message.size() - pos) return malformed(start, "length runs past the end");
        field.type = WireType::kLengthDelimited;
        field.bytes = message.substr(pos, size_t(length));
        pos += size_t(length);
        break;
      }
      default:
        return malformed(start, "wire type " + std::to_string(type) + " (groups are not read)");
    }
    TERN_RETURN_IF_ERROR(visit(field));
  }
  return Status::Ok();
}

}  // namespace tern::convert
