#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tern side by side with ONNX Runtime, llama.cpp (with and without flash attention) and PyTorch eager on the same
weights, on this machine. Called by tools/bench/peers.sh, which installs the dependencies and builds the drivers.

Every (runtime, n, threads) is its own process: the process's peak RSS comes from the kernel (wait4's ru_maxrss),
the first run and the median of WARM warm runs from the driver itself. Outputs are compared with Tern's logits at
every position. Generation (phase decode) is measured like llama-bench's tg128@dD: after D tokens in one call,
128 tokens one call each, for Tern and llama.cpp with and without flash attention, the logits of every step compared
with Tern's. Compressed weights (phase quant) pair Tern's f16 / int8 / int4 files (tern-convert --weights) with
llama.cpp's F16 / Q8_0 / Q4_0 GGUFs of the same weights (make_model.py), plus both float32 files for reference, Tern
with its float32 cache and with a float16 one (llama.cpp's default cache, so that one ratio compares the same weight and
cache precision): file size,
peak RSS, prefill ppN (one forward of N tokens) and generation tg128@dD on each thread count, and the logits' relative
error ||a - b|| / ||b|| of each compressed run against its own runtime's float32 run of the same test and against
Tern's float32 run (a Tern run that fails, e.g. a format its CPU backend cannot read yet, is recorded with its error
and the phase goes on). Prints markdown tables and writes JSON.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MiB = 1 << 20
GiB = 1 << 30

RUNTIMES = ["tern", "ort", "llama-fa", "llama", "torch"]
# The runtimes with a decode path (a KV cache). Tern runs it twice: with its default float32 KV state and with
# kv_storage F16 ("tern-f16kv", measured whenever Tern is), the cache llama.cpp keeps by default.
DECODE_RUNTIMES = ["tern", "tern-f16kv", "llama-fa", "llama"]
LABEL = {"tern": "Tern", "tern-f16kv": "Tern F16 KV", "ort": "ONNX Runtime", "llama-fa": "llama.cpp FA",
         "llama": "llama.cpp", "torch": "PyTorch eager"}
# phase quant: (key, Tern file and its weights, llama.cpp file and its type), all from the same float32 weights
QUANT_FORMATS = [("f32", "dense.tern", "f32", "dense.gguf", "F32"),
                 ("f16", "dense-f16.tern", "f16", "dense-f16.gguf", "F16"),
                 ("int8", "dense-int8.tern", "int8", "dense-q8_0.gguf", "Q8_0"),
                 ("int4", "dense-int4.tern", "int4", "dense-q4_0.gguf", "Q4_0")]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# GNU time: forks the measured command from its own small process and reports that child's peak RSS (wait4's
# ru_maxrss). A child forked straight from this script would not do: on exec the kernel carries the forked copy's
# high-water mark into the new program's ru_maxrss, so every figure would be at least this script's own resident
# size (hundreds of MiB while it holds a Llama run's logits).
GNU_TIME = "/usr/bin/time"


def measured(cmd, env=None, timeout=1800):
    """Runs cmd under GNU time in a child of its own process group; returns (rc, stdout, stderr, cmd's own peak RSS in
    bytes, wall s). Past `timeout` the whole group is killed."""
    t0 = time.monotonic()
    rss_fd, rss_path = tempfile.mkstemp(prefix="peers_rss_")
    os.close(rss_fd)
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os.dup2(w_out, 1)
        os.dup2(w_err, 2)
        os.close(r_out)
        os.close(r_err)
        try:
            full = [GNU_TIME, "-f", "%M", "-o", rss_path, "--"] + cmd
            os.execve(full[0], full, env if env is not None else os.environ)
        finally:
            os._exit(127)
    os.close(w_out)
    os.close(w_err)
    import selectors

    sel = selectors.DefaultSelector()
    bufs = {r_out: [], r_err: []}
    for fd in bufs:
        sel.register(fd, selectors.EVENT_READ)
    open_fds = set(bufs)
    deadline = t0 + timeout
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            os.killpg(pid, 9)
            break
        for key, _ in sel.select(timeout=min(left, 5)):
            data = os.read(key.fd, 65536)
            if data:
                bufs[key.fd].append(data)
            else:
                sel.unregister(key.fd)
                open_fds.discard(key.fd)
    _, status, _ = os.wait4(pid, 0)
    for fd in bufs:
        os.close(fd)
    rc = os.waitstatus_to_exitcode(status)
    # time's last line is %M in KiB (a line before it says how a failed command ended)
    with open(rss_path) as f:
        lines = f.read().split()
    os.unlink(rss_path)
    rss = int(lines[-1]) * 1024 if lines and lines[-1].isdigit() else 0
    err = b"".join(bufs[r_err]).decode(errors="replace")
    if rc == 0 and rss == 0:  # a run without its peak RSS fails rather than pass every memory goal at 0 MiB
        rc, err = 1, err + f"\nrun.py: no peak RSS from {GNU_TIME}"
    return rc, b"".join(bufs[r_out]).decode(errors="replace"), err, rss, time.monotonic() - t0


def command(rt, a, n, threads, warm, logits, depth=None, model=None):
    """The driver's command line; with depth, generation of n tokens after depth (Tern and llama.cpp only); model:
    a file in --models other than the runtime's float32 dense model (Tern and llama.cpp only)."""
    m = a.models
    tail = [] if depth is None else [str(depth)]
    if rt in ("tern", "tern-f16kv"):
        env = dict(os.environ, TERN_PEER_KV="f16") if rt == "tern-f16kv" else None
        return [os.path.join(a.build, "tools", "bench", "peer_tern"), os.path.join(m, model or "dense.tern"), a.ids,
                str(n), str(threads), str(warm), logits] + tail, env
    if rt == "ort":
        env = dict(os.environ, PEERS_NODE_MODULES=a.node_modules)
        return ["node", os.path.join(HERE, "ort_driver.js"), os.path.join(m, "dense.onnx"), a.ids, str(n),
                str(threads), str(warm), logits], env
    if rt in ("llama", "llama-fa"):
        return [a.peer_llama, os.path.join(m, model or "dense.gguf"), a.ids, str(n), str(threads), str(warm), logits,
                "1" if rt == "llama-fa" else "0", a.llama_bins] + tail, None
    if rt == "torch":
        env = dict(os.environ, LD_LIBRARY_PATH=a.openblas_dir, OPENBLAS_NUM_THREADS=str(threads),
                   OMP_NUM_THREADS=str(threads))
        return ["/usr/bin/python3", os.path.join(HERE, "torch_driver.py"), os.path.join(m, "dense"), a.ids, str(n),
                str(threads), str(warm), logits], env
    raise ValueError(rt)


def compare(peer, tern):
    diff = np.abs(peer.astype(np.float64) - tern.astype(np.float64))
    return {"max_abs_err_over_max_abs": float(diff.max() / np.abs(tern).max()),
            "rel_l2_err": float(np.linalg.norm(diff) / np.linalg.norm(tern))}


def add_round(rec, info, rss, tokens):
    """Folds another round of the same measurement (the same command, run again after the other runtimes' processes)
    into rec: steady is the fastest round's median, peak RSS the largest round's. A slow phase of a shared machine
    that falls on one runtime's process then costs that runtime a round, not the comparison."""
    steady = statistics.median(info["warm_ms"]) if info["warm_ms"] else info["first_ms"]
    rec.setdefault("round_steady_ms", [rec["steady_ms"]]).append(steady)
    rec["steady_ms"] = min(rec["round_steady_ms"])
    rec["peak_rss_bytes"] = max(rec["peak_rss_bytes"], rss)
    if tokens:
        rec["tokens_per_s"] = tokens / (rec["steady_ms"] / 1e3)


def later_round(rec, rc, out, err, rss, logits_path, tokens, label, rnd, rounds):
    """Round rnd + 1 (> 1) of rec's measurement: its logits are not compared again; a round that fails fails rec."""
    if os.path.exists(logits_path):
        os.unlink(logits_path)
    if rc != 0:
        rec.update(rc=rc, error=err.strip()[-2000:])
        log(f"{label} round {rnd + 1}: FAILED rc={rc}")
        return
    add_round(rec, json.loads(out.strip().splitlines()[-1]), rss, tokens)
    log(f"{label} round {rnd + 1}/{rounds}: {rec['round_steady_ms'][-1]:.0f} ms; kept {rec['tokens_per_s']:.1f} tokens/s")


def fit_budget(points, budget, degree):
    """points: [(n, bytes)]. Least-squares polynomial of `degree` in n (at most len-1); the smallest n > max measured
    n where it reaches budget, or None if it never does within 2^24 tokens."""
    ns = np.array([p[0] for p in points], dtype=np.float64)
    ys = np.array([p[1] for p in points], dtype=np.float64)
    deg = min(degree, len(points) - 1)
    coef = np.polyfit(ns, ys, deg)
    while deg > 1 and coef[0] < 0:  # memory that grows slower than linearly gets the linear fit, not a falling one
        deg -= 1
        coef = np.polyfit(ns, ys, deg)
    if max(ys) >= budget:
        return {"n": None, "measured_over": True, "coef": coef.tolist()}
    lo = int(max(ns))
    hi = lo
    while np.polyval(coef, hi) < budget:
        hi *= 2
        if hi > 1 << 24:
            return {"n": None, "coef": coef.tolist()}
    while hi - lo > max(1, lo // 1000):
        mid = (lo + hi) // 2
        if np.polyval(coef, mid) < budget:
            lo = mid
        else:
            hi = mid
    return {"n": int(hi), "coef": coef.tolist(), "degree": deg}


def fmt_mib(b):
    return f"{b / MiB:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", required=True, help="directory made by make_model.py (+ dense.tern, windowed.tern)")
    ap.add_argument("--ids", required=True, help="int32 ids, at least max n of them")
    ap.add_argument("--build", required=True)
    ap.add_argument("--node-modules", required=True)
    ap.add_argument("--peer-llama", required=True)
    ap.add_argument("--llama-bins", required=True)
    ap.add_argument("--openblas-dir", default="/usr/lib/x86_64-linux-gnu/openblas-pthread")
    ap.add_argument("--ns", default="512,2048,8192")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--long-n", type=int, default=8192,
                    help="from this n (prefill) or depth (generation) on, use --long-threads and --long-warm")
    ap.add_argument("--long-threads", default="1")
    ap.add_argument("--long-warm", type=int, default=1)
    ap.add_argument("--windowed-ns", default="8192,16384,32768")
    ap.add_argument("--windowed-warm", type=int, default=0, help="warm runs after the first, windowed model")
    ap.add_argument("--budget-gib", type=float, default=4.0)
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--json", required=True)
    ap.add_argument("--tmp", default="/tmp")
    ap.add_argument("--decode-depths", default="0,512,2048", help="tokens in the cache before generating")
    ap.add_argument("--decode-tokens", type=int, default=128, help="tokens generated one at a time")
    ap.add_argument("--decode-warm", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2,
                    help="generation and the compressed phase below --long-n: run every runtime's process this many "
                         "times, the runtimes alternated, and keep each one's fastest round (its median)")
    ap.add_argument("--quant-n", type=int, default=512, help="phase quant: prefill length")
    ap.add_argument("--quant-depths", default="0,512", help="phase quant: generation depths (--decode-tokens each)")
    ap.add_argument("--quant-formats", default=",".join(f[0] for f in QUANT_FORMATS),
                    help="phase quant: weight formats (f32 is what the errors are measured against)")
    ap.add_argument("--quant-llama", default="llama-fa,llama",
                    help="phase quant: llama.cpp with flash attention (llama-fa), without (llama), or both")
    ap.add_argument("--quant-tern", default="tern,tern-f16kv",
                    help="phase quant: Tern with its float32 cache (tern), a float16 one (tern-f16kv), or both")
    ap.add_argument("--phases", default="dense,decode,quant,windowed,linear", help="which measurements to run")
    ap.add_argument("--resume", action="store_true",
                    help="keep what --json already holds and measure only what it lacks (an interrupted run)")
    a = ap.parse_args()
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit(f"run.py: {GNU_TIME} not found: the peak RSS figures need GNU time (Debian package time)")
    phases = a.phases.split(",")
    ns = [int(x) for x in a.ns.split(",")]
    threads_list = [int(x) for x in a.threads.split(",")]
    runtimes = a.runtimes.split(",")
    t_start = time.monotonic()

    long_threads = [int(x) for x in a.long_threads.split(",")]
    results = []
    windowed = []
    linear = []
    doc = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                       "cpu": next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                                    if ln.startswith("model name")), "")},
           "model": json.load(open(os.path.join(a.models, "dense", "config.json"))),
           "windowed_attention": (json.load(open(os.path.join(a.models, "windowed", "config.json")))["attention"]
                                  if os.path.exists(os.path.join(a.models, "windowed", "config.json")) else None),
           "budget_bytes": int(a.budget_gib * GiB), "warm_runs": a.warm, "long_n": a.long_n,
           "long_warm_runs": a.long_warm, "dense": results, "windowed": windowed, "linear": linear, "budget": [],
           "decode": [], "decode_tokens": a.decode_tokens, "decode_warm_runs": a.decode_warm, "quant": [],
           "rounds": a.rounds}
    decode = doc["decode"]
    quant = doc["quant"]
    if a.resume and os.path.exists(a.json):
        old = json.load(open(a.json))
        results.extend(old.get("dense", []))
        windowed.extend(old.get("windowed", []))
        linear.extend(old.get("linear", []))
        decode.extend(old.get("decode", []))
        quant.extend(old.get("quant", []))
        t_start -= old.get("total_s", 0)
    done = {(r["runtime"], r["n"], r["threads"]) for r in results + windowed if r["rc"] == 0}

    def save():  # after every measurement, so that an interrupted run keeps what it measured
        doc["total_s"] = time.monotonic() - t_start
        doc["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)

    for n in (ns if "dense" in phases else []):
        for t in (threads_list if n < a.long_n else long_threads):
            warm = a.warm if n < a.long_n else a.long_warm
            tern_logits = None
            for rt in runtimes:
                if (rt, n, t) in done and not (rt == "tern" and any((p, n, t) not in done for p in runtimes)):
                    continue  # measured already (Tern reruns when a peer needs its logits)
                if rt == "tern":
                    results[:] = [r for r in results if (r["runtime"], r["n"], r["threads"]) != (rt, n, t)]
                lp = os.path.join(a.tmp, f"peers_logits_{rt}_{n}_{t}.f32")
                cmd, env = command(rt, a, n, t, warm, lp)
                rc, out, err, rss, wall = measured(cmd, env)
                rec = {"runtime": rt, "n": n, "threads": t, "rc": rc, "peak_rss_bytes": rss, "wall_s": wall}
                if rc != 0:
                    rec["error"] = err.strip()[-2000:]
                    log(f"{rt} n={n} t={t}: FAILED rc={rc}: {err.strip()[-500:]}")
                    results.append(rec)
                    continue
                info = json.loads(out.strip().splitlines()[-1])
                rec.update(info)
                rec["steady_ms"] = statistics.median(info["warm_ms"]) if info["warm_ms"] else info["first_ms"]
                logits = np.fromfile(lp, dtype=np.float32)
                os.unlink(lp)
                if rt == "tern":
                    tern_logits = logits
                elif tern_logits is not None and logits.size == tern_logits.size:
                    rec.update(compare(logits, tern_logits))
                elif tern_logits is not None:
                    rec["error"] = f"logits size {logits.size} != Tern's {tern_logits.size}"
                log(f"{rt:9s} n={n:6d} t={t}: first {info['first_ms'] / 1e3:8.3f} s, steady "
                    f"{rec['steady_ms'] / 1e3:8.3f} s, peak RSS {rss / MiB:7.0f} MiB"
                    + (f", err {rec['max_abs_err_over_max_abs']:.2e}" if "max_abs_err_over_max_abs" in rec else ""))
                results.append(rec)
                save()

    # Generation: decode_tokens single-token calls after `depth` tokens, per thread count, Tern first (its logits
    # are what the peers are compared with).
    decode_done = {(r["runtime"], r["depth"], r["threads"]) for r in decode if r["rc"] == 0}
    for depth in ([int(x) for x in a.decode_depths.split(",") if x] if "decode" in phases else []):
        # From --long-n tokens in the cache on, as for prefill: --long-threads, --long-warm (each run fills the cache)
        warm = a.decode_warm if depth < a.long_n else a.long_warm
        rounds = a.rounds if depth < a.long_n else 1
        for t in (threads_list if depth < a.long_n else long_threads):
            tern_logits = None
            todo = []
            for rt in [r for r in DECODE_RUNTIMES if r in runtimes or (r == "tern-f16kv" and "tern" in runtimes)]:
                if (rt, depth, t) in decode_done and not (rt == "tern" and any(
                        (p, depth, t) not in decode_done for p in DECODE_RUNTIMES if p in runtimes)):
                    continue
                if rt == "tern":
                    decode[:] = [r for r in decode if (r["runtime"], r["depth"], r["threads"]) != (rt, depth, t)]
                todo.append(rt)
            first_round = {}  # runtime -> its record from round 1 (later rounds fold into it)
            for rnd, rt in ((rnd, rt) for rnd in range(rounds) for rt in todo):
                if rnd > 0 and first_round[rt]["rc"] != 0:
                    continue
                lp = os.path.join(a.tmp, f"peers_decode_{rt}_{depth}_{t}.f32")
                cmd, env = command(rt, a, a.decode_tokens, t, warm, lp, depth)
                rc, out, err, rss, wall = measured(cmd, env)
                if rnd > 0:
                    later_round(first_round[rt], rc, out, err, rss, lp, a.decode_tokens,
                                f"{rt:9s} tg{a.decode_tokens}@d{depth:<5d} t={t}", rnd, rounds)
                    save()
                    continue
                rec = {"runtime": rt, "depth": depth, "tokens": a.decode_tokens, "threads": t, "rc": rc,
                       "peak_rss_bytes": rss, "wall_s": wall}
                first_round[rt] = rec
                if rc != 0:
                    rec["error"] = err.strip()[-2000:]
                    log(f"{rt} tg{a.decode_tokens}@d{depth} t={t}: FAILED rc={rc}: {err.strip()[-500:]}")
                    decode.append(rec)
                    continue
                info = json.loads(out.strip().splitlines()[-1])
                rec.update(info)
                rec["steady_ms"] = statistics.median(info["warm_ms"]) if info["warm_ms"] else info["first_ms"]
                rec["tokens_per_s"] = a.decode_tokens / (rec["steady_ms"] / 1e3)
                logits = np.fromfile(lp, dtype=np.float32)
                os.unlink(lp)
                if rt == "tern":
                    tern_logits = logits
                elif tern_logits is not None and logits.size == tern_logits.size:
                    rec.update(compare(logits, tern_logits))
                log(f"{rt:9s} tg{a.decode_tokens}@d{depth:<5d} t={t}: {rec['tokens_per_s']:7.1f} tokens/s, "
                    f"peak RSS {rss / MiB:5.0f} MiB"
                    + (f", err {rec['max_abs_err_over_max_abs']:.2e}" if "max_abs_err_over_max_abs" in rec else ""))
                decode.append(rec)
                save()

    if "quant" in phases:
        run_quant(a, threads_list, quant, save)

    # Tern's windowed model: the same weights with a sliding window, at lengths where the peers' dense (masked)
    # equivalents cannot fit the budget, at the largest thread count (by default one run each: it is the memory
    # that matters here; steady = first when there are no warm runs).
    t = max(long_threads)
    for n in ([int(x) for x in a.windowed_ns.split(",") if x] if "windowed" in phases else []):
        if ("tern-windowed", n, t) in done:
            continue
        lp = os.path.join(a.tmp, f"peers_logits_windowed_{n}.f32")
        cmd = [os.path.join(a.build, "tools", "bench", "peer_tern"), os.path.join(a.models, "windowed.tern"), a.ids,
               str(n), str(t), str(a.windowed_warm), lp]
        rc, out, err, rss, wall = measured(cmd)
        rec = {"runtime": "tern-windowed", "n": n, "threads": t, "rc": rc, "peak_rss_bytes": rss, "wall_s": wall}
        if rc == 0:
            info = json.loads(out.strip().splitlines()[-1])
            rec.update(info)
            rec["steady_ms"] = statistics.median(info["warm_ms"]) if info["warm_ms"] else info["first_ms"]
            log(f"tern-windowed n={n:6d} t={t}: first {info['first_ms'] / 1e3:8.3f} s, steady "
                f"{rec['steady_ms'] / 1e3:8.3f} s, peak RSS {rss / MiB:7.0f} MiB")
        else:
            rec["error"] = err.strip()[-2000:]
            log(f"tern-windowed n={n}: FAILED rc={rc}: {err.strip()[-500:]}")
        if os.path.exists(lp):
            os.unlink(lp)
        windowed.append(rec)
        save()

    # linear layers against bare XNNPACK, same model, n = 2048 (or the largest n below it)
    n_lin = max([n for n in ns if n <= 2048] or [min(ns)])
    for t in (threads_list if "linear" in phases else []):
        if any(r["threads"] == t for r in linear):
            continue
        rc, out, err, _, _ = measured([os.path.join(a.build, "tools", "bench", "linear_bench"),
                                       os.path.join(a.models, "dense.tern"), "--tokens", str(n_lin), "--threads",
                                       str(t), "--repetitions", "3"])
        # The "all" row of the n-row table (linear_bench prints a 1-row table first): in x out, ops, Tern's weight
        # format, Tern ms, its GFLOP/s, bare XNNPACK f32 ms, its GFLOP/s, then XNNPACK f16 and qs8.
        row = next((ln for ln in reversed(out.splitlines()) if ln.startswith("| all")), None)
        if rc == 0 and row:
            cells = [c.strip() for c in row.strip("|").split("|")]
            tern_ms, xnnpack_ms = float(cells[3]), float(cells[5])
            linear.append({"n": n_lin, "threads": t, "tern_ms": tern_ms, "xnnpack_ms": xnnpack_ms,
                           "ratio": xnnpack_ms / tern_ms})
            save()
        else:
            log(f"linear_bench t={t}: rc={rc} {err[-300:]}")

    # memory budget: n at which each runtime's dense forward would pass the budget, from the measured peak RSS
    budget = doc["budget_bytes"]
    budget_rows = doc["budget"]
    results.sort(key=lambda r: (r["n"], r["threads"], RUNTIMES.index(r["runtime"])))
    for rt in runtimes:
        pts = [(r["n"], r["peak_rss_bytes"]) for r in results if r["runtime"] == rt and r["rc"] == 0
               and r["threads"] == min(threads_list)]
        if len(pts) >= 2:
            budget_rows.append(dict(runtime=rt, model="dense", points=pts, **fit_budget(pts, budget, 2)))
    pts = [(r["n"], r["peak_rss_bytes"]) for r in windowed if r["rc"] == 0]
    if len(pts) >= 2:
        budget_rows.append(dict(runtime="tern-windowed", model="windowed", points=pts, **fit_budget(pts, budget, 1)))

    save()

    print_tables(doc, runtimes, ns, threads_list)


def run_quant(a, threads_list, quant, save):
    """Phase quant: for each test (prefill, generation at each depth) and thread count, every weight format on Tern
    and the chosen llama.cpp settings, float32 first: each compressed run's logits are compared with its own
    runtime's float32 logits of the same test and with Tern's. On --resume a (test, threads) group is kept only when
    every run in it succeeded; otherwise the whole group runs again (the errors need its float32 logits)."""
    formats = [f for f in QUANT_FORMATS if f[0] in a.quant_formats.split(",")]
    formats.sort(key=lambda f: f[0] != "f32")
    llamas = [r for r in a.quant_llama.split(",") if r]
    rts = [r for r in a.quant_tern.split(",") if r] + llamas
    tests = [(f"pp{a.quant_n}", a.quant_n, None, a.warm)]
    tests += [(f"tg{a.decode_tokens}@d{d}", a.decode_tokens, d, a.decode_warm if d < a.long_n else a.long_warm)
              for d in (int(x) for x in a.quant_depths.split(",") if x)]
    long_threads = [int(x) for x in a.long_threads.split(",")]
    for name, n, depth, warm in tests:
        for t in (threads_list if depth is None or depth < a.long_n else long_threads):
            mine = lambda r: (r["test"], r["threads"]) == (name, t) and (  # noqa: E731
                r["format"] in [f[0] for f in formats] and r["runtime"] in rts)
            ok = {(r["format"], r["runtime"]) for r in quant if mine(r) and r["rc"] == 0}
            if len(ok) == len(formats) * len(rts):
                continue
            quant[:] = [r for r in quant if not mine(r)]
            ref = {}  # runtime -> its float32 logits for this test and thread count
            first_round = {}  # (format, runtime) -> its record from round 1 (later rounds fold into it)
            rounds = a.rounds if depth is None or depth < a.long_n else 1
            for rnd, (key, tern_file, tern_w, gguf_file, llama_w), rt in (
                    (rnd, f, rt) for rnd in range(rounds) for f in formats for rt in rts):
                if rnd > 0 and first_round[key, rt]["rc"] != 0:
                    continue
                is_tern = rt in ("tern", "tern-f16kv")
                model = tern_file if is_tern else gguf_file
                lp = os.path.join(a.tmp, f"peers_quant_{rt}_{key}_{name}_{t}.f32")
                cmd, env = command(rt, a, n, t, warm, lp, depth, model)
                path = os.path.join(a.models, model)
                rc, out, err, rss, wall = measured(cmd, env)
                if rnd > 0:
                    rec = first_round[key, rt]
                    later_round(rec, rc, out, err, rss, lp, n, f"quant {rt:8s} {rec['weights']:4s} {name:12s} t={t}",
                                rnd, rounds)
                    save()
                    continue
                rec = {"format": key, "runtime": rt, "weights": tern_w if is_tern else llama_w,
                       "model": model, "file_bytes": os.path.getsize(path) if os.path.exists(path) else None,
                       "test": name, "n": n, "depth": depth, "threads": t}
                first_round[key, rt] = rec
                rec.update(rc=rc, peak_rss_bytes=rss, wall_s=wall)
                if rc != 0:
                    rec["error"] = err.strip()[-2000:]
                    log(f"quant {rt} {rec['weights']} {name} t={t}: FAILED rc={rc}: {err.strip()[-300:]}")
                    quant.append(rec)
                    if os.path.exists(lp):
                        os.unlink(lp)
                    save()
                    continue
                info = json.loads(out.strip().splitlines()[-1])
                rec.update(info)
                rec["steady_ms"] = statistics.median(info["warm_ms"]) if info["warm_ms"] else info["first_ms"]
                rec["tokens_per_s"] = n / (rec["steady_ms"] / 1e3)
                logits = np.fromfile(lp, dtype=np.float32)
                os.unlink(lp)
                if key == "f32":
                    ref[rt] = logits
                for field, base in (("vs_own_f32", ref.get(rt) if key != "f32" else None),
                                    ("vs_tern_f32", ref.get("tern") if (key, rt) != ("f32", "tern") else None)):
                    if base is not None and base.size == logits.size:
                        rec[field] = compare(logits, base)
                    elif base is not None:
                        rec[field + "_error"] = f"logits size {logits.size} != {base.size}"
                errs = ", ".join(f"{k} {rec[k]['rel_l2_err']:.2e}" for k in ("vs_own_f32", "vs_tern_f32")
                                 if k in rec)
                log(f"quant {rt:8s} {rec['weights']:4s} {name:12s} t={t}: {rec['tokens_per_s']:8.1f} tokens/s, "
                    f"peak RSS {rss / MiB:5.0f} MiB" + (f", rel err {errs}" if errs else ""))
                quant.append(rec)
                save()


def rounds_note(doc):
    """How run_quant and generation repeat their measurements (--rounds), for the tables' captions."""
    r = doc.get("rounds", 1)
    if r <= 1:
        return ""
    return (f"; below d {doc['long_n']}, {r} rounds: every runtime's process runs once per round, the runtimes "
            f"alternated, and each keeps its fastest round's median")


def print_quant(doc):
    rows = doc["quant"]
    get = lambda f, rt, test, t: next((r for r in rows if (r["format"], r["runtime"], r["test"], r["threads"])  # noqa
                                       == (f, rt, test, t)), None)
    tests = list(dict.fromkeys(r["test"] for r in rows))
    threads = sorted({r["threads"] for r in rows})
    llamas = [rt for rt in ("llama-fa", "llama") if any(r["runtime"] == rt for r in rows)]
    terns = [rt for rt in ("tern", "tern-f16kv") if any(r["runtime"] == rt for r in rows)]
    print(f"\nCompressed weights: Tern's f16, int8 (a float32 scale per output row) and int4 (groups of 32, float16 scales; "
          f"the tied token embedding int8) against llama.cpp's F16, Q8_0 and Q4_0 (blocks of 32, float16 scales; written "
          f"by gguf-py as llama-quantize would, but the tied token_embd Q8_0 where llama-quantize picks Q6_K) of the "
          f"same weights; norms, biases and positions float32 in both. Tern runs with its float32 cache and "
          f"with a float16 one (F16 KV), llama.cpp with its default F16 cache: the F16 KV ratio compares the same weight "
          f"and cache precision. ppN: one forward of N tokens; tgT@dD: T tokens one call each after D. "
          f"Steady = median of the warm runs ({doc['warm_runs']} for pp, {doc['decode_warm_runs']} for tg; "
          f"{doc['long_warm_runs']} from d {doc['long_n']} on, 1 thread){rounds_note(doc)}; tokens/s "
          f"from it. Time ratio Tern / llama.cpp (lower is better) against "
          f"{'the faster of ' if len(llamas) > 1 else ''}{' and '.join(LABEL[r] for r in llamas)}. Errors: ||a - b|| / ||b|| over all logits of the test (every "
          f"position of the prefill, every generated step), against the runtime's own float32 run and against "
          f"Tern's (float32 weights and cache).\n")
    names = " / ".join(LABEL[rt] for rt in terns)
    print(f"| weights Tern / llama.cpp | test | threads | file MiB Tern / llama | peak RSS MiB {names} / llama | "
          f"tokens/s {names} / llama | " + " | ".join(f"{LABEL[rt]} time / llama time" for rt in terns) +
          " | " + " | ".join(f"{LABEL[rt]} err vs Tern f32" for rt in terns) +
          " | llama err vs llama F32 | llama err vs Tern f32 |")
    print("|---|---|---:|---:|---:|---:|" + "---:|" * (2 * len(terns) + 2))
    mib = lambda b: f"{b / MiB:.1f}" if b is not None else "?"  # noqa: E731
    tps = lambda r: f"{r['tokens_per_s']:.1f}"  # noqa: E731
    failures = {}
    for key, _, tern_w, _, llama_w in QUANT_FORMATS:
        for test in tests:
            for t in threads:
                mine = [get(key, rt, test, t) for rt in terns]
                peers = [p for p in (get(key, rt, test, t) for rt in llamas) if p]
                if all(r is None for r in mine) and not peers:
                    continue
                ok = [p for p in peers if p["rc"] == 0]
                best = min(ok, key=lambda p: p["steady_ms"]) if ok else (peers[0] if peers else None)
                best_ok = best is not None and best["rc"] == 0
                for rt, r in zip(terns, mine):
                    if r is not None and r["rc"] != 0:
                        failures.setdefault(f"{LABEL[rt]} {tern_w}", r.get("error", "").strip().splitlines()[-1:])
                if best is not None and best["rc"] != 0:
                    failures.setdefault(f"{LABEL[best['runtime']]} {llama_w}",
                                        best.get("error", "").strip().splitlines()[-1:])
                cell = lambda r, f: f(r) if r is not None and r["rc"] == 0 else ("failed" if r else "-")  # noqa: E731
                err = lambda r, k: f"{r[k]['rel_l2_err']:.2e}" if r is not None and k in r else ""  # noqa: E731
                ratio = lambda r: (f"{r['steady_ms'] / best['steady_ms']:.2f}"  # noqa: E731
                                   if r is not None and r["rc"] == 0 and best_ok else "")
                name = f"{tern_w} / {llama_w}" + (f" ({LABEL[best['runtime']]})" if best and len(llamas) > 1 else "")
                first = next((r for r in mine if r is not None), None)
                files = f"{mib(first and first['file_bytes'])} / {mib(best and best['file_bytes'])}"
                rss = " / ".join(cell(r, lambda r: fmt_mib(r['peak_rss_bytes'])) for r in mine + [best])
                speed = " / ".join(cell(r, tps) for r in mine + [best])
                print(f"| {name} | {test} | {t} | {files} | {rss} | {speed} | "
                      + " | ".join(ratio(r) for r in mine) + " | "
                      + " | ".join(err(r, "vs_tern_f32") for r in mine)
                      + f" | {err(best, 'vs_own_f32')} | {err(best, 'vs_tern_f32')} |")
    for who, msg in failures.items():
        print(f"\n{who} failed: {msg[0] if msg else '(no message)'}")


def print_decode(doc, threads_list):
    dec = [r for r in doc["decode"] if r["rc"] == 0]
    get = lambda rt, d, t: next((r for r in dec if r["runtime"] == rt and r["depth"] == d and r["threads"] == t),  # noqa
                                None)
    depths = sorted({r["depth"] for r in doc["decode"]})
    g = doc["decode_tokens"]
    print(f"\nGeneration, as llama-bench's tg{g}@dD: {g} tokens one call each after D tokens in the cache (the D "
          f"tokens in one untimed call); steady = median of {doc['decode_warm_runs']} warm runs after the first "
          f"({doc['long_warm_runs']} from d {doc['long_n']} on, 1 thread){rounds_note(doc)}. "
          f"Error = max |peer - Tern| / max |Tern| over the logits of every step.\n")
    print("| test | threads | runtime | tokens/s | Tern time / peer time | peak RSS MiB | error vs Tern |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for d in depths:
        for t in threads_list:
            tern = get("tern", d, t)
            for rt in DECODE_RUNTIMES:
                r = get(rt, d, t)
                if r is None:
                    if any(x["runtime"] == rt and x["depth"] == d and x["threads"] == t for x in doc["decode"]):
                        print(f"| tg{g}@d{d} | {t} | {LABEL[rt]} | failed | | | |")
                    continue
                ratio = f"{tern['steady_ms'] / r['steady_ms']:.2f}" if tern and rt != "tern" else ""
                err = f"{r['max_abs_err_over_max_abs']:.1e}" if "max_abs_err_over_max_abs" in r else ""
                print(f"| tg{g}@d{d} | {t} | {LABEL[rt]} | {r['tokens_per_s']:.1f} | {ratio} | "
                      f"{fmt_mib(r['peak_rss_bytes'])} | {err} |")
    print(f"\nGoal: at d 2048 Tern's time at most 0.8x llama.cpp's best (with or without flash attention); at d 0 and "
          f"512 faster than it.\n")
    print("| test | threads | Tern | its tokens/s | best llama.cpp | its tokens/s | Tern time / its time | goal |")
    print("|---|---:|---|---:|---|---:|---:|---|")
    for d in depths:
        for t in threads_list:
            peers = [p for p in (get("llama-fa", d, t), get("llama", d, t)) if p]
            for rt in ("tern", "tern-f16kv"):
                tern = get(rt, d, t)
                if not tern or not peers:
                    continue
                best = min(peers, key=lambda p: p["steady_ms"])
                ratio = tern["steady_ms"] / best["steady_ms"]
                bound = 0.8 if d >= 2048 else 1.0
                print(f"| tg{g}@d{d} | {t} | {LABEL[rt]} | {tern['tokens_per_s']:.1f} | {LABEL[best['runtime']]} | "
                      f"{best['tokens_per_s']:.1f} | {ratio:.2f} | {'met' if ratio <= bound else 'not met'} "
                      f"(<= {bound:g}) |")


def describe(cfg, short=False):
    """The model of a config.json make_model.py wrote: the GPT-2-like tern-reference one or the Llama one."""
    if cfg.get("model_type") == "llama":
        head = (f"{cfg['num_hidden_layers']} layers, d {cfg['hidden_size']}, {cfg['num_attention_heads']} heads over "
                f"{cfg['num_key_value_heads']} KV heads")
        return head if short else (f"Llama-architecture model: {head}, SwiGLU {cfg['intermediate_size']}, RoPE, "
                                   f"RMSNorm, vocab {cfg['vocab_size']}, untied head")
    head = f"{cfg['num_layers']} layers, d {cfg['hidden_size']}, {cfg['num_heads']} heads"
    return head if short else (f"Dense model: {head}, vocab {cfg['vocab_size']}, GELU tanh, learned positions, "
                               f"tied embeddings")


def print_tables(doc, runtimes, ns, threads_list):
    res = doc["dense"]
    get = lambda rt, n, t: next((r for r in res if r["runtime"] == rt and r["n"] == n and r["threads"] == t  # noqa
                                 and r["rc"] == 0), None)
    cfg = doc["model"]
    if not res:
        ns = []
    if res:  # (phases without the dense runs print no dense table)
        print(f"\n{describe(cfg)}; F32 weights everywhere. "
              f"Steady = median of the warm runs after the first ({doc['warm_runs']} below n = {doc['long_n']}, "
              f"{doc['long_warm_runs']} from {doc['long_n']} on). Error = max |peer - Tern| / max |Tern| over all "
              f"logits.\n")
        print("| n | threads | runtime | first s | steady s | Tern / peer (steady) | peak RSS MiB | error vs Tern |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|")
        for n in ns:
            for t in threads_list:
                tern = get("tern", n, t)
                for rt in runtimes:
                    r = get(rt, n, t)
                    if r is None and not any(x["n"] == n and x["threads"] == t for x in res):
                        continue
                    if r is None:
                        print(f"| {n} | {t} | {LABEL[rt]} | failed | | | | |")
                        continue
                    ratio = f"{tern['steady_ms'] / r['steady_ms']:.2f}" if tern and rt != "tern" else ""
                    err = f"{r['max_abs_err_over_max_abs']:.1e}" if "max_abs_err_over_max_abs" in r else ""
                    print(f"| {n} | {t} | {LABEL[rt]} | {r['first_ms'] / 1e3:.3f} | {r['steady_ms'] / 1e3:.3f} | "
                          f"{ratio} | {fmt_mib(r['peak_rss_bytes'])} | {err} |")

    if 2048 in ns:
        print("\nGoal at n = 2048: Tern's steady time at most 0.8x the faster of ONNX Runtime and llama.cpp FA; "
              "peak RSS at most llama.cpp FA's.\n")
        print("| threads | Tern s | faster peer | its s | Tern / peer | time goal (<= 0.8) | Tern RSS MiB | "
              "llama.cpp FA RSS MiB | memory goal |")
        print("|---:|---:|---|---:|---:|---|---:|---:|---|")
        for t in threads_list:
            tern, ort, lfa = get("tern", 2048, t), get("ort", 2048, t), get("llama-fa", 2048, t)
            peers = [p for p in (ort, lfa) if p]
            if not tern or not peers:
                continue
            best = min(peers, key=lambda p: p["steady_ms"])
            ratio = tern["steady_ms"] / best["steady_ms"]
            mem_ok = lfa and tern["peak_rss_bytes"] <= lfa["peak_rss_bytes"]
            print(f"| {t} | {tern['steady_ms'] / 1e3:.3f} | {LABEL[best['runtime']]} | {best['steady_ms'] / 1e3:.3f} "
                  f"| {ratio:.2f} | {'met' if ratio <= 0.8 else 'not met'} | {fmt_mib(tern['peak_rss_bytes'])} | "
                  f"{fmt_mib(lfa['peak_rss_bytes']) if lfa else ''} | {'met' if mem_ok else 'not met'} |")

    if doc.get("decode"):
        print_decode(doc, threads_list)

    if doc.get("quant"):
        print_quant(doc)

    if doc["linear"]:
        print("\nLinear layers against bare XNNPACK fully-connected operators of the same shapes "
              "(build/tools/bench/linear_bench, goal >= 90%):\n")
        print("| n | threads | Tern linear ms | bare XNNPACK ms | Tern speed / XNNPACK speed |")
        print("|---:|---:|---:|---:|---:|")
        for r in doc["linear"]:
            print(f"| {r['n']} | {r['threads']} | {r['tern_ms']:.2f} | {r['xnnpack_ms']:.2f} | {100 * r['ratio']:.1f}% |")

    if doc["windowed"]:
        w = doc["windowed_attention"]
        print(f"\nTern, the same weights with sliding-window attention (window {w['window']}), "
              f"{doc['windowed'][0]['threads']} thread(s):\n")
        print("| n | first s | steady s (first if no warm runs) | tokens/s | peak RSS MiB |")
        print("|---:|---:|---:|---:|---:|")
        for r in doc["windowed"]:
            if r["rc"] != 0:
                print(f"| {r['n']} | failed | | | |")
                continue
            print(f"| {r['n']} | {r['first_ms'] / 1e3:.2f} | {r['steady_ms'] / 1e3:.2f} | "
                  f"{r['n'] / (r['steady_ms'] / 1e3):.0f} | {fmt_mib(r['peak_rss_bytes'])} |")

    if doc["budget"]:
        b = doc["budget_bytes"]
        print(f"\nLongest n within a {b / GiB:.0f} GiB peak-RSS budget. Extrapolated, not run: a least-squares fit of "
              "peak RSS against n through the measured points (quadratic for the dense runs, linear where the quadratic "
              "term comes out negative and for Tern's windowed model), solved for the budget. None of the peers has a windowed GPT-2: a sliding-window "
              "model runs there as the dense graph plus a mask, which needs at least the dense graph's memory, so "
              "its limit is at most the dense one's.\n")
        print("| runtime | model | measured peak RSS (n: MiB) | n at the budget |")
        print("|---|---|---|---:|")
        for r in doc["budget"]:
            pts = ", ".join(f"{n}: {fmt_mib(v)}" for n, v in r["points"])
            lim = (f"~{r['n']}" if r["n"] else ("already over at the measured n" if r.get("measured_over")
                                                 else "beyond 16M"))
            name = LABEL.get(r["runtime"], "Tern (sliding window)")
            print(f"| {name} | {r['model']} | {pts} | {lim} |")
    print(f"\n(total {doc['total_s'] / 60:.1f} min, {doc['date']})")


if __name__ == "__main__":
    main()
