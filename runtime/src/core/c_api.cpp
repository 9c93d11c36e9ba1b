// SPDX-License-Identifier: MIT
// The C API: a thin shell over Model and Session that turns Status into codes and messages.
#include <new>
#include <string>
#include <vector>

#include "core/c_api_internal.h"
#include "format/model.h"
#include "core/session.h"
#include "core/sized_options.h"
#include "ops/op.h"
#include "tern/tern.h"

struct tern_model {
  std::unique_ptr<tern::Model> model;
};

struct tern_session {
  std::unique_ptr<tern::Session> session;
  mutable std::string last_error;  // written by failing calls on a const session too (tern_session_plan, ...)
};

namespace {

thread_local std::string g_last_error;

tern_status fail(const tern::Status& st) {
  g_last_error = st.message();
  return st.code();
}

using tern::capi::guarded;
using tern::capi::null_argument;
using tern::capi::record;

// ids [n] of tern_session_forward / _append (fn): not NULL, n at least 1 (the session checks the rest).
tern::Status check_run_arguments(const char* fn, const int32_t* ids, int64_t n) {
  if (n < 1) return tern::InvalidArgument(std::string(fn) + ": n is " + std::to_string(n) + "; a call runs at least one token");
  if (!ids) return null_argument(fn, "ids");
  return tern::Status::Ok();
}

}  // namespace

extern "C" {

const char* tern_version(void) {
#define TERN_STRINGIFY2(x) #x
#define TERN_STRINGIFY(x) TERN_STRINGIFY2(x)
  return TERN_STRINGIFY(TERN_VERSION_MAJOR) "." TERN_STRINGIFY(TERN_VERSION_MINOR) "." TERN_STRINGIFY(TERN_VERSION_PATCH);
#undef TERN_STRINGIFY
#undef TERN_STRINGIFY2
}

void tern_format_versions(uint32_t* min_version, uint32_t* max_version) {
  if (min_version) *min_version = tern::kMinFormatVersion;
  if (max_version) *max_version = tern::kMaxFormatVersion;
}

void tern_session_options_init(tern_session_options* options) {
  if (options) *options = tern_session_options{sizeof(tern_session_options), TERN_BACKEND_CPU, 0, 0, 0, 0, 0, 0,
                                                TERN_WEIGHT_STORAGE_AUTO, TERN_ACTIVATION_STORAGE_F32,
                                                TERN_KV_STORAGE_F32, 0, 0, 0, nullptr};
}

const char* tern_status_string(tern_status status) {
  switch (status) {
    case TERN_OK: return "ok";
    case TERN_INVALID_ARGUMENT: return "invalid argument";
    case TERN_INVALID_MODEL: return "invalid model";
    case TERN_UNSUPPORTED: return "unsupported";
    case TERN_OUT_OF_MEMORY: return "out of memory";
    case TERN_DEVICE_ERROR: return "device error";
    case TERN_IO_ERROR: return "i/o error";
    case TERN_INTERNAL_ERROR: return "internal error";
    case TERN_CONTEXT_FULL: return "context full";
    case TERN_ABORTED: return "aborted";
  }
  return "unknown status";
}

const char* tern_last_error(void) { return g_last_error.c_str(); }

tern_status tern_model_load(const char* path, tern_model** out) {
  if (!path) return fail(null_argument("tern_model_load", "path"));
  if (!out) return fail(null_argument("tern_model_load", "out"));
  *out = nullptr;
  return guarded("while loading the model", [&] {
    auto model = tern::Model::load_file(path);
    if (!model.ok()) return fail(model.status());
    *out = new tern_model{std::move(model).value()};
    return TERN_OK;
  });
}

tern_status tern_model_load_buffer(const void* data, size_t size, tern_model** out) {
  if (!data) return fail(null_argument("tern_model_load_buffer", "data"));
  if (!out) return fail(null_argument("tern_model_load_buffer", "out"));
  *out = nullptr;
  return guarded("while loading the model", [&] {
    auto model = tern::Model::load_buffer(data, size);
    if (!model.ok()) return fail(model.status());
    *out = new tern_model{std::move(model).value()};
    return TERN_OK;
  });
}

tern_status tern_model_get_info(const tern_model* model, tern_model_info* out) {
  if (!model) return fail(null_argument("tern_model_get_info", "model"));
  if (!out) return fail(null_argument("tern_model_get_info", "out"));
  const tern::Model& m = *model->model;
  const auto* meta = m.fb().metadata();
  out->architecture = meta && meta->architecture() ? meta->architecture()->c_str() : "";
  out->description = meta && meta->description() ? meta->description()->c_str() : "";
  out->vocab_size = m.vocab_size();
  out->vocab_is_bytes = meta && meta->vocab() && meta->vocab()->kind() == tern::fb::VocabKind::BYTES;
  out->max_context = m.max_context();
  out->n_ops = int64_t(m.nodes().size());
  out->n_tensors = int64_t(m.tensors().size());
  out->format_version = m.fb().format_version();
  return TERN_OK;
}

int64_t tern_model_segment_length(const tern_model* model) { return model ? model->model->segment_length() : 0; }

uint64_t tern_model_copied_bytes(const tern_model* model) { return model ? model->model->copied_bytes() : 0; }

void tern_model_free(tern_model* model) { delete model; }

tern_status tern_session_create(const tern_model* model, const tern_session_options* options, tern_session** out) {
  if (!model) return fail(null_argument("tern_session_create", "model"));
  if (!out) return fail(null_argument("tern_session_create", "out"));
  *out = nullptr;
  tern_session_options resolved;
  tern_session_options_init(&resolved);
  const tern::Status read = tern::read_sized_options(options, "tern_session_options", &resolved);
  if (!read.ok()) return fail(read);
  return guarded("while creating the session", [&] {
    auto session = tern::Session::create(*model->model, resolved);
    if (!session.ok()) return fail(session.status());
    *out = new tern_session{std::move(session).value(), ""};
    return TERN_OK;
  });
}

void tern_session_free(tern_session* session) { delete session; }

tern_status tern_session_plan(const tern_session* session, int64_t n_tokens, tern_memory_plan* out) {
  if (!session) return fail(null_argument("tern_session_plan", "session"));
  if (!out) return record(session, null_argument("tern_session_plan", "out"));
  if (n_tokens < 1 || n_tokens > (int64_t(1) << 31)) {
    return record(session, tern::InvalidArgument("tern_session_plan: n_tokens " + std::to_string(n_tokens) +
                                                 " is outside [1, 2^31]"));
  }
  return guarded(
      "while planning",
      [&] {
        *out = session->session->plan(n_tokens);
        return TERN_OK;
      },
      [&](const tern::Status& st) { return record(session, st); });
}

tern_status tern_session_memory(const tern_session* session, tern_memory_plan* out) {
  if (!session) return fail(null_argument("tern_session_memory", "session"));
  if (!out) return record(session, null_argument("tern_session_memory", "out"));
  *out = session->session->allocated();
  return TERN_OK;
}

tern_status tern_session_get_backend(const tern_session* session, tern_backend_info* out) {
  if (!session) return fail(null_argument("tern_session_get_backend", "session"));
  if (!out) return record(session, null_argument("tern_session_get_backend", "out"));
  const tern::DeviceInfo& device = session->session->device();
  *out = tern_backend_info{session->session->backend(), device.name.c_str(), device.type.c_str(), device.driver.c_str()};
  return TERN_OK;
}

tern_status tern_session_set_profiling(tern_session* session, int enabled) {
  if (!session) return fail(null_argument("tern_session_set_profiling", "session"));
  session->session->set_profiling(enabled != 0);
  return TERN_OK;
}

tern_status tern_session_get_profile(const tern_session* session, tern_op_profile* out, size_t capacity, size_t* count) {
  if (!session) return fail(null_argument("tern_session_get_profile", "session"));
  if (!count) return record(session, null_argument("tern_session_get_profile", "count"));
  if (!out && capacity > 0) return record(session, null_argument("tern_session_get_profile", "out"));
  const auto& nodes = session->session->model().nodes();
  const auto& profile = session->session->profile();
  *count = nodes.size();
  for (size_t i = 0; i < nodes.size() && i < capacity; ++i) {  // pointers into the model: nothing allocates
    out[i] = tern_op_profile{nodes[i].name.c_str(), tern::find_op(nodes[i].code)->name, profile[i].first, profile[i].second};
  }
  return TERN_OK;
}

tern_status tern_session_get_profile_flops(const tern_session* session, uint64_t* flops, size_t capacity, size_t* count) {
  if (!session) return fail(null_argument("tern_session_get_profile_flops", "session"));
  if (!count) return record(session, null_argument("tern_session_get_profile_flops", "count"));
  if (!flops && capacity > 0) return record(session, null_argument("tern_session_get_profile_flops", "flops"));
  const auto& counted = session->session->profile_flops();
  *count = counted.size();
  for (size_t i = 0; i < counted.size() && i < capacity; ++i) flops[i] = counted[i];
  return TERN_OK;
}

tern_status tern_session_count_dispatches(const tern_session* session, int64_t n_tokens, int64_t position,
                                          uint64_t* per_op, size_t capacity, size_t* count, uint64_t* total) {
  constexpr const char* kFn = "tern_session_count_dispatches";
  if (!session) return fail(null_argument(kFn, "session"));
  if (!count) return record(session, null_argument(kFn, "count"));
  if (!total) return record(session, null_argument(kFn, "total"));
  if (!per_op && capacity > 0) return record(session, null_argument(kFn, "per_op"));
  return guarded(
      "in tern_session_count_dispatches",
      [&] {
        const size_t ops = session->session->model().nodes().size();
        std::vector<uint64_t> per_node(ops);
        const tern::Status st = session->session->dispatches(n_tokens, position, per_node.data(), total);
        if (!st.ok()) return record(session, tern::Status(st.code(), std::string(kFn) + ": " + st.message()));
        *count = ops;
        for (size_t i = 0; i < ops && i < capacity; ++i) per_op[i] = per_node[i];
        return TERN_OK;
      },
      [&](const tern::Status& st) { return record(session, st); });
}

tern_status tern_session_forward(tern_session* session, const int32_t* ids, int64_t n, float* logits) {
  if (!session) return fail(null_argument("tern_session_forward", "session"));
  const tern::capi::SessionCall call(*session->session);
  if (!call.held()) return call.busy("tern_session_forward");
  const tern::Status arguments = check_run_arguments("tern_session_forward", ids, n);
  if (!arguments.ok() || !logits) {
    session->session->reset();  // as after any failed forward
    return record(session, !arguments.ok() ? arguments : null_argument("tern_session_forward", "logits"));
  }
  return guarded("in tern_session_forward", [&] { return record(session, session->session->forward(ids, n, logits)); },
                 [&](const tern::Status& st) { return record(session, st); });
}

int64_t tern_session_hidden_size(const tern_session* session) {
  if (!session) {
    fail(null_argument("tern_session_hidden_size", "session"));
    return 0;
  }
  const tern::HiddenState& hidden = session->session->hidden_state();
  if (hidden.value >= 0) return hidden.width;
  record(session, tern::Unsupported("tern_session_hidden_size: the model has no last hidden state: " + hidden.why));
  return 0;
}

tern_status tern_session_forward_hidden(tern_session* session, const int32_t* ids, int64_t n, float* hidden,
                                        float* pooled) {
  if (!session) return fail(null_argument("tern_session_forward_hidden", "session"));
  const tern::capi::SessionCall call(*session->session);
  if (!call.held()) return call.busy("tern_session_forward_hidden");
  const tern::Status arguments = check_run_arguments("tern_session_forward_hidden", ids, n);
  if (!arguments.ok() || (!hidden && !pooled)) {
    session->session->reset();  // as after any failed forward
    return record(session, !arguments.ok() ? arguments
                                           : tern::InvalidArgument("tern_session_forward_hidden: hidden and pooled are "
                                                                   "both NULL; ask for at least one"));
  }
  return guarded(
      "in tern_session_forward_hidden",
      [&] { return record(session, session->session->forward_hidden(ids, n, hidden, pooled)); },
      [&](const tern::Status& st) { return record(session, st); });
}

tern_status tern_session_append(tern_session* session, const int32_t* ids, int64_t n, float* logits) {
  if (!session) return fail(null_argument("tern_session_append", "session"));
  const tern::capi::SessionCall call(*session->session);
  if (!call.held()) return call.busy("tern_session_append");
  const tern::Status arguments = check_run_arguments("tern_session_append", ids, n);
  if (!arguments.ok()) return record(session, arguments);
  return guarded("in tern_session_append", [&] { return record(session, session->session->append(ids, n, logits)); },
                 [&](const tern::Status& st) { return record(session, st); });
}

tern_status tern_session_reset(tern_session* session) {
  if (!session) return fail(null_argument("tern_session_reset", "session"));
  const tern::capi::SessionCall call(*session->session);
  if (!call.held()) return call.busy("tern_session_reset");
  session->session->reset();
  return TERN_OK;
}

tern_status tern_session_save_state(const tern_session* session, void* buf, size_t* size) {
  if (!session) return fail(null_argument("tern_session_save_state", "session"));
  const tern::capi::SessionCall call(*session->session);
  if (!call.held()) return call.busy("tern_session_save_state");
  if (!size) return record(session, null_argument("tern_session_save_state", "size"));
  return guarded(
      "while saving the session state",
      [&] {
        auto saved = session->session->save_state(buf, *size);
        if (!saved.ok()) {
          return record(session, tern::Status(saved.status().code(), "tern_session_save_state: " + saved.status().message()));
        }
        *size = saved.value();
        return TERN_OK;
      },
      [&](const tern::Status& st) { return record(session, st); });
}

tern_status tern_session_load_state(tern_session* session, const void* buf, size_t size) {
  if (!session) return fail(null_argument("tern_session_load_state", "session"));
  const tern::capi::SessionCall call(*session->session);
  if (!call.held()) return call.busy("tern_session_load_state");
  if (!buf) return record(session, null_argument("tern_session_load_state", "buf"));
  return guarded("while loading the session state", [&] { return record(session, session->session->load_state(buf, size)); },
                 [&](const tern::Status& st) { return record(session, st); });
}

tern_status tern_session_set_callbacks(tern_session* session, tern_abort_callback abort_callback,
                                       tern_progress_callback progress_callback, void* user_data) {
  if (!session) return fail(tern::InvalidArgument("tern_session_set_callbacks: null session"));
  const tern::capi::SessionCall call(*session->session);
  if (!call.held()) return call.busy("tern_session_set_callbacks");
  session->session->set_callbacks({abort_callback, progress_callback, user_data});
  return TERN_OK;
}

int64_t tern_session_position(const tern_session* session) { return session ? session->session->position() : 0; }

int64_t tern_session_vocab_size(const tern_session* session) {
  return session ? session->session->model().vocab_size() : 0;
}

const char* tern_session_last_error(const tern_session* session) {
  return session ? session->last_error.c_str() : "null session";
}

int64_t tern_session_max_tokens(const tern_session* session) { return session ? session->session->max_tokens() : 0; }

const char* tern_session_context_note(const tern_session* session) {
  return session ? session->session->context_note().c_str() : "null session";
}

}  // extern "C"

namespace tern::capi {

const Model& model_of(const tern_model* model) { return *model->model; }
Session& session_of(tern_session* session) { return *session->session; }
const Session& session_of(const tern_session* session) { return *session->session; }
tern_status fail(const Status& st) { return ::fail(st); }
tern_status record(const tern_session* session, const Status& st) {
  if (!st.ok()) session->last_error = st.message();
  return st.code();
}

}  // namespace tern::capi
