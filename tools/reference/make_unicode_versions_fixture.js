// SPDX-License-Identifier: MIT
// Writes tests/fixtures/unicode_versions.txt: for every code point of blocks where Unicode 8.0 .. 17.0 added
// characters, what the `tokenizers` library (Node binding) makes of it, so that tests/test_unicode.cpp pins the
// Unicode version each of its facts follows (runtime/src/text/unicode.h). One line per code point:
//   hex|category|white_space|NFC|NFD|NFKC|NFKD|lower|strip_accents|punctuation|reorder_after|reorder_before
// category: the one \p{Xx} (Oniguruma) that matches it; white_space: \s; the strings are hexadecimal code points,
// "-" for the empty one; punctuation: the Punctuation pre-tokenizer cuts it off (1/0); reorder_after and
// reorder_before: NFD of "a" X U+0334 and of "a" U+0301 X (canonical reordering shows X's combining class).
//
//   NODE_PATH=/work/npmref/node_modules node tools/reference/make_unicode_versions_fixture.js tests/fixtures/unicode_versions.txt
'use strict';
const fs = require('fs');
const T = require('tokenizers');

const BLOCKS = [
  [0x0860, 0x08FF], [0x0AF0, 0x0AFF], [0x0C70, 0x0C8F], [0x0D00, 0x0D0F], [0x1C80, 0x1CBF], [0x1DF0, 0x1DFF],
  [0x2E40, 0x2E5F], [0x32F0, 0x32FF], [0xA7B0, 0xA7FF], [0xAB60, 0xAB6F], [0x10570, 0x105FF], [0x10D00, 0x10D8F],
  [0x10EC0, 0x10EFF], [0x11380, 0x113FF], [0x11440, 0x1147F], [0x11930, 0x1194F], [0x11A00, 0x11AAF],
  [0x11D00, 0x11D5F], [0x16D40, 0x16D7F], [0x16E40, 0x16EDF], [0x1CCF0, 0x1CCFF], [0x1E5D0, 0x1E5FF],
  [0x1F100, 0x1F1FF], [0x1F230, 0x1F23F], [0x1FBF0, 0x1FBFF], [0x2EBF0, 0x2EBFF], [0x323B0, 0x323BF],
];
const CATEGORIES = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe', 'Pi',
  'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Cs', 'Co', 'Cn'];

// A pre-tokenizer that removes what the pattern matches: a one-character string comes back empty iff it matches.
function remover(pattern) {
  const json = {version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: {type: 'Split', pattern: {Regex: pattern}, behavior: 'Removed', invert: false},
    post_processor: null, decoder: null, model: {type: 'WordLevel', vocab: {a: 0}, unk_token: 'a'}};
  return T.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
}
const matches = (r, s) => r.preTokenizeString(s).length === 0;
const categories = CATEGORIES.map((c) => [c, remover('\\p{' + c + '}')]);
const space = remover('\\s');
const forms = [T.nfcNormalizer(), T.nfdNormalizer(), T.nfkcNormalizer(), T.nfkdNormalizer(), T.lowercase(),
  T.stripAccentsNormalizer()];
const nfd = T.nfdNormalizer();
const punctuation = T.punctuationPreTokenizer();
const hex = (s) => s.length === 0 ? '-' :
  Array.from(s, (ch) => ch.codePointAt(0).toString(16).toUpperCase()).join(' ');

const lines = [];
for (const [first, last] of BLOCKS) {
  for (let cp = first; cp <= last; ++cp) {
    const ch = String.fromCodePoint(cp);
    const category = categories.filter(([, r]) => matches(r, ch)).map(([c]) => c).join(',');
    lines.push([cp.toString(16).toUpperCase(), category, matches(space, ch) ? 1 : 0,
      ...forms.map((f) => hex(f.normalizeString(ch))),
      punctuation.preTokenizeString('a' + ch + 'a').length === 3 ? 1 : 0,
      hex(nfd.normalizeString('a' + ch + '\u0334')), hex(nfd.normalizeString('a\u0301' + ch))].join('|'));
  }
}
fs.writeFileSync(process.argv[2], lines.join('\n') + '\n');
