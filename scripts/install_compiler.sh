#!/usr/bin/env bash
# Make sure the Metal emulator has a C++ compiler: clang >= 17 (Debian: clang-19), else the PyPI
# package ziglang (a clang in a wheel). Idempotent. Routes, in order, each falling through to the
# next on any failure (no apt-get, not root, `apt-get update` with only warnings, `E: Unable to
# locate package`, a broken mirror): an installed clang, apt-get install clang-19, pip ziglang.
# The last line it prints names the compiler it ended with; exit 1 when every route failed.
# PYTHON selects the interpreter whose pip gets ziglang (default: python, else python3).
set -uo pipefail  # no -e: a failing route must fall through, not end the script

PY=${PYTHON:-$(command -v python >/dev/null 2>&1 && echo python || echo python3)}

has_clang() {
  local c v
  for c in "${MPSLINALG_CXX:-}" clang++-21 clang++-20 clang++-19 clang++-18 clang++-17 clang++; do
    [ -n "$c" ] || continue
    command -v "${c%% *}" >/dev/null 2>&1 || continue
    v=$($c --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)
    if [ -n "$v" ] && [ "$v" -ge 17 ]; then echo "emulator compiler: $c (clang $v)"; return 0; fi
  done
  return 1
}

has_zig() {
  "$PY" -m ziglang version >/dev/null 2>&1 || return 1
  echo "emulator compiler: $PY -m ziglang c++ (zig $("$PY" -m ziglang version 2>/dev/null))"
}

has_clang && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_compiler: no apt-get here; trying pip ziglang" >&2
elif [ "$(id -u)" != 0 ]; then
  echo "install_compiler: not root, apt-get cannot install clang-19; trying pip ziglang" >&2
else
  # `apt-get update` exits 0 on warnings (unreachable mirror), so its status proves nothing: the
  # install's status and a compiler on PATH afterwards are what count.
  apt-get update -qq >&2 || echo "install_compiler: apt-get update failed; trying the install anyway" >&2
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19 >/dev/null; then
    has_clang && exit 0
    echo "install_compiler: apt-get installed clang-19 but no clang++ >= 17 is on PATH" >&2
  else
    echo "install_compiler: apt-get install clang-19 failed (status $?); trying pip ziglang" >&2
  fi
fi

if "$PY" -m pip install --quiet ziglang >&2; then
  has_zig && exit 0
fi
echo "install_compiler: every route failed (installed clang, apt-get clang-19, $PY -m pip install ziglang);" \
  "install clang >= 17 or set MPSLINALG_CXX" >&2
exit 1
