// SPDX-License-Identifier: MIT
#include "core/session.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "ops/attention_kinds.h"
#include "ops/op.h"
#include "ops/rotary.h"

namespace tern {
namespace {

// The raw value of an enum option: a caller (C, or a cast) may pass a number outside the enum, which C++ must not
// load as the enum.
template <typename E>
int raw_enum(const E& option) {
  static_assert(sizeof(int) == sizeof(E), "an int-sized enum");
  int raw = 0;
  std::memcpy(&raw, &option, sizeof raw);
  return raw;
}

uint64_t add_saturating(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

// The process's address-space limit (ulimit -v, RLIMIT_AS), 0 when there is none: a session larger than it would
// fail in the allocator anyway.
uint64_t address_space_limit_bytes() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
  return uint64_t(limit.rlim_cur);
}

// MemAvailable of /proc/meminfo in bytes (what the kernel can hand out without swapping); 0 where it cannot be read.
uint64_t available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
  std::fclose(f);
  return found && kib <= UINT64_MAX / 1024 ? uint64_t(kib) * 1024 : 0;
}

// What a session's need is checked against, and how a message names it ("its memory budget of N bytes").
struct MemoryLimit {
  uint64_t bytes = 0;  // 0: unknown, nothing to check
  std::string name;
};

// check_fits's limit: the budget; without one, the process's address-space limit or the machine's memory, the less.
MemoryLimit memory_limit(uint64_t budget) {
  if (budget) return {budget, "its memory budget of " + std::to_string(budget) + " bytes"};
  const uint64_t physical = physical_memory_bytes(), address_space = address_space_limit_bytes();
  if (address_space > 0 && (physical == 0 || address_space < physical)) {
    return {address_space, "the process's address-space limit (ulimit -v) of " + std::to_string(address_space) + " bytes"};
  }
  return {physical, "this machine's memory of " + std::to_string(physical) + " bytes"};
}

// The limit a fitted context (no max_tokens, no context limit in the model) must fit: the budget; without one, half
// of MemAvailable at creation (physical memory where /proc/meminfo has none), the other half left to the app, the
// model's mapped weights and everything else on the machine; within the address-space limit.
MemoryLimit fitting_limit(uint64_t budget) {
  if (budget) return memory_limit(budget);
  const uint64_t available = available_memory_bytes();
  const uint64_t base = available ? available : physical_memory_bytes();
  MemoryLimit limit{base / 2, "half of " + std::string(available ? "MemAvailable" : "this machine's memory") + " (" +
                                  std::to_string(base / 2) + " of " + std::to_string(base) + " bytes)"};
  const uint64_t address_space = address_space_limit_bytes();
  if (address_space > 0 && address_space < limit.bytes) limit = memory_limit(0);
  return limit;
}

uint64_t total_of(const tern_memory_plan& need) {
  return add_saturating(add_saturating(need.packed_weight_bytes, need.arena_bytes), need.state_bytes);
}

// The largest n in [1, hi] for which fits(n) holds, or 0 when fits(1) does not, by bisection: for a need that grows
// with n (the state with max_tokens, the arena with max_batch), fits(n) holds and fits(n + 1) does not, unless n is hi.
template <typename Fits>
int64_t largest_fitting(int64_t hi, Fits fits) {
  if (hi < 1 || !fits(1)) return 0;
  if (fits(hi)) return hi;
  int64_t lo = 1;  // fits(lo), !fits(hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

Status check_fits_within(const tern_memory_plan& need, bool packed, const MemoryLimit& limit, const Model& model,
                         int64_t max_tokens, int64_t max_batch) {
  const uint64_t total = total_of(need);
  if (limit.bytes == 0 || total <= limit.bytes) return Status::Ok();
  return OutOfMemory(std::string("the session needs ") + (packed ? "" : "at least ") + std::to_string(total) +
                     " bytes (" + (packed ? "packed weights " + std::to_string(need.packed_weight_bytes) + " + "
                               : need.packed_weight_bytes ? "tables computed at creation " + std::to_string(need.packed_weight_bytes) + " + "
                                                          : "") +
                     "arena " + std::to_string(need.arena_bytes) + " for max_batch " + std::to_string(max_batch) +
                     " + state " + std::to_string(need.state_bytes) + " for max_tokens " + std::to_string(max_tokens) +
                     (packed ? "" : ", before packing weights") + "), more than " + limit.name +
                     "; the model's " + std::to_string(model.weight_bytes()) +
                     " bytes of weights are mapped from its file and not counted");
}

// Attention sinks need every attention op dense with rotary positions (ops/sink_cache.h): TERN_UNSUPPORTED naming
// the first op that is not.
Status check_sinks(const Model& model) {
  const char* why = "attention sinks (sink_window) rotate each cached key by its index in the cache, so every "
                    "attention op must be dense with rotary positions";
  std::vector<bool> feeds_attention(model.nodes().size(), false);  // per node: a ROTARY an attention op reads alone
  bool any_attention = false;
  for (const Node& node : model.nodes()) {
    if (node.code == fb::OpCode::POSITION) {
      return Unsupported(std::string(why) + ": the model has learned absolute positions (" + node.label() + ")");
    }
    if (node.code != fb::OpCode::ATTENTION) continue;
    any_attention = true;
    const auto* p = node.fb_op->params_as_AttentionParams();
    if (p->kind_type() != fb::AttentionKind::Dense) {
      return Unsupported(std::string(why) + ": " + node.label() + " is " + attention_kind(node).name + " attention");
    }
    const Node* rotary = rotary_feeding(model, node);
    if (!rotary) return Unsupported(std::string(why) + ": " + node.label() + " reads no rotary positions");
    feeds_attention[size_t(rotary->index)] = true;
  }
  if (!any_attention) return Unsupported(std::string(why) + ": the model has no attention op");
  for (const Node& node : model.nodes()) {
    if (node.code == fb::OpCode::ROTARY && !feeds_attention[size_t(node.index)]) {
      return Unsupported(std::string(why) + ": " + node.label() + " feeds no attention op alone");
    }
  }
  return Status::Ok();
}

// Whether a context shift can serve the model (Session::check_shift): TERN_UNSUPPORTED naming the first op that
// cannot move and rotate its state.
Status shift_support(const Model& model, const SinkCache& sinks) {
  const char* why = "a context shift rotates each cached key to its new position, so every op with state must be "
                    "dense attention fed by static rotary positions";
  if (sinks.on()) return Unsupported(std::string(why) + ", in a session without attention sinks");
  for (const Node& node : model.nodes()) {
    if (!find_op(node.code)->state_bytes) continue;
    if (node.code != fb::OpCode::ATTENTION || node.fb_op->params_as_AttentionParams()->kind_type() != fb::AttentionKind::Dense) {
      return Unsupported(std::string(why) + ": " + node.label() + " is not dense attention");
    }
    const Node* rotary = rotary_feeding(model, node);
    if (!rotary) return Unsupported(std::string(why) + ": " + node.label() + " reads no rotary positions");
    if (rotary->fb_op->params_as_RotaryParams()->scaling() != fb::RotaryScaling::STATIC) {
      return Unsupported(std::string(why) + ": " + rotary->label() + "'s frequencies depend on the call");
    }
  }
  return Status::Ok();
}

}  // namespace

Status check_fits(const tern_memory_plan& need, bool packed, uint64_t budget, const Model& model, int64_t max_tokens,
                  int64_t max_batch) {
  return check_fits_within(need, packed, memory_limit(budget), model, max_tokens, max_batch);
}

Result<std::unique_ptr<Session>> Session::create(const Model& model, const tern_session_options& options) {
  std::unique_ptr<Session> session(new Session(model));
  Status st = session->build(options);
  if (!st.ok()) return st;
  return session;
}

Status Session::build(const tern_session_options& options) {
  const int backend = raw_enum(options.backend);
  if (backend != TERN_BACKEND_CPU && backend != TERN_BACKEND_AUTO && backend != TERN_BACKEND_VULKAN) {
    return InvalidArgument("unknown backend " + std::to_string(backend));
  }
  const int weight_storage = raw_enum(options.weight_storage);
  if (weight_storage != TERN_WEIGHT_STORAGE_F32 && weight_storage != TERN_WEIGHT_STORAGE_F16 &&
      weight_storage != TERN_WEIGHT_STORAGE_AUTO) {
    return InvalidArgument("unknown weight_storage " + std::to_string(weight_storage) + " (0: F32, 1: F16, 2: AUTO)");
  }
  const int activation_storage = raw_enum(options.activation_storage);
  if (activation_storage != TERN_ACTIVATION_STORAGE_F32 && activation_storage != TERN_ACTIVATION_STORAGE_F16) {
    return InvalidArgument("unknown activation_storage " + std::to_string(activation_storage) + " (0: F32, 1: F16)");
  }
  const int kv_storage = raw_enum(options.kv_storage);
  if (kv_storage != TERN_KV_STORAGE_F32 && kv_storage != TERN_KV_STORAGE_F16) {
    return InvalidArgument("unknown kv_storage " + std::to_string(kv_storage) + " (0: F32, 1: F16)");
  }
  if (options.forward_only != 0 && options.forward_only != 1) {
    return InvalidArgument("forward_only must be 0 or 1, not " + std::to_string(options.forward_only));
  }
  forward_only_ = options.forward_only == 1;
  if (options.allocator && (!options.allocator->allocate || !options.allocator->release)) {
    return InvalidArgument(std::string("allocator: its ") + (options.allocator->allocate ? "release" : "allocate") +
                           " function is NULL; set both, or leave allocator NULL for the library's own");
  }
  if (options.device < 0) return InvalidArgument("device must be 0 (the best) or a device number from 1");
  if (options.threads < 0 || options.threads > 1024) return InvalidArgument("threads must be in [0, 1024]");
  if (options.max_tokens < 0 || options.max_batch < 0) return InvalidArgument("max_tokens and max_batch must not be negative");
  if (options.row_block_rows < 0) return InvalidArgument("row_block_rows must not be negative");
  if (options.sink_tokens < 0 || options.sink_window < 0 || (options.sink_tokens > 0 && options.sink_window == 0) ||
      options.sink_tokens > kMaxSequence || options.sink_window > kMaxSequence - options.sink_tokens) {
    return InvalidArgument("sink_tokens " + std::to_string(options.sink_tokens) + " and sink_window " +
                           std::to_string(options.sink_window) +
                           ": the window must be positive when sinks are set (0 and 0: no sinks), both not negative, "
                           "and their sum at most 2^31");
  }
  sinks_ = SinkCache{options.sink_tokens, options.sink_window};
  if (sinks_.on()) {
    TERN_RETURN_IF_ERROR(check_sinks(model_));
    if (options.max_tokens != 0) {
      return InvalidArgument("max_tokens " + std::to_string(options.max_tokens) + " with attention sinks: the state holds "
                             "sink_tokens + sink_window = " + std::to_string(sinks_.capacity()) +
                             " tokens; leave max_tokens 0");
    }
    if (forward_only_) return InvalidArgument("forward_only with attention sinks: sinks serve a stream of calls");
  }
  // cpuinfo under-reports cores on some virtual machines; the OS count is the one to trust.
  threads_ = options.threads > 0 ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const bool named = backend != TERN_BACKEND_AUTO;

  // Backend auto: a Vulkan GPU when there is one that runs the model, otherwise the CPU.
  std::vector<const BackendEntry*> candidates;
  if (backend != TERN_BACKEND_CPU) candidates.push_back(&vulkan_backend());
  if (backend != TERN_BACKEND_VULKAN) candidates.push_back(&cpu_backend());

  // The planner's numbers before anything big is allocated: a session that cannot fit fails here rather than in
  // the allocator (or the OOM killer), and a session without max_tokens on a model without a context limit takes
  // the most tokens that fit. The least arena any candidate needs keeps the estimate a lower bound; the backend
  // checks its exact total once its weights are packed. With kv_storage F16 the estimate counts float16 keys and
  // values: a lower bound under backend auto too (a Vulkan session keeps them in float32, and checks its own total).
  const tern_kv_storage requested_kv = options.kv_storage;
  auto state_need = [&](int64_t tokens) {
    uint64_t bytes = 0;
    for (const Node& node : model_.nodes()) {
      const OpDef* def = find_op(node.code);
      if (def->state_bytes) bytes = add_saturating(bytes, def->state_bytes(node, tokens, requested_kv));
    }
    return bytes;
  };
  tern_memory_plan calls_for_batch{};  // calls_need's last answer, for its n_tokens
  auto calls_need = [&](int64_t tokens, int64_t batch) {  // tables computed at creation and the arena
    if (calls_for_batch.n_tokens == batch) return calls_for_batch;
    const BackendConfig config{&options, tokens, batch, threads_, named, sinks_};
    tern_memory_plan p{};
    p.n_tokens = batch;
    p.arena_bytes = UINT64_MAX;
    for (const BackendEntry* entry : candidates) p.arena_bytes = std::min(p.arena_bytes, entry->arena_lower_bound(model_, config));
    for (const Node& node : model_.nodes()) {
      const OpDef* def = find_op(node.code);
      if (def->setup_bytes) p.packed_weight_bytes = add_saturating(p.packed_weight_bytes, def->setup_bytes(node, batch));
    }
    return calls_for_batch = p;
  };
  auto need = [&](int64_t tokens, int64_t batch) {
    tern_memory_plan p = calls_need(tokens, batch);
    p.state_bytes = state_need(tokens);
    return p;
  };

  const bool fitted = !sinks_.on() && options.max_tokens == 0 && model_.max_context() == 0;
  const MemoryLimit limit = fitted ? fitting_limit(options.memory_budget_bytes) : memory_limit(options.memory_budget_bytes);
  // max_batch for a session of `tokens`: the app's, within max_tokens; by default a call is at most one context
  // (a streaming session may hold far more tokens than one call needs), and at most kFittedBatch tokens in a
  // fitted context (millions of tokens of state must not size the arena for a call of as many).
  auto batch_for = [&](int64_t tokens) {
    if (options.max_batch > 0) return std::min(options.max_batch, tokens);
    if (fitted) return std::min(kFittedBatch, tokens);
    return model_.max_context() > 0 ? std::min(tokens, model_.max_context()) : tokens;
  };
  auto fits = [&](int64_t tokens) { return total_of(need(tokens, batch_for(tokens))) <= limit.bytes; };
  if (fitted) {
    if (limit.bytes == 0) {
      return InvalidArgument("the model has no context limit and this machine's memory is unknown: set max_tokens");
    }
    max_tokens_ = largest_fitting(kMaxSequence, fits);
    if (max_tokens_ == 0) {
      const Status st = check_fits_within(need(1, 1), false, limit, model_, 1, 1);
      return OutOfMemory("the model has no context limit, and not even max_tokens 1 fits: " + st.message());
    }
    max_batch_ = batch_for(max_tokens_);
  } else {
    max_tokens_ = sinks_.on() ? sinks_.capacity() : options.max_tokens > 0 ? options.max_tokens : model_.max_context();
    if (max_tokens_ > kMaxSequence) return InvalidArgument("max_tokens " + std::to_string(max_tokens_) + " is too large");
    // With sinks a call may pass the S + W tokens the state holds: it runs whole before the cut.
    max_batch_ = sinks_.on() && options.max_batch > 0 ? std::min(options.max_batch, kMaxSequence) : batch_for(max_tokens_);
    Status st = check_fits_within(need(max_tokens_, max_batch_), false, limit, model_, max_tokens_, max_batch_);
    if (!st.ok()) {
      if (sinks_.on()) return st;
      // The same lower bound for smaller sessions: the largest max_tokens it lets through (the exact check, once
      // weights are packed and the kernels' scratch is known, may take fewer).
      const int64_t largest = largest_fitting(max_tokens_ - 1, fits);
      if (largest == 0) return OutOfMemory(st.message() + "; not even max_tokens 1 fits");
      return OutOfMemory(st.message() + "; the largest max_tokens that could fit is " + std::to_string(largest) +
                         " (max_batch " + std::to_string(batch_for(largest)) + ": at least " +
                         std::to_string(total_of(need(largest, batch_for(largest)))) + " bytes)");
    }
  }

  // A fitted context is held to its limit by the backend's exact check too (the budget, or half of MemAvailable).
  tern_session_options backend_options = options;
  if (fitted) backend_options.memory_budget_bytes = limit.bytes;
  tern_memory_plan exact{};
  BackendConfig config{&backend_options, max_tokens_, max_batch_, threads_, named, sinks_, fitted ? &exact : nullptr};
  std::string passed_over;  // backend auto: why the candidate before the one taken was not
  auto create_first = [&]() {
    passed_over.clear();
    for (const BackendEntry* entry : candidates) {
      Status st = create_backend(*entry, config);
      if (st.ok()) return st;
      if (config.named || entry == candidates.back()) return st;
      passed_over = st.message();
    }
    return Status::Ok();
  };
  Status created = create_first();
  if (!created.ok() && fitted && created.code() == TERN_OUT_OF_MEMORY && total_of(exact) > 0) {
    // The packed weights and the exact arena passed what the estimate counted: fit again with what calls really
    // take (constant in max_tokens while max_batch does not grow), once.
    const uint64_t calls = add_saturating(exact.packed_weight_bytes, exact.arena_bytes);
    const int64_t refit = largest_fitting(max_tokens_ - 1, [&](int64_t tokens) {
      return add_saturating(calls, state_need(tokens)) <= limit.bytes;
    });
    if (refit == 0) return OutOfMemory("the model has no context limit, and not even max_tokens 1 fits: " + created.message());
    max_tokens_ = config.max_tokens = refit;
    max_batch_ = config.max_batch = batch_for(refit);
    created = create_first();
  }
  if (!created.ok()) return created;
  context_note_ = "max_tokens " + std::to_string(max_tokens_) + ": ";
  if (sinks_.on()) {
    context_note_ += "sink_tokens " + std::to_string(sinks_.sinks) + " + sink_window " + std::to_string(sinks_.window) +
                     ", the attention sinks' cache";
  } else if (options.max_tokens > 0) {
    context_note_ += "set by the app";
  } else if (!fitted) {
    context_note_ += "the model's context";
  } else {
    const std::string plan = "plan (" + std::to_string(total_of(allocated())) + " bytes, calls of up to " +
                             std::to_string(max_batch_) + " tokens)";
    context_note_ += max_tokens_ == kMaxSequence
                         ? "the most positions a sequence can reach (2^31; the model has no context limit), whose " +
                               plan + " fits " + limit.name
                         : "the largest whose " + plan + " fits " + limit.name + " (the model has no context limit)";
  }
  if (!config.named) {
    const std::string ignored = backend_->ignored_options();
    const std::string where = backend_->where();
    if (!passed_over.empty() || !ignored.empty()) {
      log(TERN_LOG_INFO, "backend auto: running on " + where + (passed_over.empty() ? "" : " (" + passed_over + ")") +
                             (ignored.empty() ? "" : "; " + ignored));
    }
  }
  profile_.assign(model_.nodes().size(), {0, 0});
  profile_flops_.assign(model_.nodes().size(), 0);
  profile_calls_before_.assign(model_.nodes().size(), 0);
  sequence_limit_ = kMaxSequence;
  for (const Node& node : model_.nodes()) {
    const Streaming streaming = find_op(node.code)->streaming(node);
    if (streaming != Streaming::kRowWise && streaming != Streaming::kAppends) splits_calls_ = false;
    sequence_limit_ = std::min(sequence_limit_, max_sequence(node, max_tokens_));
  }
  if (sinks_.on()) {
    // The cache is cut after each call, so a call cut in two would see less: calls stay whole, and the sequence
    // goes on as long as positions count.
    splits_calls_ = false;
    sequence_limit_ = kMaxSequence;
  }
  shift_support_ = shift_support(model_, sinks_);  // asked at every shift: found once
  hidden_ = find_hidden_state(model_);
  pooled_sum_.assign(size_t(std::max<int64_t>(hidden_.width, 0)), 0.0);
  return Status::Ok();
}

Status Session::shift(int64_t keep) {
  if (keep < 0 || keep > position_) {
    return InvalidArgument("a context shift keeps " + std::to_string(keep) + " of the " + std::to_string(position_) +
                           " tokens the session holds");
  }
  TERN_RETURN_IF_ERROR(check_shift());
  if (keep == position_) return Status::Ok();
  ++epoch_;
  Status st = backend_->shift(keep, position_);
  if (!st.ok()) {
    reset();
    return st;
  }
  position_ = keep;
  return Status::Ok();
}

Status Session::create_backend(const BackendEntry& entry, const BackendConfig& config) {
  for (const Node& node : model_.nodes()) TERN_RETURN_IF_ERROR(entry.supports(node, model_));
  TERN_ASSIGN_OR_RETURN(auto created, entry.create(model_, config));
  backend_ = std::move(created);
  return Status::Ok();
}

Status Session::forward(const int32_t* ids, int64_t n, float* logits) {
  reset();
  return append(ids, n, logits);
}

Status Session::forward_hidden(const int32_t* ids, int64_t n, float* hidden, float* pooled) {
  reset();
  if (hidden_.value < 0) return Unsupported("the model has no last hidden state to give: " + hidden_.why);
  if (!hidden && !pooled) return InvalidArgument("neither hidden rows nor a pooled row were asked for");
  std::fill(pooled_sum_.begin(), pooled_sum_.end(), 0.0);
  CallOutput out;
  out.hidden_state = true;
  out.hidden = hidden;
  out.pooled_sum = pooled ? pooled_sum_.data() : nullptr;
  TERN_RETURN_IF_ERROR(append_call(ids, n, out));
  if (pooled) {
    for (size_t j = 0; j < pooled_sum_.size(); ++j) pooled[j] = float(pooled_sum_[j] / double(n));
  }
  return Status::Ok();
}

Status Session::append(const int32_t* ids, int64_t n, float* logits) {
  CallOutput out;
  out.logits = logits;
  return append_call(ids, n, out);
}

Status Session::append_call(const int32_t* ids, int64_t n, const CallOutput& out) {
  if (ids == nullptr || n < 1) return InvalidArgument("append needs at least one token id");
  if (n > max_batch_) {
    return InvalidArgument(std::to_string(n) + " tokens in one call exceed the session's max_batch of " +
                           std::to_string(max_batch_));
  }
  if (position_ + n > sequence_limit_) {
    if (sequence_limit_ > max_tokens_) {
      return InvalidArgument("the session holds " + std::to_string(position_) + " tokens; " + std::to_string(n) +
                             " more exceed the " + std::to_string(sequence_limit_) +
                             " positions a sequence can reach (reset it)");
    }
    return InvalidArgument("the session holds " + std::to_string(position_) + " tokens; " + std::to_string(n) +
                           " more exceed its max_tokens of " + std::to_string(max_tokens_) + " (reset it, or create it with a larger max_tokens)");
  }
  if (position_ > 0 && forward_only_) {
    return Unsupported("the session was created forward_only: it runs whole sequences and cannot continue one after " +
                       std::to_string(position_) + " tokens (reset it, or create it without forward_only)");
  }
  if (profiling_) {
    for (size_t i = 0; i < profile_.size(); ++i) profile_calls_before_[i] = profile_[i].first;
  }
  ++epoch_;
  Status st = run_parts(ids, n, out);
  if (!st.ok()) {
    // A half-applied call would leave some caches ahead of others: forget the sequence.
    reset();
    return st;
  }
  if (profiling_) {  // the ops that ran (a call without logits skips the head)
    for (size_t i = 0; i < profile_.size(); ++i) {
      const Node& node = model_.nodes()[i];
      const OpDef* def = find_op(node.code);
      if (profile_[i].first > profile_calls_before_[i] && def->flops) profile_flops_[i] += def->flops(node, position_, n);
    }
  }
  position_ += n;
  return Status::Ok();
}

Status Session::dispatches(int64_t n, int64_t position, uint64_t* per_node, uint64_t* total) const {
  if (n < 1 || n > max_batch_) {
    return InvalidArgument("a call of " + std::to_string(n) + " tokens: the session runs 1 to its max_batch of " +
                           std::to_string(max_batch_) + " per call");
  }
  if (position < 0 || position + n > sequence_limit_) {
    return InvalidArgument("a call of " + std::to_string(n) + " tokens after position " + std::to_string(position) +
                           ": a sequence of this session holds 0 to " + std::to_string(sequence_limit_) + " tokens");
  }
  if (position > 0 && forward_only_) {
    return InvalidArgument("a call after position " + std::to_string(position) +
                           ": the session was created forward_only, so every call starts at position 0");
  }
  if (per_node) std::fill(per_node, per_node + model_.nodes().size(), uint64_t(0));
  *total = backend_->dispatches(n, position, per_node);
  return Status::Ok();
}

void Session::set_profiling(bool enabled) {
  profiling_ = enabled;
  std::fill(profile_.begin(), profile_.end(), std::pair<int64_t, uint64_t>{0, 0});
  std::fill(profile_flops_.begin(), profile_flops_.end(), 0);
}

void Session::reset() {
  backend_->reset();
  position_ = 0;
  ++epoch_;
}

Status Session::run_parts(const int32_t* ids, int64_t n, const CallOutput& out) {
  const Callbacks& cb = callbacks_;
  OpProfile* profile = profiling_ ? &profile_ : nullptr;
  // Parts are consecutive appends with the same rows (splits_calls_); forward_only keeps no state for a later part.
  const bool parts = (cb.abort || cb.progress) && splits_calls_ && !forward_only_;
  const int64_t step = parts ? kCallbackRows : n, vocab = model_.vocab_size();
  for (int64_t done = 0; done < n;) {
    if (cb.abort && cb.abort(cb.user_data) != 0) {
      return Status(TERN_ABORTED, "the app's abort callback stopped the call after " + std::to_string(done) + " of " +
                                      std::to_string(n) + " tokens; the session was reset");
    }
    const int64_t len = std::min(step, n - done);
    if (out.hidden_state) {
      float* hidden = out.hidden ? out.hidden + done * hidden_.width : nullptr;
      TERN_RETURN_IF_ERROR(backend_->run_hidden(ids + done, len, position_ + done, hidden, out.pooled_sum, profile));
    } else {
      float* logits = out.logits ? out.logits + done * vocab : nullptr;
      TERN_RETURN_IF_ERROR(backend_->run(ids + done, len, position_ + done, logits, profile));
    }
    done += len;
    if (cb.progress) cb.progress(done, n, cb.user_data);
  }
  return Status::Ok();
}

void Session::set_callbacks(const Callbacks& callbacks) {
  callbacks_ = callbacks;
  backend_->set_abort(callbacks.abort, callbacks.user_data);
}

uint64_t Session::bind_generator() {
  if (bound_generator_ != 0) return 0;
  bound_generator_ = ++generator_ids_;
  return bound_generator_;
}

void Session::unbind_generator(uint64_t id) {
  if (id != 0 && bound_generator_ == id) bound_generator_ = 0;
}

tern_memory_plan Session::plan(int64_t n) const {
  tern_memory_plan p{};
  p.n_tokens = n;
  p.weight_bytes = model_.weight_bytes();
  backend_->plan(n, &p);
  for (const Node& node : model_.nodes()) {
    const OpDef* def = find_op(node.code);
    if (def->state_bytes && !(forward_only_ && state_serves_later_calls_only(node))) {
      const int64_t held = sinks_.on() ? sinks_.held(n) : n;  // sinks: the cache never passes S + W tokens
      p.state_bytes = add_saturating(p.state_bytes, def->state_bytes(node, held, backend_->kv_storage()));
    }
    if (def->dense_bytes) p.dense_attention_bytes = std::max(p.dense_attention_bytes, def->dense_bytes(node, n));
  }
  return p;
}

tern_memory_plan Session::allocated() const {
  tern_memory_plan p = plan(max_tokens_);
  p.n_tokens = max_batch_;
  backend_->allocated(&p);
  return p;
}

}  // namespace tern
