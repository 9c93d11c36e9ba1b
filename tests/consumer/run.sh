#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs a built tree into a fresh prefix and uses it the way an app would, from the prefix alone:
#   tests/consumer/run.sh BUILD_DIR   (ctest: consumer_install_and_link; CC, CXX: the compilers, default cc, c++)
# 1. cmake --install BUILD_DIR --prefix BUILD_DIR/consumer/prefix (emptied first), and checks the layout (the
#    licence and the docs under share/doc/tern included);
# 2. the installed tern-convert converts examples/models/kjv-byte, the installed tern-run generates from a prompt;
# 3. a CMake project (find_package(tern 0.2), CMAKE_PREFIX_PATH = the prefix) builds main.cpp against tern::tern
#    and tern::tern_static; plain cc builds main.c with `pkg-config --cflags --libs tern` (libtern.so) and with
#    `pkg-config --static` (libtern.a), PKG_CONFIG_PATH = the prefix's;
# 4. each runs on the converted model and must print the same next-byte prediction; the shared ones must load the
#    prefix's libtern.so.MAJOR, the static ones no libtern at all.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
work=$build/consumer
prefix=$work/prefix
CC=${CC:-cc}
CXX=${CXX:-c++}
fail() { echo "consumer: FAIL: $*" >&2; exit 1; }
# The libtern.so.MAJOR that EXE loads, as a canonical path (empty when none).
loaded_libtern() { ldd "$1" | sed -n "s/^[[:space:]]*libtern\.so\.$major => \([^ ]*\) .*/\1/p" | xargs -r realpath; }

rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$(cd "$prefix" && dirname "$(find . -name libtern.a | head -n1)")
libdir=${libdir#./}
[ -n "$libdir" ] || fail "no libtern.a under $prefix"
major=$(sed -n 's/^#define TERN_VERSION_MAJOR \([0-9]*\)$/\1/p' "$prefix/include/tern/tern.h")
version=$major.$(sed -n 's/^#define TERN_VERSION_MINOR \([0-9]*\)$/\1/p' "$prefix/include/tern/tern.h").$(
  sed -n 's/^#define TERN_VERSION_PATCH \([0-9]*\)$/\1/p' "$prefix/include/tern/tern.h")
for f in include/tern/tern.h include/tern/tern.hpp bin/tern-convert bin/tern-run bin/tern-bench \
         "$libdir/libtern.so.$version" "$libdir/libtern.so.$major" "$libdir/libtern.so" "$libdir/libtern.a" \
         "$libdir/cmake/tern/ternConfig.cmake" "$libdir/cmake/tern/ternConfigVersion.cmake" \
         "$libdir/pkgconfig/tern.pc" share/doc/tern/LICENSE share/doc/tern/README.md share/doc/tern/docs/library.md; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
[ "$(readlink "$prefix/$libdir/libtern.so.$major")" = "libtern.so.$version" ] || fail "libtern.so.$major is no link to libtern.so.$version"
[ "$(readlink "$prefix/$libdir/libtern.so")" = "libtern.so.$major" ] || fail "libtern.so is no link to libtern.so.$major"
cmp -s "$prefix/share/doc/tern/LICENSE" "$source_dir/LICENSE" || fail "the installed LICENSE is not the repository's"
# Nothing of the build tree's own: tests, fuzzers, benchmarks, internal libraries.
unexpected=$(cd "$prefix" && find . -type f -o -type l | grep -Ev \
  "^\./(include/tern/tern\.(h|hpp)|bin/tern-(convert|run|bench)|$libdir/(libtern\.(so(\.[0-9.]+)?|a)|cmake/tern/[A-Za-z-]+\.cmake|pkgconfig/tern\.pc)|share/doc/tern/(LICENSE|README\.md|docs/[a-z0-9-]+\.(md|png)))$" || true)
[ -z "$unexpected" ] || fail "installed beyond the package: $unexpected"
echo "installed $(cd "$prefix" && find . -type f | wc -l) files into $prefix"

# The installed tools, on their own RPATH ($ORIGIN/../lib): the build tree is not on any path they look at.
model=$work/kjv-byte.tern
env -u LD_LIBRARY_PATH "$prefix/bin/tern-convert" "$source_dir/examples/models/kjv-byte" -o "$model" --quiet
[ -s "$model" ] || fail "tern-convert wrote no model"
installed_lib=$(realpath "$prefix/$libdir/libtern.so.$version")
[ "$(loaded_libtern "$prefix/bin/tern-run")" = "$installed_lib" ] \
  || fail "installed tern-run does not load the prefix's libtern: $(ldd "$prefix/bin/tern-run" | grep tern || true)"
run_out=$(env -u LD_LIBRARY_PATH "$prefix/bin/tern-run" "$model" --prompt "And God said" -n 24 --temperature 0 \
  --threads 1 2>"$work/tern-run.err") || fail "installed tern-run --prompt failed: $(cat "$work/tern-run.err")"
grep -q "^And God said" <<<"$run_out" || fail "installed tern-run printed no generation: $run_out"
echo "installed tern-run: $(head -n1 <<<"$run_out")"

# The CMake consumer: the prefix only (no package registry, no source tree).
cmake -S "$here" -B "$work/cmake-build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  >"$work/cmake-configure.log" || { cat "$work/cmake-configure.log"; fail "find_package(tern) project did not configure"; }
found=$(sed -n 's/^tern_DIR:PATH=//p' "$work/cmake-build/CMakeCache.txt")
[ "$found" = "$prefix/$libdir/cmake/tern" ] || fail "find_package(tern) found $found, not the prefix's package"
cmake --build "$work/cmake-build" >"$work/cmake-build.log" || { cat "$work/cmake-build.log"; fail "CMake consumer did not build"; }
! grep -q -- "$source_dir/runtime\|$build/runtime" "$work/cmake-build/build.ninja" \
  || fail "the CMake consumer's build reads Tern's source or build tree"

# The C consumer through pkg-config: shared, then static (libtern.a picked by name, with Libs.private).
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[ "$(pkg-config --modversion tern)" = "$version" ] || fail "pkg-config says tern $(pkg-config --modversion tern), expected $version"
cflags=$(pkg-config --cflags tern)
libs=$(pkg-config --libs tern)
static_libs=$(pkg-config --static --libs tern)
echo "pkg-config --cflags --libs tern: $cflags $libs"
echo "pkg-config --static --libs tern: $static_libs"
# shellcheck disable=SC2086
"$CC" -std=c99 -Wall -Wextra -Werror "$here/main.c" -o "$work/consumer_c" $cflags $libs \
  -Wl,-rpath,"$(pkg-config --variable=libdir tern)"
# shellcheck disable=SC2086
"$CC" -std=c99 -Wall -Wextra -Werror "$here/main.c" -o "$work/consumer_c_static" $cflags \
  $(sed -E 's/(^| )-ltern( |$)/\1-l:libtern.a\2/' <<<"$static_libs")

prompt="And God said"
expected=""
for exe in "$work/cmake-build/consumer_cpp" "$work/cmake-build/consumer_cpp_static" "$work/consumer_c" \
           "$work/consumer_c_static"; do
  name=$(basename "$exe")
  if [[ $name == *_static ]]; then
    ! readelf -d "$exe" | grep -q "libtern" || fail "$name links libtern.so: $(readelf -d "$exe" | grep libtern)"
  else
    [ "$(loaded_libtern "$exe")" = "$installed_lib" ] \
      || fail "$name does not load the prefix's libtern: $(ldd "$exe" | grep tern || true)"
  fi
  out=$(env -u LD_LIBRARY_PATH "$exe" "$model" "$prompt") || fail "$name exited $?: $out"
  echo "$name: $out"
  [[ $out =~ ^libtern\ $version\ .*next\ byte\ after\ \"$prompt\":\ ([0-9]+)$ ]] || fail "$name printed '$out'"
  byte=${BASH_REMATCH[1]}
  [ "$byte" -lt 256 ] || fail "$name predicted $byte, not a byte"
  [ -z "$expected" ] || [ "$byte" = "$expected" ] || fail "$name predicted $byte, the others $expected"
  expected=$byte
done
# tern-run's greedy generation continues the prompt with the same byte.
first=$(printf '%s' "${run_out#"$prompt"}" | head -c1 | od -An -tu1 | tr -d ' ')
[ "$first" = "$expected" ] || fail "tern-run continued with byte $first, the consumers predict $expected"
echo "consumer: OK (next byte $expected)"
