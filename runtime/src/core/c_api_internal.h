// What the C API's other files (c_api_generate.cpp) need of c_api.cpp: the objects behind the handles and the
// thread's last-error slot.
#pragma once

#include "core/model.h"
#include "core/session.h"
#include "core/status.h"
#include "tern/tern.h"

namespace tern::capi {

const Model& model_of(const tern_model* model);
Session& session_of(tern_session* session);
const Session& session_of(const tern_session* session);
// Sets the thread's message (tern_last_error) to st's and returns its code.
tern_status fail(const Status& st);

}  // namespace tern::capi
