// SPDX-License-Identifier: MIT
#include "cpu/backend.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "cpu/arena.h"
#include "cpu/core_share.h"
#include "cpu/half_rows.h"
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/lsh_fold.h"
#include "cpu/op_table.h"
#include "cpu/packed_weights.h"
#include "cpu/thread_probe.h"
#include "ops/op.h"

namespace tern::cpu {
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

bool half_activations(const BackendConfig& config) {
  return config.options->activation_storage == TERN_ACTIVATION_STORAGE_F16;
}

Status supports(const Node&, const Model&) { return Status::Ok(); }  // a kernel for every op and kind (op_table.cpp)

// The arena before any kernel is built: with the row chains, without the LSH folds (which only shrink it), and with
// every value counted as float16 when activations may be: a lower bound.
uint64_t arena_lower_bound(const Model& model, const BackendConfig& config) {
  const std::vector<bool> all_ops(model.nodes().size(), true);
  const std::vector<bool> all_half(half_activations(config) ? model.values().size() : 0, true);
  const auto chains = CpuBackend::pick_row_chains(model, all_ops, config.max_batch, config.options->row_block_rows, {});
  return plan_cpu_arena(model, all_ops, config.max_batch, chains, {}, all_half).bytes;
}

}  // namespace

Result<std::unique_ptr<Backend>> CpuBackend::create(const Model& model, const BackendConfig& config) {
  std::unique_ptr<CpuBackend> backend(new CpuBackend(model, config.options->allocator));
  Status built = Status::Ok();
  try {
    built = backend->build(config);
  } catch (const std::bad_alloc&) {  // a kernel's state or table refused; the buffers made so far go with backend
    const std::string note = refusal_note(&backend->buffers_);
    built = OutOfMemory("cannot allocate the CPU session's buffers" + (note.empty() ? ": out of memory" : note));
  }
  TERN_RETURN_IF_ERROR(built);
  return std::unique_ptr<Backend>(std::move(backend));
}

CpuBackend::~CpuBackend() {
  kernels_.clear();  // the kernels go before the pool they ran on
  if (pool_) pthreadpool_destroy(pool_);
}

std::vector<RowChain> CpuBackend::pick_row_chains(const Model& model, const std::vector<bool>& run, int64_t max_batch,
                                                  int64_t block_rows, const std::vector<ValueAlias>& aliases) {
  std::vector<RowChain> candidates = find_row_chains(model, run, block_rows, aliases);
  // A block size set by the caller runs every chain in blocks (tests check the blocked path on small models).
  if (block_rows > 0) return candidates;
  return choose_row_chains(model, run, max_batch, candidates);
}

Status CpuBackend::build(const BackendConfig& config) {
  const tern_session_options& options = *config.options;
  if (options.weight_storage == TERN_WEIGHT_STORAGE_F16) {
    if (config.named) {
      return Unsupported("weight_storage F16 is a Vulkan option: the CPU backend runs the file's float32 weights "
                         "(use backend Vulkan, or weight_storage F32)");
    }
    ignored_ = "weights float32 (weight_storage F16 is a Vulkan option)";
  }
  threads_ = config.threads;
  shares_cores_ = options.threads == 0;
  max_batch_ = config.max_batch;
  if (threads_ > 1) TERN_RETURN_IF_ERROR(probe_worker_threads(threads_ - 1));  // the caller is the pool's first
  pool_ = pthreadpool_create(size_t(threads_));
  if (!pool_) return OutOfMemory("cannot create a thread pool of " + std::to_string(threads_) + " threads");

  const auto& nodes = model_.nodes();
  half_kv_ = config.options->kv_storage == TERN_KV_STORAGE_F16;
  KernelConfig cfg{config.max_tokens, max_batch_, threads_, pool_, half_kv_, config.options->forward_only == 1,
                   config.sinks, &buffers_};
  std::vector<bool> stateful(nodes.size(), false);
  // LSH layers run inside their attention op, one head at a time (cpu/lsh_fold.h).
  const std::vector<LshFold> folds = find_lsh_folds(model_);
  std::vector<const LshFold*> fold_of(nodes.size(), nullptr);  // per node: the fold it is part of
  for (const LshFold& f : folds) {
    for (int i : {f.attention, f.norm, f.projection, f.output, f.residual}) {
      if (i >= 0) fold_of[size_t(i)] = &f;
    }
    if (f.output >= 0) aliases_.push_back({f.residual_in, f.residual_out, f.attention, nodes[size_t(f.attention)].outputs[0]});
  }
  // Weights read only through their packed copy (cpu/packed_weights.h) leave memory: a tensor's pages of the mapped
  // file are dropped as soon as the last kernel using it has packed it, so the file's pages and the packed copies are
  // not resident together (at 600 MB of weights that would double the peak). A weight any other kernel reads (a tied
  // embedding, LSH rotations, the reference kernels of a test) stays, or comes back from the file if read. A folded
  // node's weights are packed by its fold's attention kernel, which may come after it.
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
  // The model's packing read buffer goes when this function returns, built or failed.
  struct EndPacking {
    PackedWeights& cache;
    ~EndPacking() { cache.end_packing(); }
  } end_packing{packed_weights(model_)};
  uint64_t scratch = 0;
  for (const Node& node : nodes) {
    const LshFold* fold = fold_of[size_t(node.index)];
    const bool packed_elsewhere = node.code == fb::OpCode::LINEAR;  // by the attention kernel of its fold
    TERN_ASSIGN_OR_RETURN(auto kernel, !fold ? make_kernel(node, model_, cfg)
                                       : fold->attention == node.index
                                           ? make_lsh_attention_folded(node, *fold, model_, cfg)
                                           : make_folded_away(packed_elsewhere));
    stateful[node.index] = kernel->has_state();
    scratch = std::max(scratch, kernel->scratch_bytes());
    for (const TensorInfo* t : node.weights) {
      if (!t) continue;
      int8_t& p = packed_only[size_t(t - tensors.data())];
      p = p != 0 && kernel->weights_packed() ? 1 : 0;
    }
    kernels_.push_back(std::move(kernel));
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
  // run_hidden_ is a subset of run_all_ (the hidden state feeds the head), so the arena planned for run_all_ serves it.
  hidden_ = find_hidden_state(model_);
  if (hidden_.value >= 0 && fold_of[size_t(hidden_.producer)]) {
    const std::string name = model_.values()[size_t(hidden_.value)].name;
    hidden_ = HiddenState{};
    hidden_.why = "the hidden state " + name + " is written inside an LSH layer the CPU runs as one op";
  }
  std::vector<bool> hidden_seed = stateful;
  if (hidden_.value >= 0) hidden_seed[size_t(hidden_.producer)] = true;
  run_hidden_ = ops_feeding(model_, hidden_seed);
  for (const LshFold& f : folds) {  // their work is the attention's; their values take no arena
    for (int folded : {f.norm, f.projection, f.output, f.residual}) {
      if (folded >= 0) run_all_[size_t(folded)] = run_for_state_[size_t(folded)] = run_hidden_[size_t(folded)] = false;
    }
  }

  chains_ = pick_row_chains(model_, run_all_, max_batch_, options.row_block_rows, aliases_);
  chain_at_.assign(nodes.size(), -1);
  for (size_t c = 0; c < chains_.size(); ++c) chain_at_[size_t(chains_[c].first_op)] = int(c);
  if (half_activations(config)) half_values_ = pick_half_values(model_, run_all_, chains_, aliases_);
  size_t staging_floats = 0;
  staged_ = plan_staging(model_, chains_, half_values_, &staging_floats);
  const ArenaPlan arena_plan = plan_cpu_arena(model_, run_all_, max_batch_, chains_, aliases_, half_values_);
  tern_memory_plan exact{};
  for (const auto& k : kernels_) {
    exact.packed_weight_bytes += k->packed_weight_bytes();
    exact.state_bytes += k->state_bytes();
  }
  const size_t arena_floats = arena_plan.bytes / sizeof(float) + kArenaAlignment / sizeof(float);  // + alignment slack
  // + alignment slack: the kernels' vector loads of their scratch tiles must not split cache lines.
  const size_t scratch_floats = scratch / sizeof(float) + kArenaAlignment / sizeof(float);
  exact.arena_bytes = (arena_floats + scratch_floats + sink_floats + staging_floats) * sizeof(float);
  if (config.exact_need) *config.exact_need = exact;
  TERN_RETURN_IF_ERROR(
      check_fits(exact, true, options.memory_budget_bytes, model_, config.max_tokens, max_batch_));
  try {
    staging_.resize(staging_floats);
    arena_.resize(arena_floats);
    scratch_.resize(scratch_floats);
    output_sink_.resize(sink_floats);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("cannot allocate an arena of " + std::to_string(arena_plan.bytes) + " bytes" +
                       refusal_note(&buffers_));
  }
  // Align the arena base to 64 bytes; every offset is a multiple of 64.
  auto base = reinterpret_cast<uintptr_t>(arena_.data());
  auto* aligned = reinterpret_cast<uint8_t*>((base + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment);
  value_ptrs_.assign(model_.values().size(), nullptr);
  for (size_t v = 0; v < value_ptrs_.size(); ++v) {
    if (arena_plan.offsets[v] >= 0) value_ptrs_[v] = aligned + arena_plan.offsets[v];
  }
  block_ptrs_ = value_ptrs_;
  park_workers(pool_);  // they spin-wait after creation (and after packing on the pool) otherwise
  const auto scratch_at = reinterpret_cast<uintptr_t>(scratch_.data());
  scratch_base_ = reinterpret_cast<float*>((scratch_at + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment);
  return Status::Ok();
}

Status CpuBackend::run(const int32_t* ids, int64_t n, int64_t pos0, float* logits, OpProfile* profile) {
  RunContext ctx;
  ctx.n = n;
  ctx.pos0 = pos0;
  ctx.ids = ids;
  return run_ops(ctx, logits ? run_all_ : run_for_state_, logits, profile);
}

Status CpuBackend::run_hidden(const int32_t* ids, int64_t n, int64_t pos0, float* hidden, double* pooled_sum,
                              OpProfile* profile) {
  if (hidden_.value < 0) return Unsupported(hidden_.why);
  RunContext ctx;
  ctx.n = n;
  ctx.pos0 = pos0;
  ctx.ids = ids;
  hidden_out_ = hidden;
  pooled_sum_out_ = pooled_sum;
  const Status st = run_ops(ctx, run_hidden_, nullptr, profile);
  hidden_out_ = nullptr;
  pooled_sum_out_ = nullptr;
  return st;
}

Status CpuBackend::run_ops(const RunContext& call, const std::vector<bool>& run, float* logits, OpProfile* profile) {
  value_ptrs_[model_.output_value()] = logits ? logits : output_sink_.data();
  const CallCores cores(CoreShare::process(), pool_, threads_, shares_cores_);
  RunContext ctx = call;
  ctx.call_end = call.pos0 + call.n;
  ctx.pool = cores.pool();
  ctx.threads = threads_;  // the work's split, the same whether the pool or the calling thread alone runs it
  ctx.values = &value_ptrs_;
  ctx.scratch = scratch_base_;
  ctx.half_values = half_values_.empty() ? nullptr : &half_values_;
  const int64_t n = ctx.n;
  const int n_ops = int(model_.nodes().size());
  for (int i = 0; i < n_ops; ++i) {
    if (!run[size_t(i)]) continue;
    if (abort_ && abort_(abort_data_) != 0) {
      value_ptrs_[model_.output_value()] = nullptr;
      return Status(TERN_ABORTED, "the app's abort callback stopped the call before op " + model_.nodes()[size_t(i)].label() +
                                      "; the session was reset");
    }
    const int c = chain_at_[size_t(i)];
    // A chain with float16 places runs as a chain even in one block: its staging widens and narrows them.
    if (c >= 0 && (n > chains_[size_t(c)].block_rows || !staged_[size_t(c)].empty())) {
      TERN_RETURN_IF_ERROR(run_chain(c, ctx, run, profile));
      i = chains_[size_t(c)].last_op;
    } else {
      TERN_RETURN_IF_ERROR(run_op(ctx, i, true, profile));  // a chain of one block is its ops run one after another
      if (i == hidden_.producer) take_hidden(value_ptrs_, 0, n);
    }
  }
  value_ptrs_[model_.output_value()] = nullptr;
  return Status::Ok();
}

void CpuBackend::take_hidden(const std::vector<void*>& values, int64_t row0, int64_t rows) {
  if (!hidden_out_ && !pooled_sum_out_) return;  // a call for logits
  // Float32 rows: a value stored as float16 is only ever written inside a chain, through its float32 staging block
  // (cpu/half_values.h), or by a folded LSH layer, whose hidden state this backend does not give (build).
  const int64_t width = hidden_.width;
  const float* rows_at = static_cast<const float*>(values[size_t(hidden_.value)]);
  if (hidden_out_) std::copy_n(rows_at, size_t(rows * width), hidden_out_ + row0 * width);
  if (!pooled_sum_out_) return;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; ++j) pooled_sum_out_[j] += double(rows_at[r * width + j]);
  }
}

Status CpuBackend::run_op(const RunContext& ctx, int index, bool count_call, OpProfile* profile) {
  const auto start = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Status st = kernels_[size_t(index)]->run(ctx);
  if (profile) {
    auto& [calls, ns] = (*profile)[size_t(index)];
    if (count_call) ++calls;
    ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  }
  return st;
}

Status CpuBackend::run_chain(int c, const RunContext& ctx, const std::vector<bool>& run, OpProfile* profile) {
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
        halves_to_floats(ctx.pool, halves, block.n * p.width, rows);
      }
    }
    for (int i = chain.first_op; i <= chain.last_op; ++i) {
      if (!run[size_t(i)]) continue;
      TERN_RETURN_IF_ERROR(run_op(block, i, row0 == 0, profile));
      if (i == hidden_.producer) take_hidden(block_ptrs_, row0, block.n);
    }
    for (const StagedPlace& p : staged) {
      if (p.narrow_into >= 0 && run[size_t(values[size_t(p.narrow_into)].producer)]) {
        auto* halves = static_cast<uint16_t*>(value_ptrs_[size_t(p.narrow_into)]) + row0 * p.width;
        floats_to_halves(ctx.pool, staging_.data() + p.staging, block.n * p.width, halves);
      }
    }
  }
  return Status::Ok();
}

const DeviceInfo& CpuBackend::device() const {
  // The driver field says which variant of the kernels' hot loops runs (cpu/isa.h), e.g. "kernels: avx512".
  static const DeviceInfo kCpu{"CPU", isa_description(), "CPU"};
  return kCpu;
}

void CpuBackend::reset() {
  for (auto& k : kernels_) k->reset();
}

Status CpuBackend::shift(int64_t keep, int64_t position) {
  for (auto& k : kernels_) {
    if (k->has_state()) TERN_RETURN_IF_ERROR(k->shift(keep, position));
  }
  return Status::Ok();
}

void CpuBackend::plan(int64_t n, tern_memory_plan* p) const {
  uint64_t scratch = 0;
  for (const auto& k : kernels_) {
    p->packed_weight_bytes += k->packed_weight_bytes();
    scratch = std::max(scratch, k->scratch_bytes_for(n));
  }
  p->arena_bytes = plan_cpu_arena(model_, run_all_, n, chains_, aliases_, half_values_).bytes + scratch +
                   staging_.size() * sizeof(float);
  for (const RowChain& chain : chains_) {
    if (n <= chain.block_rows) continue;  // one block: runs as before, nothing is saved
    ++p->row_chains;
    p->row_block_rows = std::max(p->row_block_rows, chain.block_rows);
  }
}

void CpuBackend::allocated(tern_memory_plan* p) const {
  p->packed_weight_bytes = 0;
  for (const auto& k : kernels_) p->packed_weight_bytes += k->packed_weight_bytes();
  p->arena_bytes = (arena_.size() + scratch_.size() + output_sink_.size() + staging_.size()) * sizeof(float);
  p->state_bytes = 0;
  for (const auto& k : kernels_) p->state_bytes += k->state_bytes();
}

Status CpuBackend::save_state(int node, int64_t position, uint8_t* out) const {
  kernels_[size_t(node)]->save_state(position, out);
  return Status::Ok();
}

Status CpuBackend::check_state(int node, int64_t position, const uint8_t* in) const {
  const CpuKernel& k = *kernels_[size_t(node)];
  const uint64_t counts = k.saved_count_bytes(position);
  TERN_RETURN_IF_ERROR(k.check_saved_counts(position, in));
  if (k.saves_halves()) {
    return check_saved_halves(model_.nodes()[size_t(node)].label(), in + counts, k.saved_state_bytes(position) - counts);
  }
  return check_saved_floats(model_.nodes()[size_t(node)].label(), in + counts, k.saved_state_bytes(position) - counts);
}

Status CpuBackend::load_state(int node, int64_t position, const uint8_t* in) {
  kernels_[size_t(node)]->load_state(position, in);
  return Status::Ok();
}

}  // namespace tern::cpu

namespace tern {

const BackendEntry& cpu_backend() {
  static const BackendEntry kEntry{cpu::supports, cpu::arena_lower_bound, cpu::CpuBackend::create};
  return kEntry;
}

}  // namespace tern
