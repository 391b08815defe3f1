#!/usr/bin/env bash
# Builds and installs amla's Python package into the current python3 (pip install .[test]: the
# extension is built by scikit-build-core + nanobind on the same CMake tree), then runs its
# pytest suite (tests/python). Works on a fresh Debian 12 machine: build dependencies come from
# scripts/install-deps.sh (apt), Python ones from PyPI. Where pip may not install into the
# interpreter (an externally managed Python), a virtual environment is made in build-python/venv.
# Environment: PYTHON (default python3), AMLA_PY_BUILD_DIR (default build-python/cmake, kept
# between runs so rebuilds are incremental). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
py=${PYTHON:-python3}
stdlib=$("$py" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
if [ -f "$stdlib/EXTERNALLY-MANAGED" ] || ! "$py" -m pip --version >/dev/null 2>&1; then
  [ -x build-python/venv/bin/python ] || "$py" -m venv build-python/venv
  py=build-python/venv/bin/python
fi
echo "python-test: using $("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

# The build requirements are installed first and the build runs without isolation, so that the
# CMake build folder stays valid from one run to the next.
"$py" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.2" ninja
"$py" -m pip install -q --no-build-isolation \
  -Cbuild-dir="${AMLA_PY_BUILD_DIR:-build-python/cmake}" \
  -Cbuild.tool-args="-j$(nproc 2>/dev/null || echo 2)" ".[test]"
"$py" -m pytest tests/python -q "$@"
