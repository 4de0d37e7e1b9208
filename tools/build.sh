#!/usr/bin/env bash
# Tangle: Markdown notebooks (the source) -> .ipynb (generated, ignored) -> passepartout/*.py.
# 0. the .md is the source: stop when a .ipynb saved after its .md says something else (tools/md_is_source.py),
#    since `jupytext --sync` would copy the newer .ipynb over the .md;
# 1. jupytext pairs every nbs/**/*.md with its .ipynb;
# 2. every cell gets an id derived from its content, so exported `# %% ... #id` markers are stable;
# 3. nbdev-export writes the modules.  Two rebuilds from scratch give byte-identical modules.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t notebooks < <(find nbs -name '*.md' -not -path '*/.ipynb_checkpoints/*' -not -name '_*' | sort)
[ ${#notebooks[@]} -gt 0 ] || { echo "build: no notebooks under nbs/" >&2; exit 1; }
command -v jupytext >/dev/null && command -v nbdev-export >/dev/null ||
  { echo "build: jupytext and nbdev are missing: pip install -e '.[dev]' (the development extra)" >&2; exit 1; }
python tools/md_is_source.py "${notebooks[@]}"
jupytext --quiet --sync "${notebooks[@]}" >/dev/null
python tools/stable_ids.py "${notebooks[@]/%.md/.ipynb}"
# the .ipynb just written holds what its .md says: give it the .md's time, so that jupytext (in JupyterLab
# too) never takes it for a newer notebook holding edits the Markdown lacks
for md in "${notebooks[@]}"; do touch -r "$md" "${md%.md}.ipynb"; done
nbdev-export
