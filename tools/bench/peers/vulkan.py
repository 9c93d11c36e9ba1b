#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Vulkan phase of the side-by-side benchmark (tools/bench/peers.sh --vulkan): Tern's Vulkan backend against
llama.cpp's prebuilt Vulkan backend (npm @node-llama-cpp/linux-x64-vulkan, the release of the CPU package), every
layer offloaded, with and without flash attention, on the same device and the same weights (the GPT-2-like model:
dense.tern, dense.gguf, dense-f16.gguf). Float32 weights, then F16 weights (llama.cpp's F16 GGUF against Tern's
float32 file with weight_storage F16, tern-bench --f16-weights). Tests as llama-bench's: ppN (one call of N tokens)
and tgT@dD (T tokens one call each after D in the cache, the D in one untimed call).

For each test, Tern's CPU float32 run comes first: every Vulkan result's logits (every position of the prefill,
every generated step) are compared with it. Then the runtimes alternate within the test (Tern, llama.cpp FA,
llama.cpp), each in its own process (tern_driver.cpp with TERN_PEER_BACKEND=vulkan, llama_driver.cpp with
PEER_LLAMA_GPU=1 and GGML_VK_VISIBLE_DEVICES set). Each driver prints the device it ran on; llama_driver.cpp exits
3 when llama.cpp did not offload every layer to a GPU device, and such a row is reported as refused. Prints
markdown tables and writes JSON.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import MiB, compare, log, measured  # noqa: E402

LABEL = {"tern-cpu": "Tern CPU f32 (reference)", "tern": "Tern Vulkan", "llama-fa": "llama.cpp Vulkan FA",
         "llama": "llama.cpp Vulkan"}
# weights: (key, Tern file, Tern's TERN_PEER_WEIGHTS, llama.cpp file, its type)
WEIGHTS = [("f32", "dense.tern", "f32", "dense.gguf", "F32"), ("f16", "dense.tern", "f16", "dense-f16.gguf", "F16")]


def command(a, rt, weights, n, depth, warm, logits):
    """The driver's command line and environment for runtime rt on weights (a WEIGHTS entry)."""
    key, tern_file, tern_w, gguf, _ = weights
    tail = [] if depth is None else [str(depth)]
    if rt in ("tern", "tern-cpu"):
        env = dict(os.environ, TERN_PEER_BACKEND="vulkan" if rt == "tern" else "cpu", TERN_PEER_WEIGHTS=tern_w)
        return [a.peer_tern, os.path.join(a.models, tern_file), a.ids, str(n), str(a.threads), str(warm),
                logits] + tail, env
    env = dict(os.environ, PEER_LLAMA_GPU="1", GGML_VK_VISIBLE_DEVICES=str(a.vk_device))
    return [a.peer_llama, os.path.join(a.models, gguf), a.ids, str(n), str(a.threads), str(warm), logits,
            "1" if rt == "llama-fa" else "0", a.llama_bins] + tail, env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True, help="make_model.py's directory with dense.tern")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--peer-tern", required=True, help="tern_driver.cpp's binary")
    ap.add_argument("--peer-llama", required=True, help="llama_driver.cpp linked against the Vulkan libraries")
    ap.add_argument("--llama-bins", required=True, help="the Vulkan package's bins directory")
    ap.add_argument("--vk-device", type=int, default=0,
                    help="GGML_VK_VISIBLE_DEVICES for llama.cpp: the device's index in the Vulkan loader's list")
    ap.add_argument("--json", required=True)
    ap.add_argument("--tmp", default="/tmp")
    ap.add_argument("--threads", type=int, default=2, help="host threads of each runtime")
    ap.add_argument("--pp", type=int, default=512, help="prefill length")
    ap.add_argument("--tg", type=int, default=128, help="tokens generated one call each")
    ap.add_argument("--depths", default="0,512", help="generation depths")
    ap.add_argument("--warm", type=int, default=1, help="warm runs after the first (steady: their median)")
    ap.add_argument("--tern-warm", type=int, default=None,
                    help="warm runs of Tern's Vulkan tests (default --warm; 0: steady = the first run, which fits "
                         "as Tern builds its pipelines at session creation, where llama.cpp builds its own on first use)")
    ap.add_argument("--weights", default="f32,f16")
    ap.add_argument("--f16-llama", default="llama-fa", help="llama.cpp runs on F16 weights: llama-fa, llama or both")
    a = ap.parse_args()
    tern_warm = a.warm if a.tern_warm is None else a.tern_warm
    tests = [(f"pp{a.pp}", a.pp, None)] + [(f"tg{a.tg}@d{d}", a.tg, d) for d in
                                           (int(x) for x in a.depths.split(",") if x)]
    weights = [w for w in WEIGHTS if w[0] in a.weights.split(",")]
    doc = {"tests": [t[0] for t in tests], "threads": a.threads, "warm_runs": a.warm, "tern_warm_runs": tern_warm,
           "vk_device": a.vk_device, "rows": []}
    rows = doc["rows"]
    t_start = time.monotonic()

    def save():
        doc["total_s"] = time.monotonic() - t_start
        doc["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)

    for name, n, depth in tests:
        ref = None  # Tern's CPU float32 logits of this test
        runs = [("tern-cpu", WEIGHTS[0])]
        for w in weights:
            llamas = ["llama-fa", "llama"] if w[0] == "f32" else [r for r in ("llama-fa", "llama")
                                                                   if r in a.f16_llama.split(",")]
            runs += [("tern", w)] + [(r, w) for r in llamas]
        for rt, w in runs:
            warm = 0 if rt == "tern-cpu" else (tern_warm if rt == "tern" else a.warm)
            lp = os.path.join(a.tmp, f"peers_vulkan_{rt}_{w[0]}_{name}.f32")
            cmd, env = command(a, rt, w, n, depth, warm, lp)
            rc, out, err, rss, wall = measured(cmd, env, timeout=3600)
            rec = {"runtime": rt, "weights": w[2] if rt.startswith("tern") else w[4], "format": w[0], "test": name,
                   "n": n, "depth": depth, "threads": a.threads, "rc": rc, "peak_rss_bytes": rss, "wall_s": wall}
            if rc != 0:
                rec["error"] = err.strip()[-2000:]
                log(f"vulkan {rt} {w[0]} {name}: {'REFUSED' if rc == 3 else 'FAILED'} rc={rc}: {err.strip()[-400:]}")
            else:
                info = json.loads(out.strip().splitlines()[-1])
                rec.update(info)
                rec["steady_ms"] = statistics.median(info["warm_ms"]) if info["warm_ms"] else info["first_ms"]
                rec["tokens_per_s"] = n / (rec["steady_ms"] / 1e3)
                logits = np.fromfile(lp, dtype=np.float32)
                if rt == "tern-cpu":
                    ref = logits
                elif ref is not None and ref.size == logits.size:
                    rec["vs_tern_cpu_f32"] = compare(logits, ref)
                elif ref is not None:
                    rec["vs_tern_cpu_f32_error"] = f"logits size {logits.size} != {ref.size}"
                err_text = (f", rel err {rec['vs_tern_cpu_f32']['rel_l2_err']:.2e}" if "vs_tern_cpu_f32" in rec
                            else "")
                log(f"vulkan {rt:8s} {w[0]} {name:11s}: {rec['tokens_per_s']:8.1f} tokens/s on {info.get('device')}"
                    f", peak RSS {rss / MiB:5.0f} MiB{err_text}")
            if os.path.exists(lp):
                os.unlink(lp)
            rows.append(rec)
            save()
    save()
    print_tables(doc)


def print_tables(doc):
    rows = doc["rows"]
    ok = [r for r in rows if r["rc"] == 0]
    print("\nDevices (each driver's own report):\n")
    for rt in ("tern-cpu", "tern", "llama-fa", "llama"):
        seen = sorted({(r.get("device", ""), r.get("driver", "")) for r in ok if r["runtime"] == rt})
        for device, driver in seen:
            print(f"- {LABEL[rt]}: {device}" + (f" ({driver})" if driver else ""))
    get = lambda rt, f, test: next((r for r in rows if (r["runtime"], r["format"], r["test"]) == (rt, f, test)),  # noqa
                                   None)
    print(f"\nSteady = median of llama.cpp's {doc['warm_runs']} warm run(s) after its first (which builds its "
          f"pipelines) and of Tern's {doc['tern_warm_runs']} (Tern builds them at session creation); with none, the "
          f"first run. Tern's CPU reference: one run. Time ratio Tern / llama.cpp: lower is better. "
          f"Error: ||a - b|| / ||b|| over all logits of the test against Tern's CPU float32 run.\n")
    print("| weights Tern / llama.cpp | test | runtime | tokens/s | steady s | Tern time / its time | peak RSS MiB | "
          "rel err vs Tern CPU f32 |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for test in doc["tests"]:
        ref = get("tern-cpu", "f32", test)
        if ref and ref["rc"] == 0:
            print(f"| f32 | {test} | {LABEL['tern-cpu']} | {ref['tokens_per_s']:.1f} | {ref['steady_ms'] / 1e3:.3f} | "
                  f"| {ref['peak_rss_bytes'] / MiB:.0f} | 0 |")
        for f, tern_w, llama_w in (("f32", "f32", "F32"), ("f16", "f16 (--f16-weights)", "F16")):
            tern = get("tern", f, test)
            for rt in ("tern", "llama-fa", "llama"):
                r = get(rt, f, test)
                if r is None:
                    continue
                if r["rc"] != 0:
                    why = "refused: llama.cpp did not offload every layer to the GPU" if r["rc"] == 3 else "failed"
                    print(f"| {tern_w} / {llama_w} | {test} | {LABEL[rt]} | {why} | | | | |")
                    continue
                ratio = (f"{tern['steady_ms'] / r['steady_ms']:.2f}" if rt != "tern" and tern and tern["rc"] == 0
                         else "")
                err = f"{r['vs_tern_cpu_f32']['rel_l2_err']:.2e}" if "vs_tern_cpu_f32" in r else ""
                print(f"| {tern_w} / {llama_w} | {test} | {LABEL[rt]} | {r['tokens_per_s']:.1f} | "
                      f"{r['steady_ms'] / 1e3:.3f} | {ratio} | {r['peak_rss_bytes'] / MiB:.0f} | {err} |")
    print(f"\n(total {doc['total_s'] / 60:.1f} min, {doc['date']})")


if __name__ == "__main__":
    main()
