#include "core/session.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
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

// Attention sinks need every attention op dense with rotary positions (ops/sink_cache.h): TERN_UNSUPPORTED naming
// the first op that is not.
Status check_sinks(const Model& model) {
  const char* why = "attention sinks (sink_window) rotate each cached key by its index in the cache, so every "
                    "attention op must be dense with rotary positions";
  bool any_attention = false;
  for (const Node& node : model.nodes()) {
    if (node.code == fb::OpCode::POSITION) {
      return Unsupported(std::string(why) + ": the model has learned absolute positions (" + node.label() + ")");
    }
    if (node.code == fb::OpCode::ROTARY) {
      bool feeds_attention = false;
      for (const Node& user : model.nodes()) {
        if (user.code == fb::OpCode::ATTENTION && rotary_feeding(model, user) == &node) feeds_attention = true;
      }
      if (!feeds_attention) return Unsupported(std::string(why) + ": " + node.label() + " feeds no attention op alone");
    }
    if (node.code != fb::OpCode::ATTENTION) continue;
    any_attention = true;
    const auto* p = node.fb_op->params_as_AttentionParams();
    if (p->kind_type() != fb::AttentionKind::Dense) {
      return Unsupported(std::string(why) + ": " + node.label() + " is " + attention_kind(node).name + " attention");
    }
    if (!rotary_feeding(model, node)) {
      return Unsupported(std::string(why) + ": " + node.label() + " reads no rotary positions");
    }
  }
  if (!any_attention) return Unsupported(std::string(why) + ": the model has no attention op");
  return Status::Ok();
}

}  // namespace

Status check_fits(const tern_memory_plan& need, bool packed, uint64_t budget, const Model& model, int64_t max_tokens,
                  int64_t max_batch) {
  const uint64_t physical = physical_memory_bytes(), address_space = address_space_limit_bytes();
  const bool by_address_space = !budget && address_space > 0 && (physical == 0 || address_space < physical);
  const uint64_t limit = budget ? budget : by_address_space ? address_space : physical;
  const uint64_t total = add_saturating(add_saturating(need.packed_weight_bytes, need.arena_bytes), need.state_bytes);
  if (limit == 0 || total <= limit) return Status::Ok();
  return OutOfMemory(std::string("the session needs ") + (packed ? "" : "at least ") + std::to_string(total) +
                     " bytes (" + (packed ? "packed weights " + std::to_string(need.packed_weight_bytes) + " + "
                               : need.packed_weight_bytes ? "tables computed at creation " + std::to_string(need.packed_weight_bytes) + " + "
                                                          : "") +
                     "arena " + std::to_string(need.arena_bytes) + " for max_batch " + std::to_string(max_batch) +
                     " + state " + std::to_string(need.state_bytes) + " for max_tokens " + std::to_string(max_tokens) +
                     (packed ? "" : ", before packing weights") + "), more than " +
                     (budget             ? "its memory budget of "
                      : by_address_space ? "the process's address-space limit (ulimit -v) of "
                                         : "this machine's memory of ") + std::to_string(limit) +
                     " bytes; the model's " + std::to_string(model.weight_bytes()) +
                     " bytes of weights are mapped from its file and not counted");
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
  if (weight_storage != TERN_WEIGHT_STORAGE_F32 && weight_storage != TERN_WEIGHT_STORAGE_F16) {
    return InvalidArgument("unknown weight_storage " + std::to_string(weight_storage) + " (0: F32, 1: F16)");
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
  max_tokens_ = sinks_.on() ? sinks_.capacity() : options.max_tokens > 0 ? options.max_tokens : model_.max_context();
  if (max_tokens_ <= 0) return InvalidArgument("the model has no context limit: set max_tokens");
  if (max_tokens_ > (int64_t(1) << 31)) return InvalidArgument("max_tokens " + std::to_string(max_tokens_) + " is too large");
  // A streaming session may hold far more tokens than one call needs: by default a call is at most one context.
  const int64_t default_batch = model_.max_context() > 0 ? std::min(max_tokens_, model_.max_context()) : max_tokens_;
  // With sinks a call may pass the S + W tokens the state holds: it runs whole before the cut.
  const int64_t batch_cap = sinks_.on() ? kMaxSequence : max_tokens_;
  max_batch_ = options.max_batch > 0 ? std::min(options.max_batch, batch_cap) : default_batch;

  // Backend auto: a Vulkan GPU when there is one that runs the model, otherwise the CPU.
  std::vector<const BackendEntry*> candidates;
  if (backend != TERN_BACKEND_CPU) candidates.push_back(&vulkan_backend());
  if (backend != TERN_BACKEND_VULKAN) candidates.push_back(&cpu_backend());
  BackendConfig config{&options, max_tokens_, max_batch_, threads_, backend != TERN_BACKEND_AUTO, sinks_};

  // The planner's numbers before anything big is allocated: a session that cannot fit fails here rather than in
  // the allocator (or the OOM killer). The least arena any candidate needs keeps the estimate a lower bound; the
  // backend checks its exact total once its weights are packed.
  tern_memory_plan estimate{};
  estimate.arena_bytes = UINT64_MAX;
  for (const BackendEntry* entry : candidates) {
    estimate.arena_bytes = std::min(estimate.arena_bytes, entry->arena_lower_bound(model_, config));
  }
  // With kv_storage F16 the estimate counts float16 keys and values: a lower bound under backend auto too (a
  // Vulkan session keeps them in float32, and checks its own exact total).
  const tern_kv_storage requested_kv = options.kv_storage;
  for (const Node& node : model_.nodes()) {
    const OpDef* def = find_op(node.code);
    if (def->state_bytes) estimate.state_bytes = add_saturating(estimate.state_bytes, def->state_bytes(node, max_tokens_, requested_kv));
    if (def->setup_bytes) estimate.packed_weight_bytes = add_saturating(estimate.packed_weight_bytes, def->setup_bytes(node, max_batch_));
  }
  TERN_RETURN_IF_ERROR(check_fits(estimate, false, options.memory_budget_bytes, model_, max_tokens_, max_batch_));

  std::string passed_over;  // backend auto: why the candidate before the one taken was not
  for (const BackendEntry* entry : candidates) {
    Status st = create_backend(*entry, config);
    if (st.ok()) break;
    if (config.named || entry == candidates.back()) return st;
    passed_over = st.message();
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
  return Status::Ok();
}

Status Session::check_shift() const {
  const char* why = "a context shift rotates each cached key to its new position, so every op with state must be "
                    "dense attention fed by static rotary positions";
  if (sinks_.on()) return Unsupported(std::string(why) + ", in a session without attention sinks");
  for (const Node& node : model_.nodes()) {
    if (!find_op(node.code)->state_bytes) continue;
    if (node.code != fb::OpCode::ATTENTION || node.fb_op->params_as_AttentionParams()->kind_type() != fb::AttentionKind::Dense) {
      return Unsupported(std::string(why) + ": " + node.label() + " is not dense attention");
    }
    const Node* rotary = rotary_feeding(model_, node);
    if (!rotary) return Unsupported(std::string(why) + ": " + node.label() + " reads no rotary positions");
    if (rotary->fb_op->params_as_RotaryParams()->scaling() != fb::RotaryScaling::STATIC) {
      return Unsupported(std::string(why) + ": " + rotary->label() + "'s frequencies depend on the call");
    }
  }
  return Status::Ok();
}

Status Session::shift(int64_t keep) {
  if (keep < 0 || keep > position_) {
    return InvalidArgument("a context shift keeps " + std::to_string(keep) + " of the " + std::to_string(position_) +
                           " tokens the session holds");
  }
  TERN_RETURN_IF_ERROR(check_shift());
  if (keep == position_) return Status::Ok();
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

Status Session::append(const int32_t* ids, int64_t n, float* logits) {
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
  Status st = backend_->run(ids, n, position_, logits, profiling_ ? &profile_ : nullptr);
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

void Session::set_profiling(bool enabled) {
  profiling_ = enabled;
  std::fill(profile_.begin(), profile_.end(), std::pair<int64_t, uint64_t>{0, 0});
  std::fill(profile_flops_.begin(), profile_flops_.end(), 0);
}

void Session::reset() {
  backend_->reset();
  position_ = 0;
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
