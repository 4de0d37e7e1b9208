#!/usr/bin/env bash
# Tangle: Markdown notebooks (the source) -> .ipynb (generated, ignored) -> passepartout/*.py.
# 1. jupytext pairs every nbs/**/*.md with its .ipynb;
# 2. every cell gets an id derived from its content, so exported `# %% ... #id` markers are stable;
# 3. nbdev-export writes the modules.  Two rebuilds from scratch give byte-identical modules.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t notebooks < <(find nbs -name '*.md' -not -path '*/.ipynb_checkpoints/*' -not -name '_*' | sort)
[ ${#notebooks[@]} -gt 0 ] || { echo "build: no notebooks under nbs/" >&2; exit 1; }
jupytext --quiet --sync "${notebooks[@]}" >/dev/null
python tools/stable_ids.py "${notebooks[@]/%.md/.ipynb}"
nbdev-export
