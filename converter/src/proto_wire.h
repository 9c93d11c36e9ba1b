// SPDX-License-Identifier: MIT
// A bounds-checked reader of the protobuf wire format, enough to pick a few fields out of a message whose schema
// the converter knows by field number (the generated code of that schema is another library's, not exposed).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "format/status.h"

namespace tern::convert {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct ProtoField {
  uint32_t number = 0;
  WireType type = WireType::kVarint;
  uint64_t varint = 0;     // kVarint; kFixed64 / kFixed32: the raw little-endian value
  std::string_view bytes;  // kLengthDelimited: the payload (a view into the message)
};

// Calls visit for every field of `message` in file order (proto2 semantics are the caller's: for a singular field
// the last occurrence wins, an embedded message's occurrences merge). A truncated varint, a length past the end, a
// field number 0 or a group (wire types 3 and 4) is an InvalidArgument naming `what`; visit's own error stops it.
Status for_each_proto_field(std::string_view message, std::string_view what,
                            const std::function<Status(const ProtoField&)>& visit);

}  // namespace tern::convert
