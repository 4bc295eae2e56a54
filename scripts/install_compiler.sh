#!/usr/bin/env bash
# Make sure the Metal emulator has a C++ compiler: clang >= 17 (Debian: clang-19), else the PyPI
# package ziglang (a clang in a wheel). Idempotent; prints what it found or installed.
set -euo pipefail
has_clang() {
  for c in "${MPSLINALG_CXX:-}" clang++-21 clang++-20 clang++-19 clang++-18 clang++-17 clang++; do
    [ -n "$c" ] || continue
    command -v "${c%% *}" >/dev/null 2>&1 || continue
    v=$($c --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n1)
    if [ -n "$v" ] && [ "$v" -ge 17 ]; then echo "emulator compiler: $c (clang $v)"; return 0; fi
  done
  return 1
}
has_clang && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19 >/dev/null
  has_clang && exit 0
fi
python -m pip install --quiet ziglang
echo "emulator compiler: python -m ziglang c++"
