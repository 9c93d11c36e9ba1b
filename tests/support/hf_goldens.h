// SPDX-License-Identifier: MIT
// The Hugging Face decoder goldens (tests/goldens/hf_*, written by tools/reference/make_hf_goldens.py), as the CPU
// and the Vulkan tests read them.
#pragma once

#include <string>
#include <vector>

#include "convert.h"
#include "tern/tern.h"

namespace tern::test {

// Every tests/goldens/hf_* directory name, sorted.
std::vector<std::string> hf_goldens();
// Converts the checkpoint `dir` into the scratch directory `name` and loads it; REQUIREs both.
tern_model* convert_and_load(const std::string& dir, const std::string& name, const convert::ConvertOptions& options);
// The rope type of a golden's config.json ("default" without rope_scaling; the legacy "type" key read too).
std::string rope_type(const std::string& dir);

}  // namespace tern::test
