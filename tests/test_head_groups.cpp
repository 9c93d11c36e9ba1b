// SPDX-License-Identifier: MIT
// Layers whose heads are split into groups of different attention kinds (converter/reference-family.md, "groups";
// schema/tern.fbs, ATTENTION). The goldens groups_strided_fixed and groups_routing_sliding run with the other
// goldens (test_models.cpp, test_routing.cpp); this file covers the planner's state per group and config errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "convert.h"
#include "op_graph.h"
#include "tern/tern.h"
#include "test_support.h"

using namespace tern;

namespace {

// tests/goldens/<golden> with its "attention" replaced, in a scratch directory; the conversion's status.
Status convert_with_attention(const std::string& golden, const nlohmann::json& attention, const std::string& dir) {
  const std::string from = test::source_path("tests/goldens/" + golden);
  nlohmann::json config = nlohmann::json::parse(test::read_file(from + "/config.json"));
  config["attention"] = attention;
  test::write_file(dir + "/config.json", config.dump(2));
  std::filesystem::copy_file(from + "/model.safetensors", dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  convert::ConvertOptions opts;
  opts.quiet = true;
  return convert::convert_checkpoint(dir, dir + "/model.tern", opts);
}

// The planner's streaming state, in bytes, of the golden's weights under `attention` for a session of n tokens.
uint64_t state_bytes(const std::string& golden, const nlohmann::json& attention, int64_t n, const std::string& tag) {
  const std::string dir = test::scratch_dir("head_groups_" + tag);
  const Status st = convert_with_attention(golden, attention, dir);
  INFO(tag << ": " << st.message());
  REQUIRE(st.ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load((dir + "/model.tern").c_str(), &model) == TERN_OK);
  tern_session* s = test::make_session(model, 1, n);
  REQUIRE(s != nullptr);
  tern_memory_plan plan{};
  REQUIRE(tern_session_plan(s, n, &plan) == TERN_OK);
  tern_session_free(s);
  tern_model_free(model);
  return plan.state_bytes;
}

}  // namespace

TEST_CASE("head groups: a grouped layer's state is each group's own state, by its kind and its heads",
          "[converter][planner]") {
  // groups_strided_fixed: layer 0 = strided (2 heads) | fixed (3) | sliding (1); layer 1 = fixed split (4) |
  // strided split (2); 6 heads. A layer's state is linear in its heads, so a group of h heads holds h/6 of what the
  // same kind over all 6 heads holds: measured here on ungrouped conversions of the same weights.
  const nlohmann::json golden = nlohmann::json::parse(
      test::read_file(test::source_path("tests/goldens/groups_strided_fixed/config.json")))["attention"];
  for (int64_t n : {20, 300, 512}) {
    INFO("n = " << n);
    uint64_t want = 0;
    for (int layer = 0; layer < 2; ++layer) {
      for (const nlohmann::json& group : golden[layer]["groups"]) {
        nlohmann::json kind = group;
        kind.erase("num_heads");
        // Both layers of the golden's model under this one kind: twice one layer's state over 6 heads.
        const uint64_t both = state_bytes("groups_strided_fixed", kind, n, "single");
        REQUIRE(both % 12 == 0);
        want += both / 12 * group["num_heads"].get<uint64_t>();
      }
    }
    const uint64_t grouped = state_bytes("groups_strided_fixed", golden, n, "grouped");
    CHECK(grouped == want);
    // The bounded groups (sliding, fixed) keep it under what strided heads everywhere would hold.
    const uint64_t all_strided = state_bytes("groups_strided_fixed", nlohmann::json{{"kind", "strided"}, {"stride", 16}},
                                             n, "strided");
    if (n > 32) CHECK(grouped < all_strided);
  }
}

TEST_CASE("head groups: malformed groups are conversion errors that name the field", "[converter]") {
  struct Case {
    const char* attention;
    const char* message;
  };
  // groups_strided_fixed has 6 heads.
  const Case cases[] = {
      {R"({"kind": "groups"})", "'attention.groups' must be a non-empty list"},
      {R"({"kind": "groups", "groups": []})", "'attention.groups' must be a non-empty list"},
      {R"({"kind": "groups", "groups": [{"num_heads": 2, "kind": "dense"}, 3]})", "'attention.groups[1]' must be an object"},
      {R"({"kind": "groups", "groups": [{"kind": "dense"}, {"num_heads": 6}]})", "'attention.groups[0].num_heads'"},
      {R"({"kind": "groups", "groups": [{"num_heads": 0}, {"num_heads": 6}]})", "'attention.groups[0].num_heads'"},
      {R"({"kind": "groups", "groups": [{"num_heads": 2}, {"num_heads": 3}]})", "have 5 heads in all, but num_heads is 6"},
      {R"({"kind": "groups", "groups": [{"num_heads": 4}, {"num_heads": 4}]})", "more heads than num_heads (6)"},
      {R"({"kind": "groups", "groups": [{"num_heads": 3, "kind": "compressive", "mem_len": 4, "cmem_len": 4, "rate": 2},
                                        {"num_heads": 3}]})", "'attention.groups[0].kind'"},
      {R"({"kind": "groups", "groups": [{"num_heads": 3, "kind": "groups", "groups": []}, {"num_heads": 3}]})",
       "'attention.groups[0].kind'"},
      {R"({"kind": "groups", "groups": [{"num_heads": 3, "kind": "strided", "stride": 4, "heads": "split"},
                                        {"num_heads": 3}]})", "\"split\" needs an even num_heads, got 3"},
      {R"({"kind": "groups", "groups": [{"num_heads": 2, "kind": "sliding"}, {"num_heads": 4}]})",
       "'attention.groups[0].window'"},
      {R"({"kind": "groups", "groups": [{"num_heads": 2, "kind": "routing", "clusters": 2, "window": 8,
                                         "local_heads": 2, "local_chunk": 4}, {"num_heads": 4}]})",
       "leaves no routing head of 2"},
  };
  for (const Case& c : cases) {
    const std::string dir = test::scratch_dir("head_groups_bad");
    const Status st = convert_with_attention("groups_strided_fixed", nlohmann::json::parse(c.attention), dir);
    INFO(c.attention << " -> " << st.message());
    CHECK_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains(c.message));
    CHECK_FALSE(std::filesystem::exists(dir + "/model.tern"));
  }
}
