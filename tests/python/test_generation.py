# SPDX-License-Identifier: MIT
"""Sampler, Generator and tern.generate against tern-run (the C++ path), and the example script."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tern

SOURCE = pathlib.Path(__file__).resolve().parents[2]


def run_tern_run(tern_run, model_path, *args):
    out = subprocess.run([str(tern_run), str(model_path), "--threads", "1", "--json", *args], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["generate"]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_generation_matches_tern_run(kjv_llama, kjv_llama_path, tern_run, temperature):
    prompt = "And God said"
    expected = run_tern_run(tern_run, kjv_llama_path, "--prompt", prompt, "-n", "40", "--ignore-eos",
                            "--temperature", str(temperature), "--top-k", "40", "--seed", "5")
    session = tern.Session(kjv_llama, threads=1)
    sampler = tern.Sampler(temperature=temperature, top_k=40, seed=5)
    stream = tern.generate(session, prompt, max_new_tokens=40, sampler=sampler, stop_at_end=False)
    text = "".join(stream)
    assert stream.tokens == 40 and stream.stop_reason == "length"
    assert text == expected["text"]


def test_generator_ids_and_history(kjv_byte):
    session = tern.Session(kjv_byte, threads=1)
    generator = tern.Generator(session, context_policy="stop")
    prompt = list(b"In the beginning")
    assert generator.prompt(prompt) == len(prompt)
    logits = generator.logits
    assert logits.shape == (256,)
    greedy = tern.Sampler(temperature=0)
    first = generator.next(greedy)
    assert first == int(np.argmax(logits))
    assert generator.history == prompt + [first]
    assert greedy.sample(logits) == first
    more = list(generator.tokens(greedy, 5))
    assert len(more) == 5 and generator.history == prompt + [first] + more


def test_stop_policy_ends_the_stream_when_full(kjv_byte):
    session = tern.Session(kjv_byte, threads=1, max_tokens=32)
    generator = tern.Generator(session, context_policy="stop")
    generator.prompt(list(b"In the beginning God"))  # 20 of 32 tokens
    stream = generator.tokens(tern.Sampler(seed=3), 100, stop_at_end=False)
    assert len(list(stream)) == 13 and stream.stop_reason == "context_full"  # 12 fed after the prompt, 1 more drawn
    with pytest.raises(tern.Error) as e:
        generator.next(tern.Sampler())
    assert e.value.status == tern.Status.CONTEXT_FULL and "sequence limit" in str(e.value)


def test_sampler_and_generator_errors(kjv_byte):
    with pytest.raises(tern.Error) as e:
        tern.Sampler(top_p=0.0)
    assert e.value.status == tern.Status.INVALID_ARGUMENT and "top_p" in str(e.value)
    generator = tern.Generator(tern.Session(kjv_byte, threads=1))
    with pytest.raises(tern.Error) as e:
        generator.next(tern.Sampler())
    assert e.value.status == tern.Status.INVALID_ARGUMENT and "prompt" in str(e.value)
    with pytest.raises(ValueError, match="context_policy"):
        tern.Generator(tern.Session(kjv_byte, threads=1), context_policy="wrap")
    with pytest.raises(tern.Error) as e:
        tern.Sampler().sample(np.array([1.0, np.nan], dtype=np.float32))
    assert e.value.status == tern.Status.INVALID_ARGUMENT and "logits[1]" in str(e.value)


def test_example_script_generates(kjv_llama_path):
    env = dict(os.environ)
    out = subprocess.run([sys.executable, str(SOURCE / "examples/python/generate.py"), str(kjv_llama_path),
                          "--prompt", "And God said", "-n", "24", "--threads", "1"], check=True, capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.stdout.startswith("And God said")
    assert "tokens/s" in out.stderr
