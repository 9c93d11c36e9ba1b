// SPDX-License-Identifier: MIT
// tern.Sampler, tern.Generator and the iterators over a generation (token ids, or text pieces through
// tern_token_to_text), each step with the GIL released.
#include <Python.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "bindings.h"

namespace tern_python {

namespace {

struct Sampler {
  tern::Sampler sampler;
  std::mutex calls;  // a sampler is used by one thread at a time
};

// tern.Generator: the C++ wrapper's generator (which keeps the tern_session alive) and the Python Session, whose
// mutex every call holds.
struct Generator {
  tern::Generator generator;
  py::object session_object;
  Session* session = nullptr;
};

// What ended an iteration: None while it runs.
enum class Stop { kRunning, kLength, kEnd, kContextFull };

const char* stop_name(Stop s) {
  switch (s) {
    case Stop::kRunning: return nullptr;
    case Stop::kLength: return "length";
    case Stop::kEnd: return "end";
    case Stop::kContextFull: return "context_full";
  }
  return nullptr;
}

// An iterator over up to max_new_tokens sampled tokens: their ids, or the text they add (pieces that never end inside
// a UTF-8 character, tern.hpp's Utf8Stream). An end token (Model.is_end_token) stops it when stop_at_end, and is not
// yielded; TERN_CONTEXT_FULL (context_policy 'stop') stops it too. stop_reason says which.
struct Stream {
  py::object generator_object, sampler_object;
  Generator* generator = nullptr;
  Sampler* sampler = nullptr;
  const tern::ModelHandle* model = nullptr;
  int64_t max_new_tokens = 0;  // < 0: no limit
  bool stop_at_end = true;
  bool as_text = false;
  int64_t tokens = 0;  // sampled so far, an end token included
  Stop stop = Stop::kRunning;
  tern::Utf8Stream utf8;

  // Samples one token and, for text, its piece; false once the stream has ended (stop set).
  bool step(int32_t* token, std::string* piece) {
    if (max_new_tokens >= 0 && tokens >= max_new_tokens) {
      stop = Stop::kLength;
      return false;
    }
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> session_lock(generator->session->calls);
    std::lock_guard<std::mutex> sampler_lock(sampler->calls);
    const tern_status st = tern_generator_next(generator->generator.get(), sampler->sampler.get(), token);
    if (st == TERN_CONTEXT_FULL) {
      stop = Stop::kContextFull;
      return false;
    }
    check(st, tern_generator_last_error(generator->generator.get()));
    ++tokens;
    if (stop_at_end && tern_model_is_end_token(model->get(), *token)) {
      stop = Stop::kEnd;
      return false;
    }
    if (as_text) check(tern::token_to_text(*model, *token, piece));
    return true;
  }

  py::object next() {
    int32_t token = -1;
    std::string piece;
    while (stop == Stop::kRunning && step(&token, &piece)) {
      if (!as_text) return py::int_(token);
      const std::string ready = utf8.push(piece);
      if (!ready.empty()) return text_from(ready);
    }
    const std::string rest = as_text ? utf8.flush() : std::string();
    if (!rest.empty()) return text_from(rest);
    throw py::stop_iteration();
  }
};

std::unique_ptr<Sampler> create_sampler(float temperature, int32_t top_k, float top_p, float min_p,
                                        float repetition_penalty, int32_t repetition_last_n, uint64_t seed) {
  tern_sampler_options o;
  tern_sampler_options_init(&o);
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.repetition_penalty = repetition_penalty;
  o.repetition_last_n = repetition_last_n;
  o.seed = seed;
  tern::Error error;
  auto s = std::make_unique<Sampler>();
  s->sampler = tern::Sampler::create(o, &error);
  check(error);
  return s;
}

int32_t sample(Sampler& s, py::array_t<float, py::array::c_style | py::array::forcecast> logits, py::handle history) {
  if (logits.ndim() != 1)
    throw py::value_error("logits must have one dimension; it has " + std::to_string(logits.ndim()));
  // Copied: the row is read without the GIL, where another thread could change the caller's array.
  const std::vector<float> row(logits.data(), logits.data() + logits.size());
  const std::vector<int32_t> h = history.is_none() ? std::vector<int32_t>() : ids_from(history, "history");
  int32_t token = -1;
  tern::Error error;
  {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(s.calls);
    error = s.sampler.sample(row.data(), int64_t(row.size()), h, &token);
  }
  check(error);
  return token;
}

std::unique_ptr<Generator> create_generator(py::object session, const std::string& context_policy, int64_t keep_tokens,
                                            int64_t history_tokens) {
  Session& s = instance_of<Session>(session, "session", "tern.Session");
  tern_generator_options o;
  tern_generator_options_init(&o);
  // The library's generator would refuse to go on after an end token; this binding's streams decide that themselves
  // (stop_at_end), and Generator.next samples on through one, as tern_generator_next did before it stopped.
  o.ignore_eos = 1;
  o.context_policy = choice<tern_context_policy>("context_policy", context_policy,
                                                {{"stop", TERN_CONTEXT_STOP},
                                                 {"slide", TERN_CONTEXT_SLIDE},
                                                 {"sinks", TERN_CONTEXT_SINKS},
                                                 {"shift", TERN_CONTEXT_SHIFT}});
  o.keep_tokens = keep_tokens;
  o.history_tokens = history_tokens;
  auto g = std::make_unique<Generator>();
  tern::Error error;
  {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(s.calls);
    g->generator = tern::Generator::create(s.handle, o, &error);
  }
  check(error);
  g->session_object = std::move(session);
  g->session = &s;
  return g;
}

// Runs call(generator) without the GIL and with the session's mutex held; errors raise with the generator's message.
template <typename Call>
void run_locked(Generator& g, Call&& call) {
  tern::Error error;
  {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(g.session->calls);
    error = call(g.generator);
  }
  check(error);
}

Stream stream(py::object generator, py::object sampler, py::object max_new_tokens, bool stop_at_end, bool as_text) {
  Stream s;
  s.generator = &generator.cast<Generator&>();
  s.sampler = &instance_of<Sampler>(sampler, "sampler", "tern.Sampler");
  s.model = &s.generator->session->model.cast<const Model&>().handle;
  s.max_new_tokens = max_new_tokens.is_none() ? -1 : max_new_tokens.cast<int64_t>();
  if (!max_new_tokens.is_none() && s.max_new_tokens < 0) throw py::value_error("max_new_tokens must be >= 0 or None");
  s.stop_at_end = stop_at_end;
  s.as_text = as_text;
  s.generator_object = std::move(generator);
  s.sampler_object = std::move(sampler);
  return s;
}

// Generator.tokens (ids) and Generator.text (str pieces): one signature.
auto stream_method(bool as_text) {
  return [as_text](py::object self, py::object sampler, py::object max_new_tokens, bool stop_at_end) {
    return stream(std::move(self), std::move(sampler), std::move(max_new_tokens), stop_at_end, as_text);
  };
}

}  // namespace

void bind_generation(py::module_& m) {
  py::class_<Sampler>(m, "Sampler", R"(Logits -> one token id (tern_sampler_*): repetition penalty, temperature (0:
greedy), top-k, top-p, min-p, then a draw from the library's own PRNG: a seed gives the same tokens everywhere.)")
      .def(py::init(&create_sampler), py::kw_only(), py::arg("temperature") = 1.0f, py::arg("top_k") = 0,
           py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f, py::arg("repetition_penalty") = 1.0f,
           py::arg("repetition_last_n") = 64, py::arg("seed") = 0)
      .def("sample", &sample, py::arg("logits"), py::arg("history") = py::none(),
           "One token from a row of logits [vocab]; history (ids, oldest first) feeds the repetition penalty")
      .def(
          "set_seed",
          [](Sampler& s, uint64_t seed) {
            py::gil_scoped_release unlocked;
            std::lock_guard<std::mutex> lock(s.calls);
            check(s.sampler.set_seed(seed));
          },
          py::arg("seed"));

  py::class_<Generator>(m, "Generator", R"(A sequence grown token by token in a session (tern_generator_*), which it
keeps alive. context_policy: 'stop' | 'slide' | 'sinks' | 'shift' (what happens when the sequence is full).)")
      .def(py::init(&create_generator), py::arg("session"), py::kw_only(), py::arg("context_policy") = "slide",
           py::arg("keep_tokens") = 0, py::arg("history_tokens") = 0)
      .def(
          "prompt",
          [](Generator& g, py::handle ids) {
            const std::vector<int32_t> v = ids_from(ids, "ids");
            int64_t kept = 0;
            run_locked(g, [&](tern::Generator& gen) { return gen.prompt(v, &kept); });
            return kept;
          },
          py::arg("ids"), "Resets the session and feeds the prompt; returns how many of its tokens were fed")
      .def(
          "append",
          [](Generator& g, py::handle ids) {
            const std::vector<int32_t> v = ids_from(ids, "ids");
            run_locked(g, [&](tern::Generator& gen) { return gen.append(v); });
          },
          py::arg("ids"), "Feeds ids after the sequence (a user's turn)")
      .def(
          "next",
          [](Generator& g, Sampler& sampler) {
            int32_t token = -1;
            run_locked(g, [&](tern::Generator& gen) {
              std::lock_guard<std::mutex> lock(sampler.calls);
              return gen.next(sampler.sampler, &token);
            });
            return token;
          },
          py::arg("sampler"), "Samples the next token (tern.Error with Status.CONTEXT_FULL under 'stop' when full)")
      .def("tokens", stream_method(false), py::arg("sampler"), py::arg("max_new_tokens") = py::none(), py::kw_only(),
           py::arg("stop_at_end") = true,
           "An iterator over the ids of up to max_new_tokens sampled tokens (None: no limit)")
      .def("text", stream_method(true), py::arg("sampler"), py::arg("max_new_tokens") = py::none(), py::kw_only(),
           py::arg("stop_at_end") = true,
           "An iterator over the text (str pieces, whole UTF-8 characters) of up to max_new_tokens sampled tokens")
      .def_property_readonly("logits",
                             [](Generator& g) {
                               // A copy: the library's row is rewritten by the generator's next call. Empty
                               // before a prompt.
                               py::array_t<float> out(py::ssize_t(g.session->vocab));
                               float* dst = out.mutable_data();
                               int64_t vocab = 0;
                               {
                                 py::gil_scoped_release unlocked;
                                 std::lock_guard<std::mutex> lock(g.session->calls);
                                 const float* row = tern_generator_logits(g.generator.get(), &vocab);
                                 if (row != nullptr) std::copy(row, row + vocab, dst);
                               }
                               return vocab > 0 ? out : py::array_t<float>(0);
                             })
      .def_property_readonly("history",
                             [](Generator& g) {
                               py::gil_scoped_release unlocked;
                               std::lock_guard<std::mutex> lock(g.session->calls);
                               return g.generator.history();
                             })
      .def_property_readonly("slides",
                             [](Generator& g) {
                               py::gil_scoped_release unlocked;
                               std::lock_guard<std::mutex> lock(g.session->calls);
                               return g.generator.slides();
                             })
      .def_property_readonly("session", [](const Generator& g) { return g.session_object; });

  py::class_<Stream>(m, "Stream", "The iterator Generator.tokens and Generator.text return")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &Stream::next)
      .def_readonly("tokens", &Stream::tokens, "Tokens sampled so far (an end token included)")
      .def_property_readonly(
          "stop_reason", [](const Stream& s) { return stop_name(s.stop); },
          "None while running; then 'length', 'end' or 'context_full'");
}

}  // namespace tern_python
