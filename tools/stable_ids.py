"""Give every cell of the given notebooks an id derived from its content (and kernel metadata).

nbdev writes each cell's id into the exported module (`# %% ../nbs/x.ipynb #id`); random ids would
make every rebuild churn the modules.  The id is a hash of the cell's type and source, with a
counter appended only when two cells of one notebook are identical.
"""
import hashlib, json, sys
from pathlib import Path

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

def stable_ids(path: Path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    seen = {}
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        base = hashlib.sha1(f'{cell["cell_type"]}\0{src}'.encode()).hexdigest()[:8]
        n = seen.get(base, 0); seen[base] = n + 1
        cell["id"] = base if n == 0 else f"{base}-{n}"
    nb.setdefault("metadata", {})["kernelspec"] = KERNELSPEC
    nb["metadata"]["jupytext"] = {"formats": "ipynb,md"}
    nb["nbformat"], nb["nbformat_minor"] = 4, 5
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if path.read_text(encoding="utf-8") != text: path.write_text(text, encoding="utf-8")

if __name__ == "__main__":
    for p in sys.argv[1:]: stable_ids(Path(p))
