# SPDX-License-Identifier: MIT
"""Fixtures of the Python suite. ctest (tests/CMakeLists.txt, python_bindings) sets the environment: PYTHONPATH to
the build's package (build/python), TERN_EXAMPLE_MODELS to the converted shipped models, TERN_RUN to tern-run."""
import os
import pathlib

import pytest

import tern


def _env_path(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run this suite through ctest (python_bindings)")
    return pathlib.Path(value)


@pytest.fixture(scope="session")
def models_dir():
    return _env_path("TERN_EXAMPLE_MODELS")


@pytest.fixture(scope="session")
def tern_run():
    return _env_path("TERN_RUN")


@pytest.fixture(scope="session")
def kjv_byte_path(models_dir):
    return models_dir / "kjv-byte.tern"


@pytest.fixture(scope="session")
def kjv_llama_path(models_dir):
    return models_dir / "kjv-llama.tern"


@pytest.fixture(scope="session")
def kjv_byte(kjv_byte_path):
    return tern.Model(kjv_byte_path)


@pytest.fixture(scope="session")
def kjv_llama(kjv_llama_path):
    return tern.Model(kjv_llama_path)
