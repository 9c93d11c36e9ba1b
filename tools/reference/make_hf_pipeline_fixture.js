// SPDX-License-Identifier: MIT
// Writes tests/fixtures/hf_pipeline.json: tokenizer.json pipelines (the normalizer, pre-tokenizer and added tokens of
// the real GPT-2, Llama 3, Qwen 3, GPT-4o, Gemma 3 and Mistral files, and small ones for each normalizer,
// pre-tokenizer and added-token flag) with texts and what the `tokenizers` library splits each text into: added
// tokens and the normalized, pre-tokenized words. tests/test_hf_pipeline.cpp builds the same pipelines and matches
// HfTextPipeline::split against them.
//
//   NODE_PATH=/work/npmref/node_modules node tools/reference/make_hf_pipeline_fixture.js \
//     /work/npmref/node_modules/@lenml tests/fixtures/hf_pipeline.json
//
// The words are read back through a model that shows them: BPE with no merges whose only tokens are the 256
// <0xNN> byte tokens (byte_fallback), so each word becomes its UTF-8 bytes, grouped by the encoding's word ids.
// The Node binding cannot set encode_special_tokens; the expected split with special tokens kept as text is that of
// the same pipeline without its special tokens. That is the same only where no special token's match could overlap
// another added token's (the Rust finds the special one, drops it, and goes on after it), so a text that holds a
// special token able to overlap another has null there.
'use strict';
const fs = require('fs');
const path = require('path');
const {Tokenizer} = require('tokenizers');

const [lenmlDir, outPath] = process.argv.slice(2);
if (!lenmlDir || !outPath) {
  console.error('usage: make_hf_pipeline_fixture.js <@lenml dir> <out.json>');
  process.exit(2);
}

let seed = 7177;
function random() {
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(random() * a.length)];

const PIECES = [
  'hello', 'World', 'THE', 'Straße', 'İstanbul', 'naïve', 'e\u0301', 'Ångström', 'ÉCOLE', 'ǅemal', 'ſ',
  'Привет', 'мир', 'Ελλάδα', '東京', '日本語', 'カタカナ', '한국어', 'مرحبا', 'नमस्ते', 'ঃ', 'ﬁ', '㎏', '①', 'Ⅻ',
  '0', '7', '42', '123', '2024', '1234567', '٣٤', '½', '3.14', '1,000',
  "'s", "'T", "'re", "'ll", "'d", "'",
  ' ', ' ', ' ', '  ', '   ', '\t', '\n', '\r\n', '\n\n', ' \n', '\u00a0', '\u3000', '\u2028', '\u200b', '\ufeff',
  '.', ',', '!', '?', '...', '--', '/', '(', ')', '[x]', '"', '#', '@', '$', '%', '&', '*', '+', '=', '<', '>',
  '|', '\\', '_', '~', '`', '^', '€', '©', '–', '«', '»', '¿', '‿',
  '😀', '👍🏽', '👨‍👩‍👧', '🇫🇷', '\u0301', '\u0308', '\u200d', '\u0903', '▁', '▁▁',
];

const COMMON_TEXTS = [
  '', ' ', '  ', 'Hello world', ' Hello world', 'Hello  world ', 'hello\nworld\n\n', 'I\'m here, isn\'t it?',
  'The year 2024 had 366 days.', 'naïve café Ångström', 'Straße İstanbul ǅ', '東京は日本の首都です。',
  'e\u0301 vs \u00e9', '👨‍👩‍👧 family 👍🏽', 'tab\there', '\u00a0nbsp\u3000ideo', 'x=1+2*3/4', 'ﬁ ㎏ ① ½',
];

function randomText(extra) {
  const pieces = PIECES.concat(extra, extra, extra);
  let s = '';
  const n = 1 + Math.floor(random() * 12);
  for (let i = 0; i < n; ++i) s += pick(pieces);
  return s;
}

function addedToken(content, special, flags = {}) {
  return {
    content, special, single_word: !!flags.single_word, lstrip: !!flags.lstrip, rstrip: !!flags.rstrip,
    normalized: flags.normalized === undefined ? !special : !!flags.normalized,
  };
}

function fromRealFile(name, file, keepAdded) {
  const t = JSON.parse(fs.readFileSync(path.join(lenmlDir, file, 'models', 'tokenizer.json'), 'utf8'));
  const added = t.added_tokens.filter(keepAdded).map((a) => ({
    content: a.content, special: a.special, single_word: a.single_word, lstrip: a.lstrip, rstrip: a.rstrip,
    normalized: a.normalized,
  }));
  return {name, normalizer: t.normalizer, pre_tokenizer: t.pre_tokenizer, added_tokens: added};
}

const metaspace = (scheme, split) => ({type: 'Metaspace', replacement: '▁', prepend_scheme: scheme, split});
const splitString = (s, behavior, invert = false) => ({type: 'Split', pattern: {String: s}, behavior, invert});
const splitRegex = (r, behavior, invert = false) => ({type: 'Split', pattern: {Regex: r}, behavior, invert});
const seq = (pretokenizers) => ({type: 'Sequence', pretokenizers});
const nseq = (normalizers) => ({type: 'Sequence', normalizers});

const FLAG_TOKENS = [
  addedToken('<sp>', true),
  addedToken('[L]', true, {lstrip: true}),
  addedToken('[R]', true, {rstrip: true}),
  addedToken('[LR]', false, {lstrip: true, rstrip: true, normalized: false}),
  addedToken('word', false, {single_word: true, normalized: false}),
  addedToken('Norm', false, {normalized: true}),
  addedToken('<norm_sp>', true, {normalized: true}),
  addedToken('wide', false, {single_word: true, normalized: true}),
  addedToken(' lead', false, {normalized: false}),
  addedToken('<s', false, {normalized: false}),
];

const cases = [
  fromRealFile('gpt2', 'tokenizer-gpt2', () => true),
  fromRealFile('llama3', 'tokenizer-llama3', (a) => !/reserved_special_token_[1-9]/.test(a.content)),
  fromRealFile('qwen3', 'tokenizer-qwen3', () => true),
  fromRealFile('gpt4o', 'tokenizer-gpt4o', () => true),
  fromRealFile('gemma3', 'tokenizer-gemma3', (a) => !/^<unused([1-9]\d*)>$/.test(a.content) &&
    !/^<\/?[a-z0-9]+>$/.test(a.content) || ['<pad>', '<eos>', '<bos>', '<unk>', '<mask>'].includes(a.content)),
  fromRealFile('mistral', 'tokenizer-llama2', () => true),
  {name: 'flags_lowercase_metaspace_first', normalizer: nseq([{type: 'Lowercase'}]),
   pre_tokenizer: metaspace('first', true), added_tokens: FLAG_TOKENS},
  {name: 'flags_prepend_replace', normalizer: nseq([{type: 'Prepend', prepend: '▁'},
    {type: 'Replace', pattern: {String: ' '}, content: '▁'}]), pre_tokenizer: null, added_tokens: FLAG_TOKENS},
  {name: 'flags_bytelevel_prefix', normalizer: null,
   pre_tokenizer: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
   added_tokens: FLAG_TOKENS},
  {name: 'metaspace_first_nosplit_strip', normalizer: {type: 'Strip', strip_left: true, strip_right: false},
   pre_tokenizer: metaspace('first', false), added_tokens: [addedToken('<x>', true)]},
  {name: 'metaspace_always', normalizer: null, pre_tokenizer: metaspace('always', true), added_tokens: []},
  {name: 'metaspace_never_split', normalizer: null, pre_tokenizer: metaspace('never', true), added_tokens: []},
  {name: 'nfd_strip_accents_lowercase', normalizer: nseq([{type: 'NFD'}, {type: 'StripAccents'}, {type: 'Lowercase'}]),
   pre_tokenizer: null, added_tokens: []},
  {name: 'nfkc', normalizer: {type: 'NFKC'}, pre_tokenizer: null, added_tokens: []},
  {name: 'nfkd', normalizer: {type: 'NFKD'}, pre_tokenizer: null, added_tokens: []},
  {name: 'nfc_lowercase', normalizer: nseq([{type: 'NFC'}, {type: 'Lowercase'}]), pre_tokenizer: null, added_tokens: []},
  {name: 'strip_both', normalizer: {type: 'Strip', strip_left: true, strip_right: true}, pre_tokenizer: null,
   added_tokens: []},
  {name: 'strip_right', normalizer: {type: 'Strip', strip_left: false, strip_right: true}, pre_tokenizer: null,
   added_tokens: []},
  {name: 'replace_regex', normalizer: nseq([{type: 'Replace', pattern: {Regex: '\\s+'}, content: ' '},
    {type: 'Replace', pattern: {Regex: '[0-9]'}, content: '#'}, {type: 'Replace', pattern: {String: ''}, content: '|'}]),
   pre_tokenizer: null, added_tokens: []},
  {name: 'replace_empty_regex', normalizer: {type: 'Replace', pattern: {Regex: 'x*'}, content: '-'},
   pre_tokenizer: null, added_tokens: []},
  {name: 'whitespace', normalizer: null, pre_tokenizer: {type: 'Whitespace'}, added_tokens: []},
  {name: 'whitespace_split', normalizer: null, pre_tokenizer: {type: 'WhitespaceSplit'}, added_tokens: []},
  {name: 'digits_individual_punctuation', normalizer: null,
   pre_tokenizer: seq([{type: 'Digits', individual_digits: true}, {type: 'Punctuation', behavior: 'Isolated'}]),
   added_tokens: []},
  {name: 'digits_contiguous', normalizer: null, pre_tokenizer: {type: 'Digits', individual_digits: false},
   added_tokens: []},
  ...['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'].map((b) => ({
    name: 'punctuation_' + b, normalizer: null, pre_tokenizer: {type: 'Punctuation', behavior: b}, added_tokens: []})),
  ...['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'].map((b) => ({
    name: 'split_' + b, normalizer: null,
    pre_tokenizer: seq([splitString(' ', b), splitRegex('\\d+|x*', b, true)]), added_tokens: []})),
  {name: 'bytelevel_then_split', normalizer: null,
   pre_tokenizer: seq([{type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false},
     splitString('Ġ', 'MergedWithNext'), metaspace('first', true)]), added_tokens: [addedToken('<m>', true)]},
];

function referenceTokenizer(c, dropSpecials) {
  const vocab = {};
  for (let b = 0; b < 256; ++b) vocab['<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>'] = b;
  const added = c.added_tokens.filter((t) => !(dropSpecials && t.special)).map((t, i) => Object.assign({id: 256 + i}, t));
  const json = {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: c.normalizer,
    pre_tokenizer: c.pre_tokenizer, post_processor: null, decoder: null,
    model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
            fuse_unk: false, byte_fallback: true, ignore_merges: false, vocab, merges: []},
  };
  return {tokenizer: Tokenizer.fromString(JSON.stringify(json)), added};
}

async function segments(ref, c, text) {
  const enc = await ref.tokenizer.encode(text, null, {addSpecialTokens: false});
  const ids = enc.getIds(), words = enc.getWordIds();
  const out = [];
  for (let i = 0; i < ids.length;) {
    let j = i + 1;
    while (j < ids.length && words[j] === words[i]) ++j;
    if (ids[i] >= 256) {
      if (j !== i + 1) throw new Error('an added token shares its word');
      const content = ref.added[ids[i] - 256].content;
      out.push({added: c.added_tokens.findIndex((t) => t.content === content)});
    } else {
      out.push({word: Buffer.from(ids.slice(i, j)).toString('utf8')});
    }
    i = j;
  }
  return out;
}

function canOverlap(a, b) {
  if (a.includes(b) || b.includes(a)) return true;
  for (let k = 1; k < Math.min(a.length, b.length); ++k) {
    if (a.endsWith(b.slice(0, k)) || b.endsWith(a.slice(0, k))) return true;
  }
  return false;
}

// The special tokens that could overlap a non-special one, as their forms in the raw and the normalized text.
function riskySpecials(ref, c) {
  const n = ref.tokenizer.getNormalizer();
  const form = (t) => (t.normalized && n ? n.normalizeString(t.content) : t.content);
  const others = c.added_tokens.filter((t) => !t.special).map(form);
  return c.added_tokens.filter((t) => t.special && others.some((o) => canOverlap(form(t), o)))
      .map((t) => ({raw: t.content, normalized: form(t)}));
}

(async () => {
  const out = [];
  for (const c of cases) {
    const contents = c.added_tokens.map((t) => t.content).filter((s) => s.length < 40);
    const texts = COMMON_TEXTS.slice();
    for (const s of contents.slice(0, 15)) texts.push('a ' + s + ' b', s + s, ' ' + s, s + '  x');
    for (let i = 0; i < 40; ++i) texts.push(randomText(contents.slice(0, 30)));
    const split = referenceTokenizer(c, false), keep = referenceTokenizer(c, true);
    const risky = riskySpecials(split, c);
    const normalizer = split.tokenizer.getNormalizer();
    const rows = [];
    for (const text of texts) {
      const normalized = normalizer ? normalizer.normalizeString(text) : text;
      const unsure = risky.some((r) => text.includes(r.raw) || normalized.includes(r.normalized));
      rows.push({text, split_specials: await segments(split, c, text),
                 specials_as_text: unsure ? null : await segments(keep, c, text)});
    }
    out.push(Object.assign({}, c, {texts: rows}));
  }
  fs.writeFileSync(outPath, JSON.stringify({generator: 'tokenizers ' + require('tokenizers/package.json').version,
                                            cases: out}, null, 0) + '\n');
})();
