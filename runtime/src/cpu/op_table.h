// SPDX-License-Identifier: MIT
// The CPU backend's op -> kernel table.
#pragma once

#include <memory>

#include "cpu/kernel.h"

namespace tern::cpu {

// The kernel of a validated node: by op code, and for ATTENTION by kind.
Result<std::unique_ptr<CpuKernel>> make_kernel(const Node& node, const Model& model, const KernelConfig& cfg);

}  // namespace tern::cpu
