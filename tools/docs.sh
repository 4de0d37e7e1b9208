#!/usr/bin/env bash
# The documentation site, offline (Quarto is not needed): tools/docs.sh [OUTDIR]   (default _site/)
# Builds the package from the notebooks, then executes every notebook once, processes it with
# nbdev's own docs processors and renders it to HTML with nbconvert (see tools/docs.py).
# Open OUTDIR/index.html in a browser.  Exits non-zero when a notebook fails while executing.
# On a machine with Quarto, `nbdev-docs` builds the hosted site from nbs/_quarto.yml instead.
set -euo pipefail
cd "$(dirname "$0")/.."
python -c 'import jupytext, nbdev, nbconvert, execnb, bs4' 2>/dev/null ||
  { echo "docs: needs the development extra (jupytext, nbdev, nbconvert): pip install -e '.[dev]'" >&2; exit 1; }
tools/build.sh
exec python tools/docs.py "$@"
