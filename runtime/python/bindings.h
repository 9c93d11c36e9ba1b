// SPDX-License-Identifier: MIT
// The Python module tern._tern (runtime/python/tern/__init__.py re-exports it): what its three files share.
// Every library call runs with the GIL released; a session's calls (its own and its generator's) are serialized by
// the session's mutex, so that two Python threads on one session wait for each other instead of one failing.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // std::vector <-> list (ids, history)

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tern/tern.hpp"

namespace tern_python {

namespace py = pybind11;

// A failed library call, carried to the exception translator (module.cpp), which raises tern.Error(message) with
// .status (a tern.Status) and .message. Built without the GIL: plain C++ only.
struct LibraryError {
  tern_status status;
  std::string message;
};

// Throws LibraryError when st is not TERN_OK; message: the slot the library's docs name for the call.
inline void check(tern_status st, const char* message) {
  if (st != TERN_OK) throw LibraryError{st, message};
}
inline void check(const tern::Error& error) {
  if (error) throw LibraryError{error.code, error.message};
}

// ids (a sequence of ints or an integer numpy array, one dimension) as int32 token ids, copied: the library then reads
// memory no other Python thread can change while the GIL is released. TypeError for non-integers, ValueError for
// a value outside int32. `what` names the argument in those messages.
std::vector<int32_t> ids_from(py::handle ids, const char* what);

// data (bytes, or any object bytes() accepts, which is then copied) as an immutable bytes object.
py::bytes bytes_from(py::handle data, const char* what);

// A str decoded from UTF-8, invalid bytes as U+FFFD (token texts and library messages may hold any bytes).
py::str text_from(const std::string& bytes);

// object as a T& (a class this module binds); TypeError naming `what` and the type given otherwise.
template <typename T>
T& instance_of(py::handle object, const char* what, const char* type_name) {
  if (!py::isinstance<T>(object)) {
    throw py::type_error(std::string(what) + " must be a " + type_name + ", not " +
                         std::string(py::str(object.get_type().attr("__name__"))));
  }
  return object.cast<T&>();
}

// A keyword argument given as a name ("cpu", "f16", "slide") -> its enum value; ValueError naming the choices.
template <typename Enum>
Enum choice(const std::string& field, const std::string& given,
            std::initializer_list<std::pair<const char*, Enum>> names) {
  std::string known;
  for (const auto& [name, value] : names) {
    if (given == name) return value;
    known += std::string(known.empty() ? "" : ", ") + "'" + name + "'";
  }
  throw py::value_error(field + " must be one of " + known + "; got '" + given + "'");
}

// tern.Model: the C++ wrapper's handle, and the bytes object the library reads in place (from_bytes given a
// 64-byte aligned buffer; None when it reads a file or its own copy).
struct Model {
  tern::ModelHandle handle;
  py::object buffer;
};

// tern.Session. The handle keeps the tern_model alive (tern.hpp); `model` keeps the Python Model, and with it a
// buffer the model reads in place.
struct Session {
  tern::SessionHandle handle;
  py::object model;
  std::mutex calls;  // held (without the GIL) by every call on this session or its generator
  int64_t vocab = 0;
  int64_t max_batch = 0;
  int64_t hidden_size = 0;  // d of the last hidden state; 0 where the model has none
};

void bind_model(py::module_& m);
void bind_session(py::module_& m);
void bind_generation(py::module_& m);

}  // namespace tern_python
