#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Old and new tern-bench alternated on one model, for A/B numbers on a shared, noisy machine: ROUNDS rounds, each
# running the old build's tern-bench and then the new one's with the same arguments, and per test the median over
# rounds of each build's warm median, with new / old; and the fastest warm run of each build over all rounds, with
# new / old (load from other jobs only ever adds time, so on a busy machine the fastest runs compare the code).
#   tools/bench/ab_bench.sh OLD_BUILD_DIR NEW_BUILD_DIR MODEL.tern [ROUNDS] -- [tern-bench options]
#   e.g. tools/bench/ab_bench.sh /tmp/old/build build out/kjv-byte.tern 3 -- -p 256 -n 128 -d 0,128 -t 1,2
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR MODEL.tern [ROUNDS] -- [tern-bench options]" >&2; exit 2; }
old=$1 new=$2 model=$3
shift 3
rounds=3
if [ $# -gt 0 ] && [ "$1" != -- ]; then rounds=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
for b in "$old" "$new"; do
  [ -x "$b/examples/tern-bench" ] || { echo "$0: $b/examples/tern-bench not found" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for r in $(seq "$rounds"); do
  for b in old new; do
    build=$old; [ $b = new ] && build=$new
    "$build/examples/tern-bench" "$model" -o json "$@" > "$work/$b.$r.json"
  done
done
/usr/bin/python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def load(b):
    runs = {}
    for r in range(1, rounds + 1):
        text = open(f"{work}/{b}.{r}.json").read()
        rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(l) for l in text.splitlines() if l.strip()]
        for t in rows:
            if "median_ms" in t:
                runs.setdefault((t["test"], t["threads"]), []).append((t["median_ms"], t["min_ms"]))
    return runs
old, new = load("old"), load("new")
print(f"| test | threads | old ms | new ms | new / old | old min ms | new min ms | new / old (min) |"
      f"  ({rounds} rounds alternated: median of the warm medians; fastest warm run)")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for key in old:
    if key not in new: continue
    o, n = statistics.median(r[0] for r in old[key]), statistics.median(r[0] for r in new[key])
    om, nm = min(r[1] for r in old[key]), min(r[1] for r in new[key])
    print(f"| {key[0]} | {key[1]} | {o:.2f} | {n:.2f} | {n / o:.3f} | {om:.2f} | {nm:.2f} | {nm / om:.3f} |")
PY
