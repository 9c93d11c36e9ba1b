// SPDX-License-Identifier: MIT
// Reference ids and texts for tests/test_hf_model.cpp from the `tokenizers` Node binding (0.23.x): small BPE and
// Unigram models drawn from a fixed seed, each encoded without normalizer or pre-tokenizer (the whole text is one
// word), and decoder chains applied to id lists. Writes tests/fixtures/hf_model_cases.json:
//
//   NODE_PATH=/work/npmref/node_modules node tools/reference/hf_model_cases.js > tests/fixtures/hf_model_cases.json
//
// (NODE_PATH: wherever `npm install tokenizers` put it). Each case holds the table the converter would write (pieces by id,
// merges as id triples, scores, flags, decoder steps) next to the tokenizer.json it came from.
const { Tokenizer } = require('tokenizers');

let seed = 12345;
function random() {  // xorshift32: the same cases on every run
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const byteName = (b) => '<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>';

function randomText(alphabet, maxLength) {
  const n = 1 + Math.floor(random() * maxLength);
  let s = '';
  for (let i = 0; i < n; ++i) s += pick(alphabet);
  return s;
}

const cases = [];

async function bpeCase(name, options) {
  const alphabet = options.alphabet;
  const prefix = options.prefix || '';
  const suffix = options.suffix || '';
  const vocab = {};
  const pieces = [];
  const add = (t) => { if (!(t in vocab)) { vocab[t] = pieces.length; pieces.push(t); } };
  if (options.unk) add('<unk>');
  for (const b of options.bytes || []) add(byteName(b));
  for (const c of options.known) { add(c); if (prefix) add(prefix + c); if (suffix) { add(c + suffix); if (prefix) add(prefix + c + suffix); } }
  // Merges of random pairs of existing tokens; the merged token is the left one with the right one's prefix cut.
  const merges = [];
  const triples = [];
  for (let i = 0; i < options.merges; ++i) {
    const a = pick(pieces.filter((p) => !p.startsWith('<')));
    let b = pick(pieces.filter((p) => !p.startsWith('<')));
    if (a.endsWith(suffix) && suffix && random() < 0.8) continue;
    if (prefix && !b.startsWith(prefix)) b = prefix + b;
    if (!(b in vocab)) continue;
    const merged = a + b.slice(prefix.length);
    add(merged);
    merges.push([a, b]);
    triples.push(vocab[a], vocab[b], vocab[merged]);
  }
  if (options.duplicate && merges.length > 2) {  // a pair listed twice: the later rank wins
    merges.push(merges[1]);
    triples.push(triples[3], triples[4], triples[5]);
  }
  const model = {
    type: 'BPE', dropout: null, unk_token: options.unk ? '<unk>' : null,
    continuing_subword_prefix: prefix || null, end_of_word_suffix: suffix || null,
    fuse_unk: !!options.fuse_unk, byte_fallback: !!options.byte_fallback, ignore_merges: !!options.ignore_merges,
    vocab, merges,
  };
  const tokenizer = Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, pre_tokenizer: null,
    post_processor: null, decoder: null, model,
  }));
  const texts = [];
  for (let i = 0; i < 40; ++i) texts.push(randomText(alphabet, 12));
  for (const t of options.texts || []) texts.push(t);
  const expected = [];
  for (const t of texts) expected.push((await tokenizer.encode(t, null, { addSpecialTokens: false })).getIds());
  cases.push({
    name, model: 'BPE', pieces, merges: triples, unk_id: options.unk ? 0 : -1,
    byte_fallback: !!options.byte_fallback, ignore_merges: !!options.ignore_merges, fuse_unk: !!options.fuse_unk,
    continuing_subword_prefix: prefix, end_of_word_suffix: suffix, texts, ids: expected,
  });
}

async function unigramCase(name, options) {
  const vocab = [];
  const seen = new Set();
  const add = (t, score) => { if (!seen.has(t)) { seen.add(t); vocab.push([t, score]); } };
  if (options.unk) add('<unk>', 0);
  for (const b of options.bytes || []) add(byteName(b), Math.fround(-20 - random()));
  for (const c of options.known) add(c, Math.fround(-1 - 8 * random()));
  for (let i = 0; i < options.pieces; ++i) add(randomText(options.known, 4), Math.fround(-1 - 12 * random()));
  // Ties: two pieces with one score, so that the first-found path must win.
  if (options.ties) { add('ab', -4); add('ba', -4); add('a', -2); add('b', -2); }
  const model = { type: 'Unigram', unk_id: options.unk ? 0 : null, byte_fallback: !!options.byte_fallback, vocab };
  const tokenizer = Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, pre_tokenizer: null,
    post_processor: null, decoder: null, model,
  }));
  const texts = [];
  for (let i = 0; i < 40; ++i) texts.push(randomText(options.alphabet, 14));
  const expected = [];
  for (const t of texts) expected.push((await tokenizer.encode(t, null, { addSpecialTokens: false })).getIds());
  cases.push({
    name, model: 'UNIGRAM', pieces: vocab.map((v) => v[0]), scores: vocab.map((v) => v[1]),
    unk_id: options.unk ? 0 : -1, byte_fallback: !!options.byte_fallback, texts, ids: expected,
  });
}

// Decoder chains: a vocabulary of tokens, added tokens, and id lists decoded with and without skipping specials.
async function decoderCase(name, tokens, added, decoder, table_steps, idLists) {
  const vocab = {};
  tokens.forEach((t, i) => { vocab[t] = i; });
  const added_tokens = added.map((a) => ({ id: a.id, content: a.content, single_word: false, lstrip: false,
                                           rstrip: false, normalized: false, special: a.special }));
  const tokenizer = Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens, normalizer: null, pre_tokenizer: null,
    post_processor: null, decoder,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  }));
  const size = Math.max(tokens.length, ...added.map((a) => a.id + 1));
  const pieces = [];
  for (let i = 0; i < size; ++i) pieces.push(i < tokens.length ? tokens[i] : '');
  const decoded = [], skipped = [];
  for (const ids of idLists) {
    decoded.push(await tokenizer.decode(ids, false));
    skipped.push(await tokenizer.decode(ids, true));
  }
  cases.push({ name, model: 'DECODE', pieces, added, steps: table_steps, id_lists: idLists, decoded, skipped });
}

function randomIdLists(count, size) {
  const lists = [];
  for (let i = 0; i < 30; ++i) {
    const n = Math.floor(random() * 8);
    const ids = [];
    for (let k = 0; k < n; ++k) ids.push(Math.floor(random() * (size + 1)));  // size: an id with no token
    lists.push(ids);
  }
  return lists;
}

(async () => {
  const letters = ['a', 'b', 'c', 'd'];
  await bpeCase('bpe_plain', { alphabet: letters, known: letters, merges: 30, duplicate: true });
  await bpeCase('bpe_unk', { alphabet: [...letters, 'x', 'é'], known: letters, merges: 25, unk: true });
  await bpeCase('bpe_fuse_unk', { alphabet: [...letters, 'x', 'é'], known: letters, merges: 25, unk: true, fuse_unk: true });
  await bpeCase('bpe_no_unk', { alphabet: [...letters, 'x'], known: letters, merges: 20 });
  await bpeCase('bpe_byte_fallback', { alphabet: [...letters, 'x', 'é', '€'], known: letters, merges: 25, unk: true,
                                       byte_fallback: true, bytes: [0x78, 0xC3, 0xA9, 0xE2, 0x82] });
  await bpeCase('bpe_prefix_suffix', { alphabet: [...letters, 'x'], known: letters, merges: 40, unk: true,
                                       prefix: '##', suffix: '</w>' });
  await bpeCase('bpe_ignore_merges', { alphabet: letters, known: letters, merges: 30, ignore_merges: true,
                                       texts: ['abcd', 'ab', 'dcba'] });
  await unigramCase('unigram_plain', { alphabet: ['a', 'b', 'c'], known: ['a', 'b', 'c'], pieces: 30, unk: true });
  await unigramCase('unigram_unk', { alphabet: ['a', 'b', 'c', 'x', 'é', '<unk>'], known: ['a', 'b', 'c'], pieces: 30,
                                     unk: true });
  await unigramCase('unigram_ties', { alphabet: ['a', 'b'], known: [], pieces: 0, unk: true, ties: true });
  await unigramCase('unigram_byte_fallback', { alphabet: ['a', 'b', 'x', 'é'], known: ['a', 'b'], pieces: 20, unk: true,
                                               byte_fallback: true, bytes: [0x78, 0xC3, 0xA9] });

  const g = (c) => c;  // GPT-2 byte characters used below: 'Ġ' (space), 'Ċ' (newline), 'Ã', '©'
  await decoderCase('byte_level', ['Ġhello', 'Ċ', 'Ã', '©', 'x', 'Ġ', 'plain€', '<s>'], [{ id: 7, content: '<s>', special: true }],
                    { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
                    [{ kind: 'BYTE_LEVEL' }], randomIdLists(30, 8).concat([[2, 3], [2], [0, 2, 3, 1]]));
  await decoderCase('metaspace_first', ['▁hi', '▁', 'a▁b', '<s>', 'x'], [{ id: 3, content: '<s>', special: true }, { id: 5, content: 'NEW', special: false }],
                    { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true },
                    [{ kind: 'METASPACE', content: '▁', prepend_scheme: 'FIRST' }], randomIdLists(30, 6));
  await decoderCase('metaspace_never', ['▁hi', '▁', 'a▁b', 'x'], [],
                    { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: true },
                    [{ kind: 'METASPACE', content: '▁', prepend_scheme: 'NEVER' }], randomIdLists(30, 4));
  await decoderCase('llama', ['<unk>', '<s>', '</s>', '<0x41>', '<0xC3>', '<0xA9>', '<0xFF>', '▁hello', '▁', 'x▁y', '<0x0A>', '<0x2B>'],
                    [{ id: 1, content: '<s>', special: true }, { id: 2, content: '</s>', special: true }],
                    { type: 'Sequence', decoders: [
                      { type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' },
                      { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
                    [{ kind: 'REPLACE', pattern: '▁', content: ' ' }, { kind: 'BYTE_FALLBACK' }, { kind: 'FUSE' },
                     { kind: 'STRIP', content: ' ', start: 1, stop: 0 }],
                    randomIdLists(30, 12).concat([[4, 5], [4, 7], [1, 7, 4, 5, 2], [7, 6, 6]]));
  // (A token that is all content characters makes the reference panic: none here.)
  await decoderCase('strip_both', ['aab', 'aaxa', 'ba', 'xa', 'b'], [],
                    { type: 'Strip', content: 'a', start: 2, stop: 1 },
                    [{ kind: 'STRIP', content: 'a', start: 2, stop: 1 }], randomIdLists(30, 5));
  await decoderCase('replace_regex', ['▁▁a', 'b▁', '▁', 'c'], [],
                    { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { Regex: '▁+' }, content: '_' },
                                                   { type: 'Replace', pattern: { Regex: 'x*' }, content: '.' }] },
                    [{ kind: 'REPLACE', pattern: '▁+', regex: true, content: '_' },
                     { kind: 'REPLACE', pattern: 'x*', regex: true, content: '.' }], randomIdLists(30, 4));
  await decoderCase('replace_empty', ['a', 'bé', 'c'], [],
                    { type: 'Replace', pattern: { String: '' }, content: '-' },
                    [{ kind: 'REPLACE', pattern: '', content: '-' }], randomIdLists(30, 3));
  await decoderCase('none', ['a', 'b', '<s>'], [{ id: 2, content: '<s>', special: true }], null, [], randomIdLists(30, 3));
  process.stdout.write(JSON.stringify({ generator: 'tools/reference/hf_model_cases.js', cases }, null, 0) + '\n');
})();
