// SPDX-License-Identifier: MIT
// The C API's versioning rules: version queries, options structs that grow (struct_size), and the log callback.
#include <catch2/catch.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "convert.h"
#include "tern/tern.h"
#include "test_support.h"

using namespace tern;

namespace {

tern_model* load_shipped_kind(const std::string& golden) {
  std::string out = test::scratch_dir("api_abi_" + golden) + "/model.tern";
  convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(convert::convert_checkpoint(test::source_path("tests/goldens/" + golden), out, opts).ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}

struct LogRecord {
  std::vector<tern_log_level> levels;
  std::vector<std::string> messages;
};

void record_log(tern_log_level level, const char* message, void* user_data) {
  auto* log = static_cast<LogRecord*>(user_data);
  log->levels.push_back(level);
  log->messages.push_back(message);
}

}  // namespace

TEST_CASE("api: the library's version is the header's, and it names the format versions it reads", "[api]") {
  const std::string expected = std::to_string(TERN_VERSION_MAJOR) + "." + std::to_string(TERN_VERSION_MINOR) + "." +
                               std::to_string(TERN_VERSION_PATCH);
  CHECK(std::string(tern_version()) == expected);
  uint32_t lo = 0, hi = 0;
  tern_format_versions(&lo, &hi);
  CHECK(lo >= 1);
  CHECK(lo <= hi);
  tern_format_versions(nullptr, nullptr);  // either pointer may be NULL
  tern_model* model = load_shipped_kind("pre_tied_learned_gelu");
  tern_model_info info{};
  REQUIRE(tern_model_get_info(model, &info) == TERN_OK);
  CHECK(info.format_version >= lo);
  CHECK(info.format_version <= hi);
  tern_model_free(model);
}

TEST_CASE("api: options_init sets struct_size, and 0 or sizes past this library's struct are rejected", "[api]") {
  tern_model* model = load_shipped_kind("pre_tied_learned_gelu");
  tern_session_options so;
  tern_session_options_init(&so);
  CHECK(so.struct_size == sizeof(tern_session_options));
  tern_session* s = nullptr;

  so.struct_size = 0;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  CHECK(s == nullptr);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("struct_size is 0"));

  so.struct_size = sizeof(tern_session_options) + 8;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("newer tern"));

  so.struct_size = 3;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);
  tern_model_free(model);
}

TEST_CASE("api: a caller with an older, shorter options struct gets the defaults for the fields it lacks", "[api]") {
  tern_model* model = load_shipped_kind("pre_tied_learned_gelu");
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = 1;
  // Garbage past an older struct's end: the library must not read it.
  so.weight_storage = tern_weight_storage(99);
  so.activation_storage = tern_activation_storage(99);
  tern_session* s = nullptr;
  CHECK(tern_session_create(model, &so, &s) == TERN_INVALID_ARGUMENT);  // the whole struct: 99 is read and refused
  so.struct_size = offsetof(tern_session_options, weight_storage);
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  // The fields it did pass are read: max_batch 7 limits a call.
  tern_session_free(s);
  so.max_batch = 7;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  tern_memory_plan mem{};
  REQUIRE(tern_session_memory(s, &mem) == TERN_OK);
  CHECK(mem.n_tokens == 7);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("api: notices go to the log callback instead of stderr, and NULL restores the default", "[api]") {
  tern_model* model = load_shipped_kind("pre_tied_learned_gelu");
  LogRecord log;
  tern_set_log_callback(record_log, &log);
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = TERN_BACKEND_AUTO;
  so.threads = 1;
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  tern_backend_info where{};
  REQUIRE(tern_session_get_backend(s, &where) == TERN_OK);
  if (where.backend == TERN_BACKEND_CPU) {
    // Auto passed over Vulkan (no GPU here: not built, no device, or a CPU implementation) and says why.
    REQUIRE(log.messages.size() == 1);
    CHECK(log.levels[0] == TERN_LOG_INFO);
    CHECK_THAT(log.messages[0], Catch::StartsWith("backend auto: running on"));
    CHECK(log.messages[0].find('\n') == std::string::npos);
  } else {
    CHECK(log.messages.empty());  // a GPU taken without anything passed over says nothing
  }
  tern_session_free(s);
  tern_set_log_callback(nullptr, &log);
  const size_t before = log.messages.size();
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  CHECK(log.messages.size() == before);  // back on stderr
  tern_session_free(s);
  tern_model_free(model);
}
