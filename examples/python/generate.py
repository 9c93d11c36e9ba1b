#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates text from a prompt with a .tern model through the Python bindings, and reports tokens per second.

    python3 examples/python/generate.py build/example-models/kjv-llama.tern --prompt "And God said" -n 100

The text goes to stdout as it is generated (the prompt first), the numbers to stderr. `import tern` needs the
installed package (docs/python.md) or PYTHONPATH=build/python.
"""
import argparse
import sys
import time

import tern


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a .tern file")
    parser.add_argument("--prompt", default="", help="text to start from (default: the model's BOS token)")
    parser.add_argument("-n", "--tokens", type=int, default=200, help="tokens to generate at most (default 200)")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: one per hardware thread)")
    parser.add_argument("--backend", default="cpu", choices=["cpu", "vulkan", "auto"])
    args = parser.parse_args()

    try:
        started = time.perf_counter()
        model = tern.Model(args.model)
        session = tern.Session(model, backend=args.backend, threads=args.threads)
        loaded = time.perf_counter()
        sampler = tern.Sampler(temperature=args.temperature, top_k=args.top_k, seed=args.seed)
        sys.stdout.write(args.prompt)
        stream = tern.generate(session, args.prompt, max_new_tokens=args.tokens, sampler=sampler)
        first = time.perf_counter()  # the prompt has been fed (prefill)
        for piece in stream:
            sys.stdout.write(piece)
            sys.stdout.flush()
        done = time.perf_counter()
    except tern.Error as e:
        print(f"generate.py: {e} ({e.status.name})", file=sys.stderr)
        return 1
    print(file=sys.stdout)
    seconds = done - first
    print(f"generate.py: {model.info.architecture}, {session.backend['device_name']}: load {loaded - started:.3f} s, "
          f"prefill {first - loaded:.3f} s, {stream.tokens} tokens in {seconds:.3f} s: "
          f"{stream.tokens / seconds if seconds > 0 else 0.0:.1f} tokens/s (ended: {stream.stop_reason})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
