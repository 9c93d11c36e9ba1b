// SPDX-License-Identifier: MIT
// Compiles the parse tree of hf_regex_parse.h into the Pike VM program of hf_regex_program.h. The program's size is
// computed from the tree before anything is emitted, so a counted repetition that would pass kMaxInstructions is
// refused without being expanded.
#include <algorithm>
#include <memory>
#include <string>

#include "text/hf_regex_parse.h"
#include "text/hf_regex_program.h"

namespace tern {
namespace {

using hf_regex::kUnbounded;
using hf_regex::Node;
using hf_regex::NodePtr;

// Instructions that `n` compiles to, saturating past the limit.
uint64_t program_size(const Node& n) {
  constexpr uint64_t kCap = uint64_t(HfRegex::kMaxInstructions) + 1;
  switch (n.kind) {
    case Node::Empty: return 0;
    case Node::Char: case Node::Class: case Node::Any: case Node::Assert: return 1;
    case Node::Concat: {
      uint64_t s = 0;
      for (const auto& c : n.children) s = std::min(kCap, s + program_size(*c));
      return s;
    }
    case Node::Alt: {
      uint64_t s = 0;
      for (const auto& c : n.children) s = std::min(kCap, s + program_size(*c) + 2);
      return s;
    }
    case Node::Repeat: {
      uint64_t body = program_size(*n.children[0]);
      uint64_t s = std::min(kCap, body * n.min);
      uint64_t rest = n.max == kUnbounded ? body + 2 : (body + 1) * (uint64_t(n.max) - n.min);
      return std::min(kCap, s + std::min(kCap, rest));
    }
  }
  return kCap;
}

class Emitter {
 public:
  explicit Emitter(std::vector<RegexInst>* code) : code_(code) {}

  void emit(const Node& n) {
    switch (n.kind) {
      case Node::Empty: return;
      case Node::Char: push({RegexOp::Char, n.c, 0}); return;
      case Node::Class: push({RegexOp::Class, n.index, 0}); return;
      case Node::Any: push({RegexOp::Any, n.dot_all ? 1u : 0u, 0}); return;
      case Node::Assert: push({RegexOp::Assert, uint32_t(n.assert_kind), n.index}); return;
      case Node::Concat:
        for (const auto& c : n.children) emit(*c);
        return;
      case Node::Alt: {
        // split L1, next; L1: a; jmp end; next: split L2, next2; ... last: z; end:
        std::vector<size_t> jumps;
        for (size_t i = 0; i < n.children.size(); ++i) {
          size_t split = 0;
          if (i + 1 < n.children.size()) split = push({RegexOp::Split, uint32_t(here() + 1), 0});
          emit(*n.children[i]);
          if (i + 1 < n.children.size()) {
            jumps.push_back(push({RegexOp::Jmp, 0, 0}));
            (*code_)[split].y = uint32_t(here());
          }
        }
        for (size_t j : jumps) (*code_)[j].x = uint32_t(here());
        return;
      }
      case Node::Repeat: {
        const Node& body = *n.children[0];
        for (uint32_t i = 0; i < n.min; ++i) emit(body);
        if (n.max == kUnbounded) {
          // loop: split body, out; body; jmp loop
          size_t loop = push({RegexOp::Split, 0, 0});
          emit(body);
          push({RegexOp::Jmp, uint32_t(loop), 0});
          prefer((*code_)[loop], uint32_t(loop + 1), uint32_t(here()), n.greedy);
          return;
        }
        // (body (body (...)?)?)? : every split leaves for the same end
        std::vector<size_t> splits;
        for (uint32_t i = n.min; i < n.max; ++i) {
          splits.push_back(push({RegexOp::Split, 0, 0}));
          emit(body);
        }
        for (size_t s : splits) prefer((*code_)[s], uint32_t(s + 1), uint32_t(here()), n.greedy);
        return;
      }
    }
  }

 private:
  static void prefer(RegexInst& split, uint32_t body, uint32_t out, bool greedy) {
    split.x = greedy ? body : out;
    split.y = greedy ? out : body;
  }
  size_t here() const { return code_->size(); }
  size_t push(RegexInst inst) {
    code_->push_back(inst);
    return code_->size() - 1;
  }
  std::vector<RegexInst>* code_;
};

// Fills program->closure_begin and closure, or leaves them empty past kMaxClosureEntries (or as much work).
void compute_closures(RegexProgram* program) {
  const std::vector<RegexInst>& code = program->code;
  std::vector<uint32_t> begin, closure, seen(code.size(), 0), stack;
  begin.reserve(code.size() + 1);
  size_t work = 0;
  for (uint32_t pc = 0; pc < code.size(); ++pc) {
    begin.push_back(uint32_t(closure.size()));
    stack.assign(1, pc);
    while (!stack.empty()) {
      uint32_t p = stack.back();
      stack.pop_back();
      if (seen[p] == pc + 1) continue;
      seen[p] = pc + 1;
      if (++work > RegexProgram::kMaxClosureEntries) return;
      const RegexInst& inst = code[p];
      if (inst.op == RegexOp::Jmp) {
        stack.push_back(inst.x);
      } else if (inst.op == RegexOp::Split) {
        stack.push_back(inst.y);
        stack.push_back(inst.x);
      } else {
        closure.push_back(p);
      }
    }
  }
  begin.push_back(uint32_t(closure.size()));
  // Where a match starts on an ASCII character, most alternatives of a pattern fail at once: filter them here.
  for (uint32_t c = 0; c < 128; ++c) {
    program->start_begin.push_back(uint32_t(program->start.size()));
    for (uint32_t i = begin[0]; i < begin[1]; ++i) {
      const RegexInst& inst = code[closure[i]];
      bool keep = inst.op == RegexOp::Char    ? inst.x == c
                  : inst.op == RegexOp::Class ? program->classes[inst.x].contains(c, unicode::Category::Cn, false)
                  : inst.op == RegexOp::Any   ? inst.x != 0 || c != '\n'
                                              : true;
      if (keep) program->start.push_back(closure[i]);
    }
  }
  program->start_begin.push_back(uint32_t(program->start.size()));
  program->closure_begin = std::move(begin);
  program->closure = std::move(closure);
}

}  // namespace

bool RegexClass::contains_slow(char32_t c, unicode::Category k, bool ws) const {
  bool in = ((categories >> uint32_t(k)) & 1) || (has_categories_not && !((categories_not >> uint32_t(k)) & 1)) ||
            (white_space && ws) || (white_space_not && !ws);
  if (!in) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                               [](char32_t v, const std::pair<char32_t, char32_t>& r) { return v < r.first; });
    in = it != ranges.begin() && c <= std::prev(it)->second;
  }
  return in != negated;
}

void RegexClass::finish() {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges = std::move(merged);
  ascii[0] = ascii[1] = 0;
  for (char32_t c = 0; c < 128; ++c)
    if (contains_slow(c, unicode::category(c), unicode::is_white_space(c))) ascii[c >> 6] |= uint64_t(1) << (c & 63);
}

Status compile_regex(std::string_view pattern, RegexProgram* program) {
  if (pattern.size() > HfRegex::kMaxPatternBytes)
    return InvalidArgument("regular expression of " + std::to_string(pattern.size()) + " bytes: the limit is " +
                           std::to_string(HfRegex::kMaxPatternBytes));
  NodePtr root;
  TERN_RETURN_IF_ERROR(hf_regex::parse_regex(pattern, program, &root));
  const uint64_t size = program_size(*root) + 1;
  if (size > HfRegex::kMaxInstructions)
    return InvalidArgument("regular expression compiles to more than " + std::to_string(HfRegex::kMaxInstructions) +
                           " instructions (counted repetitions expand their body)");
  program->code.reserve(size_t(size));
  Emitter(&program->code).emit(*root);
  program->code.push_back({RegexOp::Match, 0, 0});
  compute_closures(program);
  return Status::Ok();
}

}  // namespace tern
