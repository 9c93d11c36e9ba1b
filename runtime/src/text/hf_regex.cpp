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
      : code_(program.code), classes_(program.classes), text_(text), s_(*scratch) {}

  bool find(size_t from, size_t* begin, size_t* end) {
    s_.prepare(code_.size());
    bool matched = false;
    size_t pos = from;
    s_.new_list();
    for (;;) {
      if (!matched) add_thread(&s_.current, 0, pos, pos);  // a match starting here, of the lowest priority
      if (s_.current.empty()) {
        if (matched || pos >= text_.size()) break;  // nothing can start once a match has
        pos += char_at(text_, pos).length;          // nothing in flight: try the next start
        s_.new_list();
        continue;
      }
      const CharAt ch = char_at(text_, pos);
      s_.new_list();
      for (const Thread& t : s_.current) {
        const RegexInst& inst = code_[t.pc];
        bool step = false;
        switch (inst.op) {
          case RegexOp::Match:
            matched = true;
            *begin = t.start;
            *end = pos;
            break;
          case RegexOp::Char:
            step = ch.length != 0 && ch.c == inst.x;
            break;
          case RegexOp::Class:
            step = in_class(classes_[inst.x], ch);
            break;
          case RegexOp::Any:
            step = ch.length != 0 && (inst.x != 0 || ch.c != '\n');
            break;
          default:
            break;  // add_thread keeps only the instructions above
        }
        if (inst.op == RegexOp::Match) break;  // the threads after it have lower priority
        if (step) add_thread(&s_.next, t.pc + 1, t.start, pos + ch.length);
      }
      std::swap(s_.current, s_.next);
      s_.next.clear();
      if (ch.length == 0) break;
      pos += ch.length;
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

  // Adds the thread at pc and everything it reaches without consuming a character, in priority order, to list.
  void add_thread(std::vector<Thread>* list, uint32_t pc, size_t start, size_t pos) {
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
          list->push_back({p, start});
          break;
      }
    }
  }

  const std::vector<RegexInst>& code_;
  const std::vector<RegexClass>& classes_;
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
