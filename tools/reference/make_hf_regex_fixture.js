// SPDX-License-Identifier: MIT
// Writes tests/fixtures/hf_regex_splits.json: random mixed-script strings and, for each of the Split patterns of
// real tokenizer.json files (GPT-2, Llama 3, Qwen, GPT-4o), the pieces the `tokenizers` library (Oniguruma) cuts
// them into with behavior "Isolated", as UTF-8 byte lengths. tests/test_hf_regex.cpp matches HfRegex against them.
//
//   NODE_PATH=/work/npmref/node_modules node tools/reference/make_hf_regex_fixture.js tests/fixtures/hf_regex_splits.json
'use strict';
const fs = require('fs');
const {Tokenizer} = require('tokenizers');

const PATTERNS = {
  gpt2: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
  llama3: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  gpt4o: "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

// A small deterministic generator (mulberry32), so that the fixture is the same on every run.
let seed = 20240611;
function random() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(random() * a.length)];

const PIECES = [
  'hello', 'World', 'THE', 'don', 'ǅemal', 'Ǆ', 'ʰa', 'ª', 'Straße', 'ſ', 'K', 'İstanbul', 'naïve', 'e\u0301',
  'Привет', 'мир', 'Ελλάδα', 'σοφία', '東京', '日本語', 'カタカナ', 'ひらがな', '한국어', 'مرحبا', 'नमस्ते', 'ক্ষ',
  '0', '7', '42', '123', '2024', '1234567', '٣٤', '४२', 'Ⅻ', '²', '½', '3.14', '1,000',
  "'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'d", "'D", "'x", "'", "’s", "'ſ",
  ' ', ' ', ' ', '  ', '   ', '\t', '\n', '\r\n', '\r', '\n\n', ' \n', '\u00a0', '\u3000', '\u2028', '\u000b',
  '\u0085', '\u200b', '\ufeff',
  '.', ',', '!', '?', '...', '--', '/', '//', '(', ')', '[x]', '{', '}', '"', '#', '@', '$', '%', '&', '*', '+',
  '=', '<', '>', '|', '\\', '_', '~', '`', '^', '€', '©', '–', '—', '«', '»', '•', '§',
  '😀', '👍🏽', '👨‍👩‍👧', '🇫🇷', '❤️', '✨', '\u0301', '\u0308', '\u200d',
];

function randomText() {
  let s = '';
  const n = 1 + Math.floor(random() * 24);
  for (let i = 0; i < n; ++i) s += pick(PIECES);
  return s;
}

function splitter(pattern) {
  const json = {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: {type: 'Split', pattern: {Regex: pattern}, behavior: 'Isolated', invert: false},
    post_processor: null, decoder: null, model: {type: 'WordLevel', vocab: {a: 0}, unk_token: 'a'},
  };
  return Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
}

const splitters = Object.fromEntries(Object.entries(PATTERNS).map(([name, p]) => [name, splitter(p)]));
const cases = [];
for (let i = 0; i < 600; ++i) {
  const text = randomText();
  const pieces = {};
  for (const [name, s] of Object.entries(splitters)) {
    pieces[name] = s.preTokenizeString(text).map(([piece]) => Buffer.byteLength(piece, 'utf8'));
  }
  cases.push({text, pieces});
}
fs.writeFileSync(process.argv[2], JSON.stringify({patterns: PATTERNS, cases}, null, 0) + '\n');
