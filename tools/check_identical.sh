#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks that two builds of Tern give bit-identical logits: every golden under tests/goldens/ and the shipped model
# are converted with each build's tern-convert (the .tern files must be identical too, and so must their
# conversions with --weights f16, int8 and int4), then run with each build's
# `tern-run --ids --logits-out` at 1 and 2 threads on the CPU, and with --vulkan also on the Vulkan backend (models
# without a context limit fed their evaluation segment per call), and the .npy files are compared byte for byte.
#   tools/check_identical.sh [--vulkan] OLD_BUILD_DIR NEW_BUILD_DIR     e.g. /tmp/main-before/build build
# Prints one line per model and run (for logits that differ, the largest difference: max |new - old| over
# max |old|, and max |new - old| itself); exits 1 if anything differs.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=("--threads 1" "--threads 2")
if [ "${1:-}" = --vulkan ]; then
  runs+=("--backend vulkan")
  shift
fi
[ $# -eq 2 ] || { echo "usage: $0 [--vulkan] OLD_BUILD_DIR NEW_BUILD_DIR" >&2; exit 2; }
old=$1 new=$2
for b in "$old" "$new"; do
  for exe in converter/tern-convert examples/tern-run; do
    [ -x "$b/$exe" ] || { echo "$0: $b/$exe not found (build it first)" >&2; exit 2; }
  done
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The shipped model's ids: its first 256 bytes (one context) of held-out text.
kjv_ids="$work/kjv-ids.json"
/usr/bin/python3 -c 'import json,sys; print(json.dumps(list(open(sys.argv[1],"rb").read()[:256])))' \
  examples/models/kjv-byte/heldout.txt > "$kjv_ids"

# The segment a model without a context limit is evaluated in (Transformer-XL tgt_len, compressive segment_length).
segment_of() {
  /usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("tgt_len") or c.get("segment_length") or 0)' "$1/config.json"
}

# max |b - a| / max |a| and max |b - a| of two float32 .npy files of the same shape.
npy_diff() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import ast, struct, sys
from array import array
def load(path):
    data = open(path, "rb").read()
    assert data[:6] == b"\x93NUMPY", path
    major = data[6]
    hlen, start = (struct.unpack("<H", data[8:10])[0], 10) if major == 1 else (struct.unpack("<I", data[8:12])[0], 12)
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], (path, header)
    values = array("f")
    values.frombytes(data[start + hlen:])
    return values
a, b = load(sys.argv[1]), load(sys.argv[2])
assert len(a) == len(b), "shapes differ"
diff = max(abs(x - y) for x, y in zip(a, b))
scale = max(abs(x) for x in a)
print(f"{diff / scale:.1e} of max |logit| ({diff:.2e})")
PY
}

status=0
declare -i converted=0
printf '%-34s %-16s %-7s %12s  %s\n' model run segment bytes result
for dir in tests/goldens/*/ examples/models/kjv-byte/; do
  dir=${dir%/}
  name=$(basename "$dir")
  ids="$dir/ids.json"
  [ "$name" = kjv-byte ] && ids=$kjv_ids
  [ -f "$ids" ] || continue
  for b in old new; do
    build=$old; [ $b = new ] && build=$new
    "$build/converter/tern-convert" "$dir" -o "$work/$name.$b.tern" --quiet 2>"$work/err" ||
      { echo "$name: $build/converter/tern-convert failed: $(cat "$work/err")" >&2; exit 2; }
  done
  if ! cmp -s "$work/$name.old.tern" "$work/$name.new.tern"; then
    echo "$name: the converted .tern files differ"
    status=1
  fi
  # The compressed conversions' bytes too (a model whose matrices cannot take a format is refused alike by both).
  for weights in f16 int8 int4; do
    for b in old new; do
      build=$old; [ $b = new ] && build=$new
      "$build/converter/tern-convert" "$dir" -o "$work/$name.$weights.$b.tern" --weights "$weights" --quiet \
        >/dev/null 2>&1 || echo "refused" >"$work/$name.$weights.$b.tern"
    done
    if cmp -s "$work/$name.$weights.old.tern" "$work/$name.$weights.new.tern"; then
      converted+=1
    else
      echo "$name: the .tern files converted with --weights $weights differ"
      status=1
    fi
  done
  segment=$(segment_of "$dir")
  n=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$ids")
  extra=(--max-tokens "$n")
  [ "$segment" -gt 0 ] && extra+=(--segment "$segment")
  for run in "${runs[@]}"; do
    tag=${run//[^a-z0-9]/}
    for b in old new; do
      build=$old; [ $b = new ] && build=$new
      # shellcheck disable=SC2086  # $run is an option and its value
      "$build/examples/tern-run" "$work/$name.old.tern" --ids "$ids" --logits-out "$work/$name.$tag.$b.npy" \
        $run "${extra[@]}" >/dev/null 2>"$work/err" ||
        { echo "$name: $build/examples/tern-run $run failed: $(cat "$work/err")" >&2; exit 2; }
    done
    bytes=$(stat -c %s "$work/$name.$tag.new.npy")
    if cmp -s "$work/$name.$tag.old.npy" "$work/$name.$tag.new.npy"; then
      result=identical
    else
      result="DIFFERENT: $(npy_diff "$work/$name.$tag.old.npy" "$work/$name.$tag.new.npy")"
      status=1
    fi
    printf '%-34s %-16s %-7s %12s  %s\n' "$name" "${run#--}" "$segment" "$bytes" "$result"
  done
done
echo "$converted compressed conversions (--weights f16, int8, int4) compared"
[ $status = 0 ] && echo "all logits and converted files bit-identical" || echo "some logits or converted files differ"
exit $status
