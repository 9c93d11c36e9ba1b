// SPDX-License-Identifier: MIT
// tern.Session: tern_session_create's options as keyword arguments, forward / append into numpy arrays the library
// writes in place, the state as bytes, and the planner's numbers as dicts.
#include <Python.h>

#include <memory>
#include <string>
#include <utility>

#include "bindings.h"

namespace tern_python {

namespace {

// Runs call() (a tern_session_* call returning its status) without the GIL and with the session's mutex held; a
// failure raises tern.Error with the session's message, read while the mutex still holds it.
template <typename Call>
void run_locked(Session& s, Call&& call) {
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(s.calls);
  const tern_status st = call();
  check(st, tern_session_last_error(s.handle.get()));
}

template <typename Read>
auto read_locked(Session& s, Read&& read) {
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(s.calls);
  return read();
}

py::dict plan_dict(const tern_memory_plan& p) {
  py::dict d;
  d["n_tokens"] = p.n_tokens;
  d["weight_bytes"] = p.weight_bytes;
  d["packed_weight_bytes"] = p.packed_weight_bytes;
  d["arena_bytes"] = p.arena_bytes;
  d["state_bytes"] = p.state_bytes;
  d["dense_attention_bytes"] = p.dense_attention_bytes;
  d["row_chains"] = p.row_chains;
  d["row_block_rows"] = p.row_block_rows;
  return d;
}

std::unique_ptr<Session> create(py::object model, const std::string& backend, int threads, int64_t max_tokens,
                                int64_t max_batch, uint64_t memory_budget_bytes, int device, int64_t row_block_rows,
                                const std::string& weight_storage, const std::string& activation_storage,
                                const std::string& kv_storage, bool forward_only, int64_t sink_tokens,
                                int64_t sink_window) {
  const Model& m = instance_of<Model>(model, "model", "tern.Model");
  tern_session_options o;
  tern_session_options_init(&o);
  o.backend = choice<tern_backend>(
      "backend", backend, {{"cpu", TERN_BACKEND_CPU}, {"vulkan", TERN_BACKEND_VULKAN}, {"auto", TERN_BACKEND_AUTO}});
  o.threads = threads;
  o.max_tokens = max_tokens;
  o.max_batch = max_batch;
  o.memory_budget_bytes = memory_budget_bytes;
  o.device = device;
  o.row_block_rows = row_block_rows;
  o.weight_storage = choice<tern_weight_storage>("weight_storage", weight_storage,
                                                 {{"f32", TERN_WEIGHT_STORAGE_F32},
                                                  {"f16", TERN_WEIGHT_STORAGE_F16},
                                                  {"auto", TERN_WEIGHT_STORAGE_AUTO}});
  o.activation_storage =
      choice<tern_activation_storage>("activation_storage", activation_storage,
                                      {{"f32", TERN_ACTIVATION_STORAGE_F32}, {"f16", TERN_ACTIVATION_STORAGE_F16}});
  o.kv_storage =
      choice<tern_kv_storage>("kv_storage", kv_storage, {{"f32", TERN_KV_STORAGE_F32}, {"f16", TERN_KV_STORAGE_F16}});
  o.forward_only = forward_only ? 1 : 0;
  o.sink_tokens = sink_tokens;
  o.sink_window = sink_window;

  tern::Error error;
  tern::SessionHandle handle;
  {
    py::gil_scoped_release unlocked;
    handle = tern::SessionHandle::create(m.handle, o, &error);
  }
  check(error);
  auto s = std::make_unique<Session>();
  s->handle = std::move(handle);
  s->model = std::move(model);
  s->vocab = s->handle.vocab_size();
  s->hidden_size = s->handle.hidden_size();
  tern_memory_plan allocated{};
  const tern_status st = tern_session_memory(s->handle.get(), &allocated);
  check(st, tern_session_last_error(s->handle.get()));
  s->max_batch = allocated.n_tokens;
  return s;
}

// forward (reset first) or append: logits [n, vocab] float32, written by the library straight into the array (no
// copy). A call the library will refuse for its length (0, or above max_batch) gets a one-float scratch instead of
// an array, so that its message, not numpy's MemoryError for a huge n, is what the caller sees.
py::object run(Session& s, py::handle ids, bool reset, bool want_logits) {
  const std::vector<int32_t> v = ids_from(ids, "ids");
  const int64_t n = int64_t(v.size());
  const bool runs = n >= 1 && n <= s.max_batch;
  py::object result = py::none();
  float scratch = 0.0f;
  float* out = nullptr;
  if (want_logits) {
    if (runs) {
      py::array_t<float> logits({py::ssize_t(n), py::ssize_t(s.vocab)});
      out = logits.mutable_data();
      result = std::move(logits);
    } else {
      out = &scratch;
    }
  }
  const int32_t* p = v.empty() ? nullptr : v.data();
  run_locked(s, [&] {
    return reset ? tern_session_forward(s.handle.get(), p, n, out) : tern_session_append(s.handle.get(), p, n, out);
  });
  return result;
}

// forward_hidden: the last hidden state, float32 [n, d], or its mean over the rows [d] with pooled; written by the
// library into the array. As in run, a call refused for its length writes into a one-float scratch.
py::object hidden(Session& s, py::handle ids, bool pooled) {
  const std::vector<int32_t> v = ids_from(ids, "ids");
  const int64_t n = int64_t(v.size());
  const int32_t* p = v.empty() ? nullptr : v.data();
  float scratch = 0.0f;
  if (s.hidden_size == 0) {  // the library says why, as the call's error
    run_locked(s, [&] { return tern_session_forward_hidden(s.handle.get(), p, n, &scratch, nullptr); });
  }
  const bool runs = n >= 1 && n <= s.max_batch;
  py::array_t<float> out = pooled ? py::array_t<float>({py::ssize_t(s.hidden_size)})
                                  : py::array_t<float>({py::ssize_t(runs ? n : 0), py::ssize_t(s.hidden_size)});
  float* rows = pooled ? nullptr : runs ? out.mutable_data() : &scratch;
  float* mean = pooled ? out.mutable_data() : nullptr;
  run_locked(s, [&] { return tern_session_forward_hidden(s.handle.get(), p, n, rows, mean); });
  return std::move(out);
}

py::bytes save_state(Session& s) {
  py::object blob;
  run_locked(s, [&] {
    size_t size = 0;
    tern_status st = tern_session_save_state(s.handle.get(), nullptr, &size);
    if (st != TERN_OK) return st;
    {
      py::gil_scoped_acquire locked;  // safe under the mutex: no thread waits for it while holding the GIL
      blob = py::reinterpret_steal<py::object>(PyBytes_FromStringAndSize(nullptr, Py_ssize_t(size)));
      if (!blob) throw py::error_already_set();
    }
    // A bytes object no other code has seen yet: written without the GIL.
    return tern_session_save_state(s.handle.get(), PyBytes_AS_STRING(blob.ptr()), &size);
  });
  return py::reinterpret_steal<py::bytes>(blob.release());
}

void load_state(Session& s, py::handle data) {
  const py::bytes blob = bytes_from(data, "state");  // immutable: nothing changes it while the GIL is released
  const char* bytes = PyBytes_AS_STRING(blob.ptr());
  const size_t size = size_t(PyBytes_GET_SIZE(blob.ptr()));
  run_locked(s, [&] { return tern_session_load_state(s.handle.get(), bytes, size); });
}

py::dict plan(Session& s, py::object n_tokens) {
  const int64_t n = n_tokens.is_none() ? s.max_batch : n_tokens.cast<int64_t>();
  tern_memory_plan p{};
  run_locked(s, [&] { return tern_session_plan(s.handle.get(), n, &p); });
  return plan_dict(p);
}

const char* backend_name(tern_backend b) {
  return b == TERN_BACKEND_VULKAN ? "vulkan" : b == TERN_BACKEND_CPU ? "cpu" : "auto";
}

}  // namespace

void bind_session(py::module_& m) {
  py::class_<Session>(m, "Session", R"(A session on a model (tern_session_create): one arena planned and allocated
at creation, and the streaming state. Keyword arguments are tern_session_options' fields; the enums as names:
backend 'cpu' | 'vulkan' | 'auto', weight_storage 'auto' | 'f32' | 'f16' (auto: float16 on a Vulkan device with 16-bit
storage, float32 otherwise), activation_storage / kv_storage 'f32' | 'f16'.
Calls release the GIL; calls on one session from several threads run one at a time.)")
      .def(py::init(&create), py::arg("model"), py::kw_only(), py::arg("backend") = "cpu", py::arg("threads") = 0,
           py::arg("max_tokens") = 0, py::arg("max_batch") = 0, py::arg("memory_budget_bytes") = 0,
           py::arg("device") = 0, py::arg("row_block_rows") = 0, py::arg("weight_storage") = "auto",
           py::arg("activation_storage") = "f32", py::arg("kv_storage") = "f32", py::arg("forward_only") = false,
           py::arg("sink_tokens") = 0, py::arg("sink_window") = 0)
      .def(
          "forward", [](Session& s, py::handle ids) { return run(s, ids, true, true); }, py::arg("ids"),
          "Resets the state and runs ids as one sequence: float32 logits [n, vocab] (row i: after ids[0..i])")
      .def("hidden", &hidden, py::arg("ids"), py::kw_only(), py::arg("pooled") = false,
           "Resets the state and runs ids as one sequence up to the last hidden state (the head's input, Hugging "
           "Face's last_hidden_state): float32 [n, hidden_size], or with pooled=True its mean over the n rows, [hidden_size]")
      .def(
          "append", [](Session& s, py::handle ids, bool logits) { return run(s, ids, false, logits); }, py::arg("ids"),
          py::kw_only(), py::arg("logits") = true,
          "Continues the sequence held in the state: logits [n, vocab], or None with logits=False")
      .def("reset", [](Session& s) { run_locked(s, [&] { return tern_session_reset(s.handle.get()); }); })
      .def("save_state", &save_state, "The streaming state as a checked blob (tern_session_save_state)")
      .def("load_state", &load_state, py::arg("state"), "Resumes a state save_state returned (this or another session)")
      .def("plan", &plan, py::arg("n_tokens") = py::none(),
           "The planner's bytes for a call of n_tokens (default: max_batch), as a dict of tern_memory_plan's fields")
      .def(
          "memory",
          [](Session& s) {
            tern_memory_plan p{};
            run_locked(s, [&] { return tern_session_memory(s.handle.get(), &p); });
            return plan_dict(p);
          },
          "What the session allocated (tern_session_memory), as plan's dict")
      .def_property_readonly("model", [](const Session& s) { return s.model; })
      .def_property_readonly("position", [](Session& s) { return read_locked(s, [&] { return s.handle.position(); }); })
      .def_property_readonly("vocab_size", [](const Session& s) { return s.vocab; })
      .def_property_readonly("max_batch", [](const Session& s) { return s.max_batch; })
      .def_property_readonly("hidden_size", [](const Session& s) { return s.hidden_size; })
      .def_property_readonly("max_tokens", [](const Session& s) { return s.handle.max_tokens(); })
      .def_property_readonly("sequence_limit",
                             [](const Session& s) { return tern_session_sequence_limit(s.handle.get()); })
      .def_property_readonly("context_note", [](const Session& s) { return text_from(s.handle.context_note()); })
      .def_property_readonly("backend", [](const Session& s) {
        const tern_backend_info b = s.handle.backend();
        py::dict d;
        d["backend"] = backend_name(b.backend);
        d["device_name"] = text_from(b.device_name);
        d["device_type"] = text_from(b.device_type);
        d["driver"] = text_from(b.driver);
        return d;
      });
}

}  // namespace tern_python
