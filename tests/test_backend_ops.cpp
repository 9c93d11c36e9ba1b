// SPDX-License-Identifier: MIT
// Runs every case of the op case table (support/op_cases.h) on every backend through the public C API: one Catch2
// test per (group, backend), "<group> on CPU" and "<group> on Vulkan", with one section per case, so that ctest
// lists and runs the groups in parallel and a failure names the case and the backend. Per session of a case: the
// CPU at each of the case's thread counts, Vulkan with one thread and a CPU session of the same options beside it;
// every run against its reference and, off the CPU, against the CPU path; the state bytes where the case gives them.
// A Vulkan test without a device is a visible skip (TERN_SKIP_BACKEND_WITHOUT_DEVICE); a backend that refuses a case
// says why.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <string>

#include "op_cases.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;
using tern::test::CaseRun;
using tern::test::CaseSession;
using tern::test::On;
using tern::test::OpCase;

namespace {

bool runs_on(On on, tern_backend backend) {
  switch (on) {
    case On::kEveryBackend: return true;
    case On::kCpuOnly: return backend == TERN_BACKEND_CPU;
    case On::kDeviceOnly: return backend != TERN_BACKEND_CPU;
  }
  return false;
}

// A session of the case's options, or null where `backend` may refuse the case and did (reported as a skip).
tern_session* open_session(const OpCase& c, tern_backend backend, const tern_model* model, int threads,
                           const CaseSession& cs) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.backend = backend;
  so.threads = threads;
  so.max_tokens = cs.max_tokens;
  so.max_batch = cs.max_batch;
  so.forward_only = cs.forward_only ? 1 : 0;
  tern_session* s = nullptr;
  std::vector<std::unique_ptr<test::EnvOverride>> env;
  if (backend != TERN_BACKEND_CPU) {
    for (const auto& [name, value] : cs.device_env) env.push_back(std::make_unique<test::EnvOverride>(name.c_str(), value));
  }
  const tern_status st = tern_session_create(model, &so, &s);
  if (st == TERN_OK) return s;
  const std::string message = tern_last_error();
  const bool may_refuse = std::find(c.may_refuse.begin(), c.may_refuse.end(), backend) != c.may_refuse.end();
  if (may_refuse && st == TERN_UNSUPPORTED) {
    WARN("skipped: " << test::backend_name(backend) << " refuses '" << c.name << "': " << message);
    test::note_skipped();
    return nullptr;
  }
  FAIL(test::backend_name(backend) << " refused a case it should run (status " << int(st) << "): " << message);
  return nullptr;
}

void check_log_probabilities(const std::vector<float>& got, int64_t width, double tolerance) {
  const int64_t rows = int64_t(got.size()) / width;
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < width; ++j) sum += std::exp(double(got[size_t(r * width + j)]));
    worst = std::max(worst, std::fabs(sum - 1.0));
  }
  INFO("rows are log-probabilities: worst |sum(exp(row)) - 1| " << worst);
  CHECK(worst <= std::max(tolerance, 1e-5));
}

// The runs of one session: each `passes` times against its reference and, off the CPU, the CPU path.
void check_runs(const OpCase& c, const CaseSession& cs, tern_session* s, tern_session* cpu, int64_t width,
                double tolerance) {
  for (size_t r = 0; r < cs.runs.size(); ++r) {
    const CaseRun& run = cs.runs[r];
    const std::vector<float> base = cpu ? test::run_ids(cpu, run.ids, width, run.segment) : std::vector<float>();
    for (int pass = 0; pass < c.passes; ++pass) {
      const std::vector<float> got = test::run_ids(s, run.ids, width, run.segment);
      REQUIRE(got.size() == run.want.size());
      const double vs_ref = test::relative_error(got.data(), run.want.data(), got.size());
      INFO("run " << r << ": n " << run.ids.size() << ", "
                  << (run.segment == 0 ? std::string("one forward") : "appends of " + std::to_string(run.segment))
                  << ", pass " << pass << ": vs reference " << vs_ref);
      CHECK(vs_ref <= tolerance);
      if (cpu) {
        const double vs_cpu = test::relative_error(got.data(), base.data(), got.size());
        INFO("vs CPU " << vs_cpu);
        CHECK(vs_cpu <= (c.vulkan_vs_cpu_tolerance < 0 ? tolerance : c.vulkan_vs_cpu_tolerance));
      }
      if (c.rows_are_log_probabilities) check_log_probabilities(got, width, tolerance);
    }
  }
}

void check_state(const OpCase& c, const CaseSession& cs, tern_session* s, tern_session* cpu) {
  tern_memory_plan allocated{};
  REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
  if (cs.state_bytes) {
    CHECK(allocated.state_bytes == *cs.state_bytes);
    for (int64_t tokens : cs.state_plan_tokens) {
      tern_memory_plan plan{};
      REQUIRE(tern_session_plan(s, tokens, &plan) == TERN_OK);
      INFO("planned for " << tokens << " tokens");
      CHECK(plan.state_bytes == *cs.state_bytes);
    }
  }
  if (c.state_matches_cpu && cpu) test::check_state_matches(s, cpu);
}

void check_vocabulary(const OpCase& c, tern_session* s, int64_t width) {
  if (c.out_of_range_id < 0) return;
  std::vector<float> out(static_cast<size_t>(width));
  CHECK(tern_session_forward(s, &c.out_of_range_id, 1, out.data()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("outside the vocabulary"));
}

void run_case(const OpCase& c, tern_backend backend) {
  TERN_SKIP_BACKEND_WITHOUT_DEVICE(backend);
  INFO("case '" << c.name << "' on " << test::backend_name(backend));
  const double tolerance = backend == TERN_BACKEND_CPU ? c.cpu_tolerance : c.vulkan_tolerance;
  test::BuiltCase built = c.build();
  REQUIRE(built.model != nullptr);
  size_t sessions_run = 0;
  for (size_t i = 0; i < built.sessions.size(); ++i) {
    const CaseSession& cs = built.sessions[i];
    if (!runs_on(cs.on, backend)) continue;
    ++sessions_run;
    const std::vector<int> threads = backend == TERN_BACKEND_CPU ? c.cpu_threads : std::vector<int>{1};
    for (int t : threads) {
      INFO("session " << i << ": max_tokens " << cs.max_tokens << ", max_batch " << cs.max_batch << ", threads " << t);
      tern_session* s = open_session(c, backend, built.model, t, cs);
      if (s == nullptr) {
        tern_model_free(built.model);
        return;
      }
      tern_session* cpu = backend == TERN_BACKEND_CPU ? nullptr : open_session(c, TERN_BACKEND_CPU, built.model, 2, cs);
      check_runs(c, cs, s, cpu, built.width, tolerance);
      check_state(c, cs, s, cpu);
      check_vocabulary(c, s, built.width);
      if (cpu) tern_session_free(cpu);
      tern_session_free(s);
    }
  }
  tern_model_free(built.model);
  CHECK(sessions_run > 0);
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

// The cases of one group on one backend, each in its own section.
void run_group(const std::vector<size_t>& members, tern_backend backend) {
  TERN_SKIP_BACKEND_WITHOUT_DEVICE(backend);
  std::string other_kernels;
  if (backend == TERN_BACKEND_CPU && !test::cpu_kernels_as_asked(&other_kernels)) {
    WARN("skipped: " << other_kernels);  // the entry for a kernel variant this CPU lacks
    test::note_skipped();
    return;
  }
  for (size_t i : members) {
    const OpCase& c = test::op_cases()[i];
    DYNAMIC_SECTION(c.name) { run_case(c, backend); }
  }
}

// Catch2 runs a registered invoker as one test case.
class GroupInvoker : public Catch::ITestInvoker {
 public:
  GroupInvoker(std::vector<size_t> members, tern_backend backend) : members_(std::move(members)), backend_(backend) {}
  void invoke() const override { run_group(members_, backend_); }

 private:
  std::vector<size_t> members_;  // indices into op_cases()
  tern_backend backend_;
};

// One test per (group, backend) with cases there, registered before main() runs so that Catch2 lists them to ctest;
// groups in the table's order, tagged with their cases' tags.
const bool registered = [] {
  static std::deque<std::string> names, tags;  // Catch2 keeps references to the registered strings
  const auto& cases = test::op_cases();
  std::vector<std::string> groups;
  for (const OpCase& c : cases) {
    if (std::find(groups.begin(), groups.end(), c.group) == groups.end()) groups.push_back(c.group);
  }
  for (tern_backend backend : {TERN_BACKEND_CPU, TERN_BACKEND_VULKAN}) {
    for (const std::string& group : groups) {
      std::vector<size_t> members;
      std::string group_tags = "[backend_ops]";
      for (size_t i = 0; i < cases.size(); ++i) {
        if (cases[i].group != group || !runs_on(cases[i].on, backend)) continue;
        members.push_back(i);
        for (size_t at = 0; at < cases[i].tags.size();) {  // each "[tag]" once
          const size_t end = cases[i].tags.find(']', at) + 1;
          const std::string tag = cases[i].tags.substr(at, end - at);
          if (group_tags.find(tag) == std::string::npos) group_tags += tag;
          at = end;
        }
      }
      if (members.empty()) continue;
      if (backend == TERN_BACKEND_VULKAN) group_tags += "[vulkan]";
      names.push_back(group + " on " + test::backend_name(backend));
      tags.push_back(group_tags);
      Catch::AutoReg(new GroupInvoker(std::move(members), backend), CATCH_INTERNAL_LINEINFO, Catch::StringRef(),
                     Catch::NameAndTags{names.back(), tags.back()});
    }
  }
  return true;
}();

}  // namespace
