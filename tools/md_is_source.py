"""Refuse to build while a generated `.ipynb` holds edits its Markdown source lacks (run by tools/build.sh).

`jupytext --sync` takes the newer file of each pair as the source.  The `.md` is the source here, so a
`.ipynb` saved after it (by a notebook editor that does not know the pair, say) must not rewrite it in
silence: when a `.ipynb` is newer than its `.md` and reads differently, this prints which notebooks
and how to keep either side, and exits 1.  A `.ipynb` that says the same as its `.md` (every build
leaves it newer) passes.  Usage: python tools/md_is_source.py nbs/NN_name.md ...
"""
import sys
from pathlib import Path


def diverged(md, ipynb, config):
    "Whether `ipynb` is newer than `md` and its cells, written as Markdown, differ from `md`."
    import jupytext
    if not ipynb.exists() or ipynb.stat().st_mtime <= md.stat().st_mtime: return False
    return jupytext.writes(jupytext.read(ipynb), fmt='md', config=config) != md.read_text(encoding='utf-8')


def config_for(md):
    "The jupytext configuration that applies to `md` (pyproject.toml's [tool.jupytext]), as `jupytext --sync` finds it."
    from jupytext.config import find_jupytext_configuration_file, load_jupytext_configuration_file
    found = find_jupytext_configuration_file(str(md.parent))
    return load_jupytext_configuration_file(found) if found else None


def main(paths):
    stale = [md for md in map(Path, paths) if diverged(md, md.with_suffix('.ipynb'), config_for(md))]
    if not stale: return 0
    names = ' '.join(str(md.with_suffix('.ipynb')) for md in stale)
    print(f"build: refusing to sync: these generated notebooks were saved after their Markdown source and\n"
          f"say something else, so `jupytext --sync` would copy them over the .md (the source):\n  {names}\n"
          f"Keep the Markdown (drop what the .ipynb has):  rm {names}\n"
          f"Keep the .ipynb's edits (rewrite the .md):     jupytext --to md {names}\n"
          f"then run tools/build.sh again.", file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
