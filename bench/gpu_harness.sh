#!/usr/bin/env bash
# One command for a CUDA machine: the harness over every fixture with cases on
# the real devices, then the harness's GPU tests. See docs/harness.md.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
"$PY" bench/gpu_harness.py "$@"; status=$?
# -P: keep the checkout (whose devlint/ lacks devlint.rules) off sys.path
"$PY" -P -m pytest -q -p no:cacheprovider -m gpu tests/test_harness.py || status=1
exit $status
