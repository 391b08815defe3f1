#!/usr/bin/env bash
# Installs, with apt-get, whatever of amla's build dependencies is missing (Debian 12 or later).
# Runs as root, or through sudo when it is available.
set -euo pipefail
# clang and its sanitizer runtimes (libclang-rt-dev): the sanitizer pass of scripts/test.sh and the
# libFuzzer targets of scripts/fuzz.sh.
pkgs=(cmake g++ make ninja-build libeigen3-dev catch2 libbenchmark-dev clang-format clang
  libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all of ${pkgs[*]} present"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
