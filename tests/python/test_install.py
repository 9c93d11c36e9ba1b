# SPDX-License-Identifier: MIT
"""The documented install (cmake --install BUILD --component python), into a scratch DESTDIR: the package imports
from there alone and loads the libtern copy installed next to its extension."""
import os
import pathlib
import subprocess
import sys

import pytest


def test_python_component_installs_an_importable_package(tmp_path, kjv_byte_path):
    build = os.environ.get("TERN_BUILD_DIR")
    cmake = os.environ.get("CMAKE_COMMAND")
    target = os.environ.get("TERN_PYTHON_INSTALL_DIR")
    if not (build and cmake and target):
        pytest.fail("TERN_BUILD_DIR, CMAKE_COMMAND and TERN_PYTHON_INSTALL_DIR are set by ctest (python_bindings)")
    destdir = tmp_path / "root"
    subprocess.run([cmake, "--install", build, "--component", "python"], check=True, capture_output=True,
                   env=dict(os.environ, DESTDIR=str(destdir)))
    site = destdir / pathlib.Path(target).relative_to("/")
    installed = sorted(p.name for p in (site / "tern").iterdir())
    assert "__init__.py" in installed and "libtern.so.0" in installed
    assert any(name.startswith("_tern.") and name.endswith(".so") for name in installed)
    check = ("import tern, sys\n"
             "m = tern.Model(sys.argv[1])\n"
             "print(tern.__file__)\n"
             "print(tern.Session(m, threads=1).forward([65, 66]).shape)\n"
             "print(''.join(l.split()[-1] for l in open('/proc/self/maps') if 'libtern.so' in l))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", check, str(kjv_byte_path)], check=True, capture_output=True,
                         text=True, env=env, cwd=tmp_path).stdout.splitlines()
    assert out[0] == str(site / "tern" / "__init__.py")
    assert out[1] == "(2, 256)"
    assert out[2].startswith(str(site / "tern" / "libtern.so.0"))  # the installed copy, not the build tree's
