// SPDX-License-Identifier: MIT
// What the C API's other files (c_api_generate.cpp) need of c_api.cpp: the objects behind the handles and the
// thread's last-error slot.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <utility>

#include "format/model.h"
#include "core/session.h"
#include "format/status.h"
#include "tern/tern.h"

namespace tern::capi {

const Model& model_of(const tern_model* model);
Session& session_of(tern_session* session);
const Session& session_of(const tern_session* session);
// Sets the thread's message (tern_last_error) to st's and returns its code.
tern_status fail(const Status& st);
// Sets the session's message (tern_session_last_error) to st's when st is an error, and returns its code. The slot
// is the session's even for calls that take a const session (plan, save_state): tern.h names it for every call
// given a session.
tern_status record(const tern_session* session, const Status& st);

// The message of a NULL argument, naming it: "tern_session_forward: ids is NULL".
inline Status null_argument(const char* fn, const char* argument) {
  return InvalidArgument(std::string(fn) + ": " + argument + " is NULL");
}

// Runs an entry point's body and turns any exception escaping it into a status, so that nothing unwinds through the
// C ABI: std::bad_alloc is TERN_OUT_OF_MEMORY "out of memory <what>", anything else TERN_INTERNAL_ERROR. `report`
// records the status in the caller's message slot (fail: the thread's; an object's own otherwise); when even that
// allocation fails, the code is returned without a message.
template <typename Body, typename Report>
tern_status guarded(const char* what, Body&& body, Report&& report) noexcept {
  Status st = Status::Ok();
  try {
    return body();
  } catch (const std::bad_alloc&) {
    try {
      st = OutOfMemory(std::string("out of memory ") + what);
    } catch (...) {
      return TERN_OUT_OF_MEMORY;
    }
  } catch (const std::exception& e) {
    try {
      st = InternalError(std::string("internal error ") + what + ": " + e.what());
    } catch (...) {
      return TERN_INTERNAL_ERROR;
    }
  } catch (...) {
    return TERN_INTERNAL_ERROR;
  }
  try {
    return report(st);
  } catch (...) {
    return st.code();
  }
}

// Holds a session for one call of an entry point. A thread entering while another thread's call holds the session
// gets TERN_INVALID_ARGUMENT from busy(), its message in the calling thread's slot (tern_last_error): the session's
// own slot belongs to the call that is running.
class SessionCall {
 public:
  explicit SessionCall(const Session& session) : session_(session), held_(session.try_enter()) {}
  ~SessionCall() {
    if (held_) session_.leave();
  }
  SessionCall(const SessionCall&) = delete;
  SessionCall& operator=(const SessionCall&) = delete;
  bool held() const { return held_; }
  // "tern_session_forward: the session is in a call on another thread; ..." as the thread's message.
  static tern_status busy(const char* entry_point) {
    return fail(InvalidArgument(std::string(entry_point) +
                                ": the session is in a call on another thread; a session takes one call at a time"));
  }

 private:
  const Session& session_;
  bool held_;
};

template <typename Body>
tern_status guarded(const char* what, Body&& body) noexcept {
  return guarded(what, std::forward<Body>(body), [](const Status& st) { return fail(st); });
}

}  // namespace tern::capi
