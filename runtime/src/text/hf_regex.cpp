// SPDX-License-Identifier: MIT
// The Pike VM that runs an HfRegex program (hf_regex_program.h). Threads are kept in priority order, so the first
// thread to reach Match is the match a backtracking matcher (Oniguruma) reports; threads after it are dropped,
// threads before it run on for a longer match of higher priority. Each instruction holds at most one thread per
// text position, so a step costs at most the program's size.
#include "text/hf_regex.h"

#include <vector>

#include "text/hf_regex_program.h"

namespace tern {

struct HfRegex::Program : RegexProgram {};

namespace {

struct Thread {
  uint32_t pc;
  size_t start;  // byte offset where its match began
};

// Per-thread working memory, kept between calls so that a find allocates nothing once warm.
struct Scratch {
  std::vector<Thread> current, next;
  std::vector<uint32_t> stack;
  std::vector<uint32_t> seen;  // seen[pc] == generation: pc already has a thread in the list being built
  uint32_t generation = 0;

  void prepare(size_t program_size) {
    if (seen.size() < program_size) seen.resize(program_size, 0);
    current.clear();
    next.clear();
    current.reserve(program_size);
    next.reserve(program_size);
  }
  void new_list() {
    if (++generation == 0) {
      std::fill(seen.begin(), seen.end(), 0);
      generation = 1;
    }
  }
};

// The character at pos, with the facts class tests need; at the end of the text, none.
struct CharAt {
  char32_t c = 0;
  size_t length = 0;  // 0: end of text
  unicode::Category category = unicode::Category::Cn;
  bool white_space = false;
};

CharAt char_at(std::string_view text, size_t pos) {
  CharAt r;
  if (pos >= text.size()) return r;
  auto b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) {
    r.c = b;
    r.length = 1;
    return r;  // ASCII: classes answer from their bitmaps, which need neither fact
  }
  r.length = unicode::decode_utf8(text, pos, &r.c);
  r.category = unicode::category(r.c);
  r.white_space = unicode::is_white_space(r.c);
  return r;
}

bool in_class(const RegexClass& k, const CharAt& ch) {
  return ch.length != 0 && k.contains(ch.c, ch.category, ch.white_space);
}

class Vm {
 public:
  Vm(const RegexProgram& program, std::string_view text, Scratch* scratch)
      : code_(program.code),
        classes_(program.classes),
        closure_begin_(program.closure_begin),
        closure_(program.closure),
        start_begin_(program.start_begin),
        start_(program.start),
        text_(text),
        s_(*scratch) {}

  bool find(size_t from, size_t* begin, size_t* end) {
    s_.prepare(code_.size());
    bool matched = false;
    size_t pos = from;
    CharAt ch = char_at(text_, pos);
    s_.new_list();
    for (;;) {
      if (!matched) add(&s_.current, 0, pos, pos, ch);  // a match starting here, of the lowest priority
      if (s_.current.empty()) {
        if (matched || ch.length == 0) break;  // nothing can start once a match has
        pos += ch.length;                      // nothing in flight: try the next start
        ch = char_at(text_, pos);
        s_.new_list();
        continue;
      }
      // Every thread in the list accepts ch (add() checked): step them all.
      const size_t next_pos = pos + ch.length;
      const CharAt next = ch.length != 0 ? char_at(text_, next_pos) : CharAt();
      s_.new_list();
      for (const Thread& t : s_.current) {
        if (code_[t.pc].op == RegexOp::Match) {
          matched = true;
          *begin = t.start;
          *end = pos;
          break;  // the threads after it have lower priority
        }
        add(&s_.next, t.pc + 1, t.start, next_pos, next);
      }
      std::swap(s_.current, s_.next);
      s_.next.clear();
      if (ch.length == 0) break;
      pos = next_pos;
      ch = next;
    }
    return matched;
  }

 private:
  bool assertion(RegexAssert kind, uint32_t class_index, size_t pos) const {
    switch (kind) {
      case RegexAssert::BeginText: return pos == 0;
      case RegexAssert::EndText: return pos == text_.size();
      case RegexAssert::EndTextOrFinalNewline:
        return pos == text_.size() || (pos + 1 == text_.size() && text_[pos] == '\n');
      case RegexAssert::BeginLine: return pos == 0 || text_[pos - 1] == '\n';
      case RegexAssert::EndLine: return pos == text_.size() || text_[pos] == '\n';
      case RegexAssert::LookAhead: return in_class(classes_[class_index], char_at(text_, pos));
      case RegexAssert::NegLookAhead: return !in_class(classes_[class_index], char_at(text_, pos));
    }
    return false;
  }

  // Whether a thread at consuming instruction `inst` can step over ch (Match: kept, it waits for its turn).
  bool accepts(const RegexInst& inst, const CharAt& ch) const {
    switch (inst.op) {
      case RegexOp::Char: return ch.length != 0 && ch.c == inst.x;
      case RegexOp::Class: return in_class(classes_[inst.x], ch);
      case RegexOp::Any: return ch.length != 0 && (inst.x != 0 || ch.c != '\n');
      default: return true;
    }
  }

  // Adds the threads that the thread at pc becomes without consuming a character, in priority order, to list:
  // those whose instruction accepts ch, the character at pos, and any Match. From the precomputed closure of pc when
  // the program has one.
  void add(std::vector<Thread>* list, uint32_t pc, size_t start, size_t pos, const CharAt& ch) {
    if (closure_begin_.empty()) return add_stepwise(list, pc, start, pos, ch);
    const std::vector<uint32_t>* closure = &closure_;
    uint32_t i = closure_begin_[pc], e = closure_begin_[pc + 1];
    if (pc == 0 && ch.length != 0 && ch.c < 128) {
      closure = &start_;
      i = start_begin_[ch.c];
      e = start_begin_[ch.c + 1];
    }
    for (; i < e; ++i) {
      const uint32_t p = (*closure)[i];
      if (s_.seen[p] == s_.generation) continue;
      s_.seen[p] = s_.generation;
      const RegexInst& inst = code_[p];
      if (inst.op == RegexOp::Assert) {
        if (assertion(RegexAssert(inst.x), inst.y, pos)) add_stepwise(list, p + 1, start, pos, ch);
      } else if (accepts(inst, ch)) {
        list->push_back({p, start});
      }
    }
  }

  // add() following Split and Jmp one by one, with an explicit stack.
  void add_stepwise(std::vector<Thread>* list, uint32_t pc, size_t start, size_t pos, const CharAt& ch) {
    s_.stack.clear();
    s_.stack.push_back(pc);
    while (!s_.stack.empty()) {
      uint32_t p = s_.stack.back();
      s_.stack.pop_back();
      if (s_.seen[p] == s_.generation) continue;
      s_.seen[p] = s_.generation;
      const RegexInst& inst = code_[p];
      switch (inst.op) {
        case RegexOp::Jmp:
          s_.stack.push_back(inst.x);
          break;
        case RegexOp::Split:
          s_.stack.push_back(inst.y);
          s_.stack.push_back(inst.x);
          break;
        case RegexOp::Assert:
          if (assertion(RegexAssert(inst.x), inst.y, pos)) s_.stack.push_back(p + 1);
          break;
        default:
          if (accepts(inst, ch)) list->push_back({p, start});
          break;
      }
    }
  }

  const std::vector<RegexInst>& code_;
  const std::vector<RegexClass>& classes_;
  const std::vector<uint32_t>& closure_begin_;
  const std::vector<uint32_t>& closure_;
  const std::vector<uint32_t>& start_begin_;
  const std::vector<uint32_t>& start_;
  std::string_view text_;
  Scratch& s_;
};

}  // namespace

HfRegex::HfRegex() : program_(std::make_unique<Program>()) {}
HfRegex::~HfRegex() = default;

Result<std::unique_ptr<HfRegex>> HfRegex::compile(std::string_view pattern) {
  std::unique_ptr<HfRegex> regex(new HfRegex());
  TERN_RETURN_IF_ERROR(compile_regex(pattern, regex->program_.get()));
  return regex;
}

bool HfRegex::find(std::string_view text, size_t from, size_t* begin, size_t* end) const {
  if (from > text.size()) return false;
  thread_local Scratch scratch;
  return Vm(*program_, text, &scratch).find(from, begin, end);
}

}  // namespace tern
