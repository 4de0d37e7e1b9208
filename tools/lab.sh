#!/usr/bin/env bash
# JupyterLab for the notebooks: tools/lab.sh [jupyter lab options]   (needs the dev extra)
# A double-click on nbs/NN_name.md opens it as a notebook (jupytext's "Jupytext Notebook" viewer), with
# the Python kernel started without asking. Those two settings are in tools/jupyterlab/overrides.json
# and apply to this server only: your other JupyterLab sessions keep their own.
# The notebooks are built first (tools/build.sh): the paired .ipynb carries the kernel and the outputs,
# and the build stops if a .ipynb holds edits its .md lacks.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v jupyter-lab >/dev/null ||
  { echo "lab: JupyterLab is missing: pip install -e '.[dev]' (the development extra)" >&2; exit 1; }
tools/build.sh
exec jupyter lab --LabApp.app_settings_dir="$PWD/tools/jupyterlab" --ServerApp.root_dir="$PWD" "$@" nbs/index.md
