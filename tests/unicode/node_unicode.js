// SPDX-License-Identifier: MIT
// The expected values of tests/test_unicode.cpp, from Node's ICU: reads lines of hexadecimal code points (one
// string per line) from argv[2] and writes to argv[3] the Unicode version of Node's ICU, then per line:
//   NFC|NFD|NFKC|NFKD|lower|white_space|alphabetic
// each string as hexadecimal code points separated by spaces; lower is String.prototype.toLowerCase, and the two
// flags (0/1, \p{White_Space} and \p{Alphabetic}) are those of the first code point.
'use strict';
const fs = require('fs');
const hex = (s) => Array.from(s, (ch) => ch.codePointAt(0).toString(16).toUpperCase()).join(' ');
const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.length > 0);
const out = [];
for (const line of lines) {
  const s = String.fromCodePoint(...line.split(' ').map((h) => parseInt(h, 16)));
  const first = String.fromCodePoint(parseInt(line.split(' ')[0], 16));
  out.push([s.normalize('NFC'), s.normalize('NFD'), s.normalize('NFKC'), s.normalize('NFKD'), s.toLowerCase()]
    .map(hex).concat([/^\p{White_Space}$/u.test(first) ? 1 : 0, /^\p{Alphabetic}$/u.test(first) ? 1 : 0])
    .join('|'));
}
fs.writeFileSync(process.argv[3], [process.versions.unicode].concat(out).join('\n') + '\n');
