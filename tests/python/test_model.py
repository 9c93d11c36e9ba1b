# SPDX-License-Identifier: MIT
"""tern.Model: loading from a file and from bytes, its info, the tokenizer, and load errors."""
import numpy as np
import pytest

import tern


def test_info_holds_the_model_fields(kjv_byte, kjv_llama):
    info = kjv_byte.info
    assert info.vocab_size == 256  # examples/models/kjv-byte/config.json
    assert info.vocab_is_bytes
    assert info.max_context == 256
    assert info.n_ops > 0 and info.n_tensors > 0 and info.format_version >= 1
    assert kjv_llama.info.vocab_size == 2000  # examples/models/kjv-llama/config.json
    assert not kjv_llama.info.vocab_is_bytes
    assert kjv_llama.tokenizer != ""
    assert kjv_llama.special_tokens["bos"] == 1 and kjv_llama.special_tokens["eos"] == 2  # its config.json
    assert kjv_llama.is_end_token(2) and not kjv_llama.is_end_token(3)


def test_from_bytes_runs_as_the_file(kjv_byte_path, kjv_byte):
    data = kjv_byte_path.read_bytes()
    model = tern.Model.from_bytes(data)
    # Read in place (a 64-byte aligned bytes payload) or copied (any other): never a partial copy.
    assert model.copied_bytes in (0, len(data))
    assert model.info.vocab_size == kjv_byte.info.vocab_size
    ids = list(b"In the beginning")
    from_file = tern.Session(kjv_byte, threads=1).forward(ids)
    assert np.array_equal(tern.Session(model, threads=1).forward(ids), from_file)
    del model  # the session keeps the model (and the bytes it may read in place) alive
    session = tern.Session(tern.Model.from_bytes(bytearray(data)), threads=1)
    assert np.array_equal(session.forward(ids), from_file)


def test_tokenize_and_detokenize_round_trip(kjv_byte, kjv_llama):
    text = "And God said, Let there be light"
    assert kjv_byte.tokenize(text) == list(text.encode())
    ids = kjv_llama.tokenize(text)
    assert len(ids) > 0 and all(0 <= i < 2000 for i in ids)
    assert kjv_llama.detokenize(ids).strip() == text
    assert kjv_llama.tokenize(text, add_special=True)[0] == kjv_llama.special_tokens["bos"]
    assert b"".join(kjv_llama.token_to_text(i) for i in ids).strip() == text.encode()


def test_a_missing_file_raises_error_naming_the_path(tmp_path):
    missing = tmp_path / "nothing-here.tern"
    with pytest.raises(tern.Error) as e:
        tern.Model(missing)
    assert e.value.status == tern.Status.IO_ERROR
    assert str(missing) in str(e.value) and e.value.message == str(e.value)


def test_bytes_that_are_no_model_raise_invalid_model():
    with pytest.raises(tern.Error) as e:
        tern.Model.from_bytes(b"\x10\x00\x00\x00" + b"NOPE" + bytes(64))
    assert e.value.status == tern.Status.INVALID_MODEL
    assert "TERN" in str(e.value)
    with pytest.raises(TypeError, match="bytes"):
        tern.Model.from_bytes(12)


def test_detokenize_rejects_an_id_outside_the_vocabulary(kjv_llama):
    with pytest.raises(tern.Error) as e:
        kjv_llama.detokenize([5, 2000])
    assert e.value.status == tern.Status.INVALID_ARGUMENT
    assert "2000" in str(e.value) and "index 1" in str(e.value)
    with pytest.raises(ValueError, match="int32"):
        kjv_llama.detokenize([2**32 + 5])
    with pytest.raises(TypeError, match="integers"):
        kjv_llama.detokenize([1.5])
