#!/bin/sh
# SPDX-License-Identifier: MIT
# Full-scale Transformer-XL benchmark: a random-init model with transfo-xl-wt103's exact config (about 1.1 GB of
# float32, made here and never committed), converted by tern-convert (its peak anonymous memory is sampled: the
# weights stream through one tensor at a time, never two copies), then streamed 100 segments of 128 tokens with
# mem_len 1600 by build/tools/bench/transfo_xl_bench, which prints tokens/s and the peak resident memory after the
# first segment and at the end.
#
#   tools/bench/transfo_xl_wt103.sh [WORK_DIR] [transfo_xl_bench options, e.g. --threads 2 --segments 100]
#
# WORK_DIR (default /tmp/tern-wt103) receives checkpoint/ and wt103.tern, about 2.2 GB; BUILD (default build)
# names the build directory.
set -eu
work=${1:-/tmp/tern-wt103}
[ $# -gt 0 ] && shift
build=${BUILD:-build}
here=$(dirname "$0")

mkdir -p "$work"
if [ ! -f "$work/checkpoint/model.safetensors" ]; then
  /usr/bin/python3 "$here/make_random_transfo_xl.py" "$work/checkpoint"
fi

# Convert, sampling the converter's anonymous memory (its own allocations) and its whole resident set (which also
# counts the pages of the mmapped checkpoint it has read: file cache, not a copy).
start=$(date +%s.%N)
"$build/converter/tern-convert" "$work/checkpoint" -o "$work/wt103.tern" --quiet &
pid=$!
peak_anon=0
peak_rss=0
while kill -0 "$pid" 2>/dev/null; do
  anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  [ "${anon:-0}" -gt "$peak_anon" ] && peak_anon=$anon
  [ "${hwm:-0}" -gt "$peak_rss" ] && peak_rss=$hwm
  sleep 0.05
done
wait "$pid"
end=$(date +%s.%N)
weights=$(stat -c %s "$work/checkpoint/model.safetensors")
out=$(stat -c %s "$work/wt103.tern")
awk -v a="$peak_anon" -v r="$peak_rss" -v w="$weights" -v o="$out" -v s="$start" -v e="$end" 'BEGIN {
  printf "tern-convert: %.1f s, checkpoint %.0f MiB -> %s %.0f MiB; peak anonymous memory %.0f MiB, peak RSS %.0f MiB\n",
         e - s, w / 1048576, "wt103.tern", o / 1048576, a / 1024, r / 1024 }'

"$build/tools/bench/transfo_xl_bench" "$work/wt103.tern" "$@"
