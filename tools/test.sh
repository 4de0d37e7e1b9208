#!/usr/bin/env bash
# The whole test suite, from a fresh clone: install, build, check sync, run every lesson and test.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet --disable-pip-version-check -e ".[dev,tui,mcp]"
tools/build.sh
if [ -n "$(git status --porcelain -- passepartout 2>/dev/null)" ]; then
  echo "FAIL: passepartout/ is out of sync with nbs/ (rebuild with tools/build.sh and commit both):" >&2
  git status --porcelain -- passepartout >&2
  exit 1
fi
export PASSEPARTOUT_HOME="$(mktemp -d)"
status=0
# 0. the documentation site, every notebook executed once (tests/test_docs.py checks the pages)
export PASSEPARTOUT_DOCS_SITE="$PWD/_site"
tools/docs.sh "$PASSEPARTOUT_DOCS_SITE" || status=$?
# 1. lessons (each notebook one item) and tests/
python -m pytest tests || status=$?
# 2. the same notebooks cell by cell in a real Jupyter kernel
python -m pytest --nbval-lax --nbval-current-env nbs || status=$?
# pytest exits 5 when it collected nothing: that is a failure here too
exit $status
