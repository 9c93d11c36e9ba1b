// SPDX-License-Identifier: MIT
// tern._tern: the module, tern.Status and tern.Error, and tern.Model (sessions: session.cpp; sampling and
// generation: generation.cpp).
#include <Python.h>

#include <exception>
#include <string>
#include <utility>

#include "bindings.h"

namespace tern_python {

namespace {

// tern.Error and tern.Status, created once with the module and kept for the life of the process (the translator
// may run at any time after import; a reference is leaked on purpose rather than dropped after finalization).
PyObject* g_error_type = nullptr;
PyObject* g_status_type = nullptr;

void raise_library_error(const LibraryError& e) {
  py::str message = text_from(e.message);
  py::object status = py::reinterpret_borrow<py::object>(g_status_type)(int(e.status));
  py::object error = py::reinterpret_borrow<py::object>(g_error_type)(message);
  error.attr("status") = status;
  error.attr("message") = message;
  PyErr_SetObject(g_error_type, error.ptr());
}

// A dict of tern_model_get_info's fields, as a types.SimpleNamespace (attributes, a readable repr).
py::object info_of(const Model& model) {
  tern_model_info info{};
  const tern_status st = tern_model_get_info(model.handle.get(), &info);
  check(st, tern_last_error());
  return py::module_::import("types").attr("SimpleNamespace")(
      py::arg("architecture") = text_from(info.architecture), py::arg("description") = text_from(info.description),
      py::arg("vocab_size") = info.vocab_size, py::arg("vocab_is_bytes") = info.vocab_is_bytes != 0,
      py::arg("max_context") = info.max_context, py::arg("n_ops") = info.n_ops, py::arg("n_tensors") = info.n_tensors,
      py::arg("format_version") = info.format_version);
}

Model load_path(py::handle path) {
  const std::string p = py::str(py::module_::import("os").attr("fsdecode")(path));
  tern::Error error;
  tern::ModelHandle handle;
  {
    py::gil_scoped_release unlocked;
    handle = tern::ModelHandle::load(p, &error);
  }
  check(error);
  return Model{std::move(handle), py::none()};
}

Model load_bytes(py::handle data) {
  py::bytes blob = bytes_from(data, "data");
  char* bytes = nullptr;
  Py_ssize_t size = 0;
  PyBytes_AsStringAndSize(blob.ptr(), &bytes, &size);
  tern::Error error;
  tern::ModelHandle handle;
  {
    py::gil_scoped_release unlocked;
    handle = tern::ModelHandle::load_buffer(bytes, size_t(size), &error);
  }
  check(error);
  // The library copies a buffer that is not 64-byte aligned (most bytes objects) and reads an aligned one in place:
  // then the bytes object must live as long as the model.
  const bool in_place = tern_model_copied_bytes(handle.get()) == 0;
  return Model{std::move(handle), in_place ? py::object(blob) : py::none()};
}

// tern_tokenize_with's flags from the keyword arguments.
uint32_t tokenize_flags(bool add_special, bool specials_as_text) {
  return (add_special ? uint32_t(TERN_TOKENIZE_ADD_SPECIAL) : 0u) |
         (specials_as_text ? uint32_t(TERN_TOKENIZE_SPECIALS_AS_TEXT) : 0u);
}

std::string text_bytes(py::handle text) {
  if (PyUnicode_Check(text.ptr())) return py::str(text).cast<std::string>();  // UTF-8
  return std::string(bytes_from(text, "text"));
}

}  // namespace

std::vector<int32_t> ids_from(py::handle ids, const char* what) {
  py::array array = py::array::ensure(ids);
  if (!array) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + " must be a sequence of ints or an integer numpy array");
  }
  if (array.ndim() != 1) {
    throw py::value_error(std::string(what) + " must have one dimension; it has " + std::to_string(array.ndim()));
  }
  if (array.size() == 0) return {};
  const char kind = array.dtype().kind();
  if (kind != 'i' && kind != 'u') {
    throw py::type_error(std::string(what) + " must hold integers; its dtype is " +
                         std::string(py::str(array.dtype())));
  }
  // Range first: numpy's cast to int32 would wrap 2^32 + 5 to 5.
  const py::object low = array.attr("min")(), high = array.attr("max")();
  const py::int_ int32_min(INT32_MIN), int32_max(INT32_MAX);
  if (PyObject_RichCompareBool(low.ptr(), int32_min.ptr(), Py_LT) == 1 ||
      PyObject_RichCompareBool(high.ptr(), int32_max.ptr(), Py_GT) == 1) {
    throw py::value_error(std::string(what) + " hold values in [" + std::string(py::str(low)) + ", " +
                          std::string(py::str(high)) + "], outside the int32 range of token ids");
  }
  auto ints = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!ints) throw py::error_already_set();
  return std::vector<int32_t>(ints.data(), ints.data() + ints.size());
}

py::bytes bytes_from(py::handle data, const char* what) {
  PyObject* b = PyBytes_FromObject(data.ptr());  // the same object (a new reference) for bytes; a copy otherwise
  if (b == nullptr) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + " must be bytes or a bytes-like object, not " +
                         std::string(py::str(data.get_type().attr("__name__"))));
  }
  return py::reinterpret_steal<py::bytes>(b);
}

py::str text_from(const std::string& bytes) {
  PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), Py_ssize_t(bytes.size()), "replace");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

void bind_model(py::module_& m) {
  py::class_<Model>(m, "Model", R"(A .tern model, mapped read-only and verified (tern_model_load).

Model(path) loads a file; Model.from_bytes(data) a model held in memory. A model is read-only and may be shared
by sessions on any threads; sessions keep it alive.)")
      .def(py::init(&load_path), py::arg("path"))
      .def_static("from_bytes", &load_bytes, py::arg("data"),
                  "Loads a model from bytes (tern_model_load_buffer). The library reads a 64-byte aligned buffer in "
                  "place (the model then keeps the bytes object) and copies any other (copied_bytes says so).")
      .def_property_readonly("info", &info_of,
                             "tern_model_get_info's fields: architecture, description, "
                             "vocab_size, vocab_is_bytes, max_context, n_ops, n_tensors, format_version")
      .def_property_readonly(
          "copied_bytes", [](const Model& self) { return tern_model_copied_bytes(self.handle.get()); },
          "Bytes the library copied the model into (from_bytes with an unaligned buffer); 0 when "
          "it reads the file or the caller's buffer in place")
      .def_property_readonly("segment_length", [](const Model& self) { return self.handle.segment_length(); })
      .def_property_readonly(
          "tokenizer", [](const Model& self) { return text_from(tern_model_tokenizer(self.handle.get())); },
          "The tokenizer the file carries ('bytes', 'hf-bpe', ...), '' when none")
      .def_property_readonly("adds_bos", [](const Model& self) { return tern_model_adds_bos(self.handle.get()) != 0; })
      .def_property_readonly(
          "special_tokens",
          [](const Model& self) {
            py::dict ids;
            const std::pair<const char*, tern_special_token> names[] = {
                {"bos", TERN_TOKEN_BOS}, {"eos", TERN_TOKEN_EOS}, {"unk", TERN_TOKEN_UNK}, {"pad", TERN_TOKEN_PAD}};
            for (const auto& [name, which] : names) {
              const int32_t id = tern_model_special_token(self.handle.get(), which);
              ids[name] = id < 0 ? py::object(py::none()) : py::object(py::int_(id));
            }
            return ids;
          },
          "{'bos', 'eos', 'unk', 'pad'} -> id, None where the model has none")
      .def(
          "is_end_token",
          [](const Model& self, int32_t id) { return tern_model_is_end_token(self.handle.get(), id) != 0; },
          py::arg("id"))
      .def(
          "tokenize",
          [](const Model& self, py::handle text, bool add_special, bool specials_as_text) {
            const std::string bytes = text_bytes(text);
            std::vector<int32_t> ids;
            tern::Error error;
            {
              py::gil_scoped_release unlocked;
              error = tern::tokenize(self.handle, bytes, &ids, tokenize_flags(add_special, specials_as_text));
            }
            check(error);
            return ids;
          },
          py::arg("text"), py::kw_only(), py::arg("add_special") = false, py::arg("specials_as_text") = false,
          "str (as UTF-8) or bytes -> list of ids (tern_tokenize_with)")
      .def(
          "detokenize",
          [](const Model& self, py::handle ids) {
            const std::vector<int32_t> v = ids_from(ids, "ids");
            std::string text;
            tern::Error error;
            {
              py::gil_scoped_release unlocked;
              error = tern::detokenize(self.handle, v, &text);
            }
            check(error);
            return text_from(text);
          },
          py::arg("ids"), "ids -> str (tern_detokenize; bytes that make no valid UTF-8 become U+FFFD)")
      .def(
          "token_to_text",
          [](const Model& self, int32_t id) {
            std::string text;
            check(tern::token_to_text(self.handle, id, &text));
            return py::bytes(text);
          },
          py::arg("id"), "The bytes token id adds after others (may be part of a UTF-8 character)")
      .def("__repr__", [](const Model& self) {
        tern_model_info info{};
        tern_model_get_info(self.handle.get(), &info);
        return "<tern.Model " + std::string(info.architecture) + ", vocab " + std::to_string(info.vocab_size) + ">";
      });
}

}  // namespace tern_python

PYBIND11_MODULE(_tern, m) {
  namespace py = pybind11;
  using namespace tern_python;
  m.doc() = "libtern's Python bindings (the C API of tern.h); import tern";
  m.attr("version") = tern_version();

  py::enum_<tern_status>(m, "Status", "tern_status: why a call failed")
      .value("OK", TERN_OK)
      .value("INVALID_ARGUMENT", TERN_INVALID_ARGUMENT)
      .value("INVALID_MODEL", TERN_INVALID_MODEL)
      .value("UNSUPPORTED", TERN_UNSUPPORTED)
      .value("OUT_OF_MEMORY", TERN_OUT_OF_MEMORY)
      .value("DEVICE_ERROR", TERN_DEVICE_ERROR)
      .value("IO_ERROR", TERN_IO_ERROR)
      .value("INTERNAL_ERROR", TERN_INTERNAL_ERROR)
      .value("CONTEXT_FULL", TERN_CONTEXT_FULL);
  g_status_type = m.attr("Status").ptr();
  Py_INCREF(g_status_type);

  g_error_type = PyErr_NewExceptionWithDoc(
      "tern.Error", "A failed library call: str(e) and e.message are the library's message, e.status its tern.Status.",
      PyExc_RuntimeError, nullptr);
  if (g_error_type == nullptr) throw py::error_already_set();
  m.attr("Error") = py::handle(g_error_type);  // the module keeps its own reference; g_error_type's is never dropped

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const LibraryError& e) {
      raise_library_error(e);
    }
  });

  bind_model(m);
  bind_session(m);
  bind_generation(m);
}
