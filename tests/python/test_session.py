# SPDX-License-Identifier: MIT
"""tern.Session: forward against tern-run's logits, append, the state round trip, the plan, errors, the GIL."""
import json
import subprocess
import threading

import numpy as np
import pytest

import tern

PROMPT = "In the beginning God created the heaven and the earth."


def test_forward_matches_tern_run_bit_for_bit(kjv_llama, kjv_llama_path, tern_run, tmp_path):
    ids = kjv_llama.tokenize(PROMPT, add_special=True)
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    subprocess.run([str(tern_run), str(kjv_llama_path), "--ids", str(tmp_path / "ids.json"), "--logits-out",
                    str(tmp_path / "logits.npy"), "--threads", "1", "--json"], check=True, capture_output=True)
    expected = np.load(tmp_path / "logits.npy")
    logits = tern.Session(kjv_llama, threads=1).forward(ids)
    assert logits.dtype == np.float32 and logits.shape == (len(ids), 2000)
    assert np.array_equal(logits, expected)


def test_append_continues_and_logits_false_returns_none(kjv_byte):
    session = tern.Session(kjv_byte, threads=1)
    ids = np.frombuffer(PROMPT.encode(), dtype=np.uint8)  # any integer dtype
    whole = session.forward(ids)
    session.reset()
    assert session.position == 0
    assert session.append(ids[:10], logits=False) is None
    rest = session.append(ids[10:])
    assert session.position == len(ids)
    np.testing.assert_allclose(rest, whole[10:], rtol=1e-4, atol=1e-4)


def test_state_round_trip_continues_bit_for_bit(kjv_llama):
    ids = kjv_llama.tokenize(PROMPT)
    first = tern.Session(kjv_llama, threads=1)
    first.append(ids[:8], logits=False)
    state = first.save_state()
    assert isinstance(state, bytes) and len(state) > 0
    expected = first.append(ids[8:])
    second = tern.Session(kjv_llama, threads=1)
    second.load_state(state)
    assert second.position == 8
    assert np.array_equal(second.append(ids[8:]), expected)
    with pytest.raises(tern.Error) as e:
        second.load_state(state[:-7])
    assert e.value.status == tern.Status.INVALID_ARGUMENT and str(e.value)


def test_plan_gives_the_planner_numbers(kjv_llama):
    session = tern.Session(kjv_llama, threads=1, max_tokens=512)
    plan = session.plan(64)
    assert plan["n_tokens"] == 64
    assert plan["weight_bytes"] > 0 and plan["arena_bytes"] > 0
    # Dense attention's state for 64 tokens: a key and a value per token in each of 4 layers, 2 KV heads of 32
    # floats (examples/models/kjv-llama/config.json).
    assert plan["state_bytes"] == 4 * 2 * 2 * 32 * 4 * 64
    assert session.plan()["n_tokens"] == session.max_batch
    assert session.memory()["n_tokens"] == session.max_batch
    assert session.max_tokens == 512
    with pytest.raises(tern.Error) as e:
        session.plan(0)
    assert e.value.status == tern.Status.INVALID_ARGUMENT
    assert "tern_session_plan" in str(e.value) and "n_tokens" in str(e.value)


def test_hidden_gives_the_rows_and_their_mean_and_keeps_the_sequence(kjv_llama):
    session = tern.Session(kjv_llama, threads=1)
    ids = kjv_llama.tokenize(PROMPT)
    d = session.hidden_size
    assert d == 192  # examples/models/kjv-llama/config.json: hidden_size
    rows = session.hidden(ids)
    assert rows.dtype == np.float32 and rows.shape == (len(ids), d)
    assert np.isfinite(rows).all() and np.abs(rows).max() > 0
    # The final RMSNorm's rows: no two positions alike.
    assert len({row.tobytes() for row in rows}) == len(ids)
    pooled = session.hidden(np.array(ids, dtype=np.int64), pooled=True)
    assert pooled.dtype == np.float32 and pooled.shape == (d,)
    np.testing.assert_allclose(pooled, rows.astype(np.float64).mean(axis=0), rtol=1e-6, atol=1e-6)
    # The session holds the sequence, as after forward: appending continues it the same way.
    assert session.position == len(ids)
    after_hidden = session.append(ids[:3])
    session.forward(ids)
    np.testing.assert_array_equal(session.append(ids[:3]), after_hidden)
    with pytest.raises(tern.Error) as e:
        session.hidden([])
    assert e.value.status == tern.Status.INVALID_ARGUMENT and "n is 0" in str(e.value)
    assert session.position == 0


def test_errors_carry_status_and_message(kjv_byte):
    session = tern.Session(kjv_byte, threads=1)
    with pytest.raises(tern.Error) as e:
        session.forward([])
    assert e.value.status == tern.Status.INVALID_ARGUMENT and "tern_session_forward" in str(e.value)
    with pytest.raises(tern.Error) as e:
        session.forward([65, 256])
    assert e.value.status == tern.Status.INVALID_ARGUMENT and "256" in str(e.value)
    with pytest.raises(tern.Error) as e:
        session.append(list(range(200)) * 2)  # 400 tokens, past max_batch (the context, 256)
    assert e.value.status == tern.Status.INVALID_ARGUMENT and "256" in str(e.value)
    with pytest.raises(tern.Error) as e:
        tern.Session(kjv_byte, threads=-3)
    assert e.value.status == tern.Status.INVALID_ARGUMENT and "threads" in str(e.value)
    with pytest.raises(ValueError, match="'cpu', 'vulkan', 'auto'"):
        tern.Session(kjv_byte, backend="gpu")
    with pytest.raises(TypeError, match="tern.Model, not str"):
        tern.Session("not a model")
    assert issubclass(tern.Error, RuntimeError)


def test_forward_releases_the_gil(kjv_byte):
    session = tern.Session(kjv_byte, threads=1)
    ids = list(PROMPT.encode()) * 4
    done = threading.Event()

    def run():
        for _ in range(5):
            session.forward(ids)
        done.set()

    worker = threading.Thread(target=run)
    spins = 0
    worker.start()
    while not done.is_set():  # runs only while the worker is inside the library without the GIL
        spins += 1
    worker.join()
    # A forward holding the GIL would leave this loop a few turns between calls; without it, it spins throughout.
    assert spins > 10000


def test_sessions_on_one_model_from_many_threads(kjv_byte):
    ids = list(PROMPT.encode())
    expected = tern.Session(kjv_byte, threads=1).forward(ids)
    shared = tern.Session(kjv_byte, threads=1)
    results = []

    def run():
        results.append(shared.forward(ids))  # one session, calls queued by its lock

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 4 and all(np.array_equal(r, expected) for r in results)
