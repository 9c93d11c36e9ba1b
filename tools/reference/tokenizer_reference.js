#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// The reference side of Tern's tokenizer check: what Hugging Face tokenizers (the official Node binding, 0.23.2,
// tools/reference/npm) gives for each test input of a JSON-lines text file (tokenizer_text.py).
//
//   node tools/reference/tokenizer_reference.js TOKENIZER.json TEXT.jsonl EXPECTED.jsonl [--bench] [--bench-json F]
//
// EXPECTED.jsonl: a header line, then one line per input, in order:
//   {"tokenizer": path, "lines": N, "special_ids": [the ids decode(skip_special_tokens=true) drops],
//    "specials_as_text": "emulated" | "unavailable: why"}
//   {"ids": encode(text, add_special_tokens=false), "ids_special": encode(text, add_special_tokens=true),
//    "ids_text": the ids with special tokens' text encoded as text (null when unavailable),
//    "decoded": decode(ids, skip_special_tokens=false), "decoded_skip": decode(ids_special, skip_special_tokens=true)}
//
// Special tokens as text is tokenizers' encode_special_tokens setting, which the Node binding does not expose (and
// tokenizer.json does not store). It is emulated by dropping the special tokens from added_tokens: the text of a
// special token then reaches the normalizer, pre-tokenizer and model as any text does, as encode_special_tokens
// has it. The two differ only where a non-special added token can match inside or across a special token's text
// (encode_special_tokens still consumes the special token's match); such a tokenizer gets "unavailable".
//
// --bench prints tokenizers' own encode and decode speed on the same text, one thread: every input encoded by one
// call after the other (each a Promise), and the whole text as one encodeBatch with TOKENIZERS_PARALLELISM=false.

'use strict';
const fs = require('fs');
const path = require('path');

function loadTokenizers() {
  const dir = path.join(__dirname, 'npm', 'node_modules', 'tokenizers');
  try {
    return require(dir);
  } catch (err) {
    console.error(`tokenizer_reference: cannot load the tokenizers package from ${dir} (run tools/install-deps.sh): ` +
                  err.message);
    process.exit(2);
  }
}

// The reason a special-as-text emulation would differ from encode_special_tokens, or "" when it is exact.
function specialsAsTextConflict(addedTokens) {
  const specials = addedTokens.filter((t) => t.special).map((t) => t.content);
  const others = addedTokens.filter((t) => !t.special).map((t) => t.content);
  for (const s of specials) {
    for (const o of others) {
      if (o.length === 0) continue;
      if (s.includes(o)) return `added token ${JSON.stringify(o)} lies inside special token ${JSON.stringify(s)}`;
      for (let k = 1; k < s.length && k < o.length; k++) {
        if (s.endsWith(o.slice(0, k))) {
          return `added token ${JSON.stringify(o)} can start inside special token ${JSON.stringify(s)}`;
        }
      }
    }
  }
  return '';
}

function mbPerSecond(bytes, seconds) {
  return bytes / 1e6 / seconds;
}

async function main() {
  const args = process.argv.slice(2);
  const positional = [];
  let bench = false;
  let benchJson = '';
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--bench') bench = true;
    else if (args[i] === '--bench-json') benchJson = args[++i];
    else positional.push(args[i]);
  }
  if (positional.length !== 3) {
    console.error('usage: tokenizer_reference.js TOKENIZER.json TEXT.jsonl EXPECTED.jsonl [--bench] [--bench-json F]');
    process.exit(2);
  }
  const [tokenizerPath, textPath, outPath] = positional;
  const { Tokenizer } = loadTokenizers();

  const json = JSON.parse(fs.readFileSync(tokenizerPath, 'utf8'));
  const addedTokens = json.added_tokens || [];
  const tokenizer = Tokenizer.fromFile(tokenizerPath);
  // decode(skip_special_tokens=true) drops an id by its token's text (the added token's, else the model's): every id
  // whose token is the content of a special added token, a model token that duplicates one included.
  const specialContents = new Set(addedTokens.filter((t) => t.special).map((t) => t.content));
  const specialIds = [];
  // Ids need not be contiguous (an added token may sit far past the model's vocabulary): scan to the largest.
  const size = Math.max(tokenizer.getVocabSize(true), ...addedTokens.map((t) => t.id + 1));
  for (let id = 0; id < size; id++) {
    if (specialContents.has(tokenizer.idToToken(id))) specialIds.push(id);
  }
  const conflict = specialsAsTextConflict(addedTokens);
  // Each special token's text is swapped for one no input holds, in place: tokenizers numbers an added token that is
  // not in the model's vocabulary after the largest added id so far, so keeping the list's order and length keeps
  // every other added token's id, which is checked.
  let asText = null;
  let unavailable = conflict;
  if (!unavailable) {
    const swapped = addedTokens.map((t) => (t.special ? { ...t, content: `\uE000\uE001unmatched special ${t.id}\uE001` } : t));
    asText = Tokenizer.fromString(JSON.stringify({ ...json, added_tokens: swapped }));
    for (const t of addedTokens.filter((a) => !a.special)) {
      if (asText.tokenToId(t.content) !== t.id) {
        unavailable = `added token ${JSON.stringify(t.content)} changes id (${t.id}) when the specials are swapped out`;
        asText = null;
        break;
      }
    }
  }

  const texts = fs.readFileSync(textPath, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
  const out = fs.openSync(outPath, 'w');
  fs.writeSync(out, JSON.stringify({
    tokenizer: tokenizerPath, lines: texts.length, special_ids: specialIds,
    specials_as_text: unavailable ? `unavailable: ${unavailable}` : 'emulated',
  }) + '\n');
  for (const text of texts) {
    const ids = (await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds();
    const idsSpecial = (await tokenizer.encode(text, null, { addSpecialTokens: true })).getIds();
    const idsText = asText ? (await asText.encode(text, null, { addSpecialTokens: false })).getIds() : null;
    const decoded = await tokenizer.decode(ids, false);
    const decodedSkip = await tokenizer.decode(idsSpecial, true);
    fs.writeSync(out, JSON.stringify({
      ids, ids_special: idsSpecial, ids_text: idsText, decoded, decoded_skip: decodedSkip,
    }) + '\n');
  }
  fs.closeSync(out);
  console.error(`tokenizer_reference: ${texts.length} lines -> ${outPath}` +
                (conflict ? ` (specials as text unavailable: ${conflict})` : ''));

  if (bench) await benchmark(tokenizer, texts, tokenizerPath, benchJson);
}

async function benchmark(tokenizer, texts, tokenizerPath, benchJson) {
  const bytes = texts.reduce((sum, t) => sum + Buffer.byteLength(t, 'utf8'), 0);
  const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;
  const opts = { addSpecialTokens: false };
  for (let i = 0; i < Math.min(200, texts.length); i++) await tokenizer.encode(texts[i], null, opts);  // warm up

  let start = process.hrtime.bigint();
  const allIds = [];
  for (const text of texts) allIds.push((await tokenizer.encode(text, null, opts)).getIds());
  const encodeCalls = seconds(start);
  start = process.hrtime.bigint();
  for (const ids of allIds) await tokenizer.decode(ids, false);
  const decodeCalls = seconds(start);

  process.env.TOKENIZERS_PARALLELISM = 'false';
  start = process.hrtime.bigint();
  await tokenizer.encodeBatch(texts, opts);
  const encodeBatch = seconds(start);
  start = process.hrtime.bigint();
  await tokenizer.decodeBatch(allIds, false);
  const decodeBatch = seconds(start);

  const result = {
    tokenizer: tokenizerPath, lines: texts.length, bytes, tokens: allIds.reduce((s, ids) => s + ids.length, 0),
    encode_calls_mb_s: mbPerSecond(bytes, encodeCalls), decode_calls_mb_s: mbPerSecond(bytes, decodeCalls),
    encode_batch_mb_s: mbPerSecond(bytes, encodeBatch), decode_batch_mb_s: mbPerSecond(bytes, decodeBatch),
  };
  const f = (x) => x.toFixed(2);
  console.log(`tokenizers ${tokenizerPath}: ${bytes} bytes, ` +
              `${result.tokens} tokens, 1 thread: encode ${f(result.encode_calls_mb_s)} MB/s, decode ` +
              `${f(result.decode_calls_mb_s)} MB/s (a call per line); encode ${f(result.encode_batch_mb_s)} MB/s, ` +
              `decode ${f(result.decode_batch_mb_s)} MB/s (one batch, TOKENIZERS_PARALLELISM=false)`);
  if (benchJson) fs.writeFileSync(benchJson, JSON.stringify(result) + '\n');
}

main().catch((err) => {
  console.error(`tokenizer_reference: ${err.stack || err}`);
  process.exit(1);
});
