#include "core/session.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "core/half_values.h"
#include "core/lsh_fold.h"
#include "cpu/half_rows.h"
#include "cpu/kernels.h"

namespace tern {
namespace {

// Marks ops whose results reach a seed op, walking the graph backwards.
std::vector<bool> ops_feeding(const Model& model, const std::vector<bool>& seeds) {
  const auto& nodes = model.nodes();
  std::vector<bool> needed = seeds;
  std::vector<bool> value_needed(model.values().size(), false);
  for (int i = int(nodes.size()) - 1; i >= 0; --i) {
    bool feeds = needed[i];
    for (int v : nodes[i].outputs) feeds = feeds || value_needed[v];
    if (!feeds) continue;
    needed[i] = true;
    for (int v : nodes[i].inputs) value_needed[v] = true;
  }
  return needed;
}

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

// Fails with the planner's numbers when `need` does not fit the budget or, without one, the machine's memory.
// Before the kernels are built (`packed` false) the weights are not packed yet: the total is a lower bound.
Status check_fits(const tern_memory_plan& need, bool packed, uint64_t budget, const Model& model, int64_t max_tokens,
                  int64_t max_batch) {
  const uint64_t limit = budget ? budget : physical_memory_bytes();
  const uint64_t total = add_saturating(add_saturating(need.packed_weight_bytes, need.arena_bytes), need.state_bytes);
  if (limit == 0 || total <= limit) return Status::Ok();
  return OutOfMemory(std::string("the session needs ") + (packed ? "" : "at least ") + std::to_string(total) +
                     " bytes (" + (packed ? "packed weights " + std::to_string(need.packed_weight_bytes) + " + " : "") +
                     "arena " + std::to_string(need.arena_bytes) + " for max_batch " + std::to_string(max_batch) +
                     " + state " + std::to_string(need.state_bytes) + " for max_tokens " + std::to_string(max_tokens) +
                     (packed ? "" : ", before packing weights") + "), more than " +
                     (budget ? "its memory budget of " : "this machine's memory of ") + std::to_string(limit) +
                     " bytes; the model's " + std::to_string(model.weight_bytes()) +
                     " bytes of weights are mapped from its file and not counted");
}

}  // namespace

Result<std::unique_ptr<Session>> Session::create(const Model& model, const tern_session_options& options) {
  std::unique_ptr<Session> session(new Session(model));
  Status st = session->build(options);
  if (!st.ok()) return st;
  return session;
}

Session::~Session() {
  kernels_.clear();  // XNNPACK operators go before the pool they ran on
  if (pool_) pthreadpool_destroy(pool_);
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
  if (weight_storage == TERN_WEIGHT_STORAGE_F16 && backend == TERN_BACKEND_CPU) {
    return Unsupported("weight_storage F16 is a Vulkan option: the CPU backend runs the file's float32 weights "
                       "(use backend Vulkan, or weight_storage F32)");
  }
  const int activation_storage = raw_enum(options.activation_storage);
  if (activation_storage != TERN_ACTIVATION_STORAGE_F32 && activation_storage != TERN_ACTIVATION_STORAGE_F16) {
    return InvalidArgument("unknown activation_storage " + std::to_string(activation_storage) + " (0: F32, 1: F16)");
  }
  const bool half_activations = activation_storage == TERN_ACTIVATION_STORAGE_F16;
  if (half_activations && backend == TERN_BACKEND_VULKAN) {
    return Unsupported("activation_storage F16 is a CPU option: the Vulkan backend keeps activations in float32 "
                       "(use backend CPU, or activation_storage F32)");
  }
  if (options.device < 0) return InvalidArgument("device must be 0 (the best) or a device number from 1");
  if (options.threads < 0 || options.threads > 1024) return InvalidArgument("threads must be in [0, 1024]");
  if (options.max_tokens < 0 || options.max_batch < 0) return InvalidArgument("max_tokens and max_batch must not be negative");
  if (options.row_block_rows < 0) return InvalidArgument("row_block_rows must not be negative");
  // cpuinfo under-reports cores on some virtual machines; the OS count is the one to trust.
  threads_ = options.threads > 0 ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  max_tokens_ = options.max_tokens > 0 ? options.max_tokens : model_.max_context();
  if (max_tokens_ <= 0) return InvalidArgument("the model has no context limit: set max_tokens");
  if (max_tokens_ > (int64_t(1) << 31)) return InvalidArgument("max_tokens " + std::to_string(max_tokens_) + " is too large");
  // A streaming session may hold far more tokens than one call needs: by default a call is at most one context.
  const int64_t default_batch = model_.max_context() > 0 ? std::min(max_tokens_, model_.max_context()) : max_tokens_;
  max_batch_ = options.max_batch > 0 ? std::min(options.max_batch, max_tokens_) : default_batch;

  // The planner's numbers before anything big is allocated: a session that cannot fit fails here rather than in
  // the allocator (or the OOM killer). Weights are packed by the kernels, so the exact total is checked again below.
  const auto& all_nodes = model_.nodes();
  tern_memory_plan estimate{};
  const std::vector<bool> all_ops(all_nodes.size(), true);
  // With float16 activations only some values are stored as halves: counting every one at 2 bytes keeps the
  // estimate a lower bound.
  const std::vector<bool> all_half(half_activations ? model_.values().size() : 0, true);
  estimate.arena_bytes =
      plan_arena(model_, all_ops, max_batch_, pick_row_chains(all_ops, options.row_block_rows), {}, all_half).bytes;
  for (const Node& node : all_nodes) {
    const OpDef* def = find_op(node.code);
    if (def->state_bytes) estimate.state_bytes = add_saturating(estimate.state_bytes, def->state_bytes(node, max_tokens_));
  }
  TERN_RETURN_IF_ERROR(check_fits(estimate, false, options.memory_budget_bytes, model_, max_tokens_, max_batch_));

  Status device_status;
  if (build_device(options, &device_status)) return device_status;

  pool_ = pthreadpool_create(size_t(threads_));
  if (!pool_) return OutOfMemory("cannot create a thread pool of " + std::to_string(threads_) + " threads");

  const auto& nodes = model_.nodes();
  KernelConfig cfg{max_tokens_, max_batch_, threads_, pool_};
  std::vector<bool> stateful(nodes.size(), false);
  // LSH layers run inside their attention op, one head at a time (core/lsh_fold.h).
  const std::vector<LshFold> folds = find_lsh_folds(model_);
  std::vector<const LshFold*> fold_of(nodes.size(), nullptr);  // per node: the fold it is part of
  for (const LshFold& f : folds) {
    for (int i : {f.attention, f.norm, f.projection, f.output, f.residual}) {
      if (i >= 0) fold_of[size_t(i)] = &f;
    }
    if (f.output >= 0) aliases_.push_back({f.residual_in, f.residual_out, f.attention, nodes[size_t(f.attention)].outputs[0]});
  }
  // Weights only XNNPACK reads (from its packed copy) leave memory: a tensor's pages of the mapped file are dropped
  // as soon as the last kernel using it has packed it, so the file's pages and the packed copies are not resident
  // together (at 600 MB of weights that would double the peak). A weight any other kernel reads (a tied embedding,
  // LSH rotations, the reference kernels of a test) stays, or comes back from the file if read. A folded node's
  // weights are packed by its fold's attention kernel, which may come after it.
  const auto& tensors = model_.tensors();
  std::vector<int> last_user(tensors.size(), -1);
  auto packer = [&](const Node& node) {
    const LshFold* fold = fold_of[size_t(node.index)];
    return fold ? std::max(node.index, fold->attention) : node.index;
  };
  for (const Node& node : nodes) {
    for (const TensorInfo* t : node.weights) {
      if (t) last_user[size_t(t - tensors.data())] = std::max(last_user[size_t(t - tensors.data())], packer(node));
    }
  }
  std::vector<int8_t> packed_only(tensors.size(), -1);  // per tensor: -1 unused, 1 only packing kernels use it, 0 not
  std::vector<std::vector<size_t>> release_after(nodes.size());  // per node: the tensors whose pages go once it is built
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (last_user[t] >= 0) release_after[size_t(last_user[t])].push_back(t);
  }
  uint64_t scratch = 0;
  for (const Node& node : nodes) {
    const LshFold* fold = fold_of[size_t(node.index)];
    const bool packed_elsewhere = node.code == fb::OpCode::LINEAR;  // by the attention kernel of its fold
    auto kernel = !fold ? find_op(node.code)->make_cpu(node, model_, cfg)
                  : fold->attention == node.index ? cpu::make_lsh_attention_folded(node, *fold, model_, cfg)
                                                  : cpu::make_folded_away(packed_elsewhere);
    if (!kernel.ok()) return kernel.status();
    stateful[node.index] = kernel.value()->has_state();
    scratch = std::max(scratch, kernel.value()->scratch_bytes());
    for (const TensorInfo* t : node.weights) {
      if (!t) continue;
      int8_t& p = packed_only[size_t(t - tensors.data())];
      p = p != 0 && kernel.value()->weights_packed() ? 1 : 0;
    }
    kernels_.push_back(std::move(kernel).value());
    for (size_t t : release_after[size_t(node.index)]) {
      if (packed_only[t] == 1) model_.release_pages(tensors[t]);
    }
  }
  // A call without logits runs only the ops that feed the state. When the op writing the output is one of them, it
  // writes into output_sink_ instead of the caller's absent logits.
  const int output_producer = model_.values()[model_.output_value()].producer;
  const size_t sink_floats = stateful[output_producer] ? size_t(max_batch_) * size_t(model_.vocab_size()) : 0;
  std::vector<bool> output_seed(nodes.size(), false);
  output_seed[output_producer] = true;
  for (size_t i = 0; i < nodes.size(); ++i) output_seed[i] = output_seed[i] || stateful[i];
  run_all_ = ops_feeding(model_, output_seed);
  run_for_state_ = ops_feeding(model_, stateful);
  for (const LshFold& f : folds) {  // their work is the attention's; their values take no arena
    for (int folded : {f.norm, f.projection, f.output, f.residual}) {
      if (folded >= 0) run_all_[size_t(folded)] = run_for_state_[size_t(folded)] = false;
    }
  }

  profile_.assign(nodes.size(), {0, 0});
  chains_ = pick_row_chains(run_all_, options.row_block_rows);
  chain_at_.assign(nodes.size(), -1);
  for (size_t c = 0; c < chains_.size(); ++c) chain_at_[size_t(chains_[c].first_op)] = int(c);
  if (half_activations) half_values_ = pick_half_values(model_, run_all_, chains_, aliases_);
  size_t staging_floats = 0;
  staged_ = plan_staging(model_, chains_, half_values_, &staging_floats);
  arena_plan_ = plan_arena(model_, run_all_, max_batch_, chains_, aliases_, half_values_);
  tern_memory_plan exact{};
  for (const auto& k : kernels_) {
    exact.packed_weight_bytes += k->packed_weight_bytes();
    exact.state_bytes += k->state_bytes();
  }
  const size_t arena_floats = arena_plan_.bytes / sizeof(float) + kArenaAlignment / sizeof(float);  // + alignment slack
  const size_t scratch_floats = scratch / sizeof(float);
  exact.arena_bytes = (arena_floats + scratch_floats + sink_floats + staging_floats) * sizeof(float);
  TERN_RETURN_IF_ERROR(check_fits(exact, true, options.memory_budget_bytes, model_, max_tokens_, max_batch_));
  try {
    staging_.resize(staging_floats);
    arena_.resize(arena_floats);
    scratch_.resize(scratch_floats);
    output_sink_.resize(sink_floats);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("cannot allocate an arena of " + std::to_string(arena_plan_.bytes) + " bytes");
  }
  // Align the arena base to 64 bytes; every offset is a multiple of 64.
  auto base = reinterpret_cast<uintptr_t>(arena_.data());
  auto* aligned = reinterpret_cast<uint8_t*>((base + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment);
  value_ptrs_.assign(model_.values().size(), nullptr);
  for (size_t v = 0; v < value_ptrs_.size(); ++v) {
    if (arena_plan_.offsets[v] >= 0) value_ptrs_[v] = aligned + arena_plan_.offsets[v];
  }
  block_ptrs_ = value_ptrs_;
  return Status::Ok();
}

bool Session::build_device(const tern_session_options& options, Status* st) {
  if (options.backend == TERN_BACKEND_CPU) return false;
  VulkanConfig config;
  config.device = options.device;
  config.allow_cpu_device = options.backend == TERN_BACKEND_VULKAN || options.device > 0;
  config.max_tokens = max_tokens_;
  config.max_batch = max_batch_;
  config.f16_weights = options.weight_storage == TERN_WEIGHT_STORAGE_F16;
  auto runner = create_vulkan_runner(model_, config);
  if (!runner.ok()) {
    if (options.backend == TERN_BACKEND_VULKAN) {
      *st = runner.status();
      return true;
    }
    std::fprintf(stderr, "tern: backend auto: running on the CPU (%s)%s\n", runner.status().message().c_str(),
                 config.f16_weights ? "; weights float32 (weight_storage F16 is a Vulkan option)" : "");
    return false;
  }
  device_ = std::move(runner).value();
  if (options.activation_storage == TERN_ACTIVATION_STORAGE_F16) {  // backend auto (Vulkan itself refused it above)
    std::fprintf(stderr, "tern: backend auto: running on %s; activations float32 (activation_storage F16 is a CPU "
                 "option)\n", device_->device().name.c_str());
  }
  run_all_.assign(model_.nodes().size(), true);
  run_for_state_ = run_all_;
  profile_.assign(model_.nodes().size(), {0, 0});
  device_ns_.assign(model_.nodes().size(), 0);
  *st = Status::Ok();
  return true;
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
  if (position_ + n > max_tokens_) {
    return InvalidArgument("the session holds " + std::to_string(position_) + " tokens; " + std::to_string(n) +
                           " more exceed its max_tokens of " + std::to_string(max_tokens_) + " (reset it, or create it with a larger max_tokens)");
  }
  if (device_) {
    if (profiling_) std::fill(device_ns_.begin(), device_ns_.end(), 0);
    Status st = device_->run(ids, n, position_, logits, profiling_ ? device_ns_.data() : nullptr);
    for (size_t i = 0; profiling_ && i < device_ns_.size(); ++i) {
      profile_[i].first += 1;
      profile_[i].second += device_ns_[i];
    }
    if (!st.ok()) {
      reset();
      return st;
    }
    position_ += n;
    return Status::Ok();
  }
  const std::vector<bool>& run = logits ? run_all_ : run_for_state_;
  value_ptrs_[model_.output_value()] = logits ? logits : output_sink_.data();
  RunContext ctx;
  ctx.n = n;
  ctx.pos0 = position_;
  ctx.pool = pool_;
  ctx.threads = threads_;
  ctx.ids = ids;
  ctx.values = &value_ptrs_;
  ctx.scratch = scratch_.data();
  ctx.half_values = half_values_.empty() ? nullptr : &half_values_;
  const int n_ops = int(model_.nodes().size());
  for (int i = 0; i < n_ops; ++i) {
    if (!run[size_t(i)]) continue;
    Status st;
    const int c = chain_at_[size_t(i)];
    // A chain with float16 places runs as a chain even in one block: its staging widens and narrows them.
    if (c >= 0 && (n > chains_[size_t(c)].block_rows || !staged_[size_t(c)].empty())) {
      st = run_chain(c, ctx, run);
      i = chains_[size_t(c)].last_op;
    } else {
      st = run_op(ctx, i, true);  // a chain of one block is the same as its ops run one after another
    }
    if (!st.ok()) {
      // A half-applied call would leave some caches ahead of others: forget the sequence.
      reset();
      return st;
    }
  }
  value_ptrs_[model_.output_value()] = nullptr;
  position_ += n;
  return Status::Ok();
}

std::vector<RowChain> Session::pick_row_chains(const std::vector<bool>& run, int64_t block_rows) const {
  std::vector<RowChain> candidates = find_row_chains(model_, run, block_rows, aliases_);
  // A block size set by the caller runs every chain in blocks (tests check the blocked path on small models).
  if (block_rows > 0) return candidates;
  return choose_row_chains(model_, run, max_batch_, candidates);
}

Status Session::run_op(const RunContext& ctx, int index, bool count_call) {
  const auto start = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Status st = kernels_[size_t(index)]->run(ctx);
  if (profiling_) {
    auto& [calls, ns] = profile_[size_t(index)];
    if (count_call) ++calls;
    ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
  return st;
}

Status Session::run_chain(int c, const RunContext& ctx, const std::vector<bool>& run) {
  const RowChain& chain = chains_[size_t(c)];
  const std::vector<StagedPlace>& staged = staged_[size_t(c)];
  const auto& values = model_.values();
  RunContext block = ctx;
  block.values = &block_ptrs_;
  // Blocked values sit at their own [block_rows, width] place for every block; they were sized for it.
  for (int v : chain.blocked) block_ptrs_[size_t(v)] = value_ptrs_[size_t(v)];
  for (int64_t row0 = 0; row0 < ctx.n; row0 += chain.block_rows) {
    block.n = std::min(chain.block_rows, ctx.n - row0);
    block.pos0 = ctx.pos0 + row0;
    block.ids = ctx.ids + row0;
    for (int v : chain.full) {  // rows [row0, row0 + block.n) of a full-size value
      auto* base = static_cast<uint8_t*>(value_ptrs_[size_t(v)]);  // null: an output no op run now writes
      const uint64_t row_bytes = uint64_t(values[size_t(v)].width) * dtype_size(values[size_t(v)].dtype);
      block_ptrs_[size_t(v)] = base ? base + uint64_t(row0) * row_bytes : nullptr;
    }
    // Float16 places: the chain's ops see a float32 block, widened from the rows before and narrowed back after.
    for (const StagedPlace& p : staged) {
      float* rows = staging_.data() + p.staging;
      for (int v : p.values) block_ptrs_[size_t(v)] = rows;
      if (p.widen_from >= 0) {
        const auto* halves = static_cast<const uint16_t*>(value_ptrs_[size_t(p.widen_from)]) + row0 * p.width;
        cpu::halves_to_floats(ctx.pool, halves, block.n * p.width, rows);
      }
    }
    for (int i = chain.first_op; i <= chain.last_op; ++i) {
      if (!run[size_t(i)]) continue;
      TERN_RETURN_IF_ERROR(run_op(block, i, row0 == 0));
    }
    for (const StagedPlace& p : staged) {
      if (p.narrow_into >= 0 && run[size_t(values[size_t(p.narrow_into)].producer)]) {
        auto* halves = static_cast<uint16_t*>(value_ptrs_[size_t(p.narrow_into)]) + row0 * p.width;
        cpu::floats_to_halves(ctx.pool, staging_.data() + p.staging, block.n * p.width, halves);
      }
    }
  }
  return Status::Ok();
}

void Session::set_profiling(bool enabled) {
  profiling_ = enabled;
  std::fill(profile_.begin(), profile_.end(), std::pair<int64_t, uint64_t>{0, 0});
}

void Session::reset() {
  for (auto& k : kernels_) k->reset();
  position_ = 0;
}

tern_memory_plan Session::plan(int64_t n) const {
  tern_memory_plan p{};
  p.n_tokens = n;
  p.weight_bytes = model_.weight_bytes();
  uint64_t scratch = 0;
  for (const auto& k : kernels_) {
    p.packed_weight_bytes += k->packed_weight_bytes();
    scratch = std::max(scratch, k->scratch_bytes_for(n));
  }
  if (device_) p.packed_weight_bytes = device_->weight_bytes();
  p.arena_bytes = plan_arena(model_, run_all_, n, chains_, aliases_, half_values_).bytes + scratch +
                  staging_.size() * sizeof(float);
  for (const RowChain& chain : chains_) {
    if (n <= chain.block_rows) continue;  // one block: runs as before, nothing is saved
    ++p.row_chains;
    p.row_block_rows = std::max(p.row_block_rows, chain.block_rows);
  }
  for (const Node& node : model_.nodes()) {
    const OpDef* def = find_op(node.code);
    if (def->state_bytes) p.state_bytes += def->state_bytes(node, n);
    if (def->dense_bytes) p.dense_attention_bytes = std::max(p.dense_attention_bytes, def->dense_bytes(node, n));
  }
  return p;
}

tern_memory_plan Session::allocated() const {
  tern_memory_plan p = plan(max_tokens_);
  p.n_tokens = max_batch_;
  p.arena_bytes = (arena_.size() + scratch_.size() + output_sink_.size() + staging_.size()) * sizeof(float);
  p.state_bytes = 0;
  if (device_) {
    p.arena_bytes = device_->arena_bytes();
    p.state_bytes = device_->state_bytes();
  }
  for (const auto& k : kernels_) p.state_bytes += k->state_bytes();
  return p;
}

}  // namespace tern
