#!/usr/bin/env bash
# Download the wheels of the `distributed` extra (dask, distributed and what they need), at the
# versions constraints.txt pins, for a GPU host without network (docs/distributed.md):
#
#   bash tools/wheels_distributed.sh [DEST] [PYTHON_VERSION] [PLATFORM ...]
#     DEST            folder for the wheels (default .whl-dist)
#     PYTHON_VERSION  the host's Python, e.g. 3.12 (default 3.12)
#     PLATFORM        pip platform tags (default manylinux_2_28_x86_64 manylinux_2_17_x86_64
#                     manylinux2014_x86_64)
#
# Pure-Python packages come as py3-none-any wheels; msgpack, psutil, pyyaml, markupsafe and
# tornado have C extensions, so pip picks the CPython wheel (cp312, or abi3) of that platform.
# One version of each package, --no-deps (the list below is the whole closure, checked against
# the packages' Requires-Dist). Run from the repository root, on any machine with pip and
# network. On the host:
#   python3 -m pip install --no-index --no-deps --target /tmp/site DEST/*.whl
#   export PYTHONPATH=/tmp/site:$PWD
set -euo pipefail
dest=${1:-.whl-dist}
py=${2:-3.12}
shift $(( $# >= 2 ? 2 : $# ))
platforms=("$@")
[[ ${#platforms[@]} -gt 0 ]] || platforms=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64)

# distributed's and dask's requirements, recursively
PACKAGES=(dask distributed click cloudpickle fsspec jinja2 locket markupsafe msgpack packaging
          partd psutil pyyaml sortedcontainers tblib toolz tornado zict)
# dask needs importlib_metadata (and so zipp, lazy-importer) only before Python 3.12
if [[ "$(printf '%s\n' "$py" 3.12 | sort -V | head -1)" != 3.12 ]]; then
  PACKAGES+=(importlib_metadata zipp lazy-importer)
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pin() {  # NAME==VERSION from constraints.txt (names compared as pip does: case, - _ .)
  local want
  want=$(echo "$1" | tr 'A-Z_.' 'a-z--')
  while IFS= read -r line; do
    [[ $line == *==* ]] || continue
    [[ $(echo "${line%%==*}" | tr 'A-Z_.' 'a-z--') == "$want" ]] && { echo "$line"; return; }
  done < "$here/constraints.txt"
  echo "wheels_distributed.sh: $1 has no pin in constraints.txt" >&2
  exit 2
}

reqs=()
for p in "${PACKAGES[@]}"; do reqs+=("$(pin "$p")"); done
plat_args=()
for p in "${platforms[@]}"; do plat_args+=(--platform "$p"); done
mkdir -p "$dest"
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$py" --implementation cp "${plat_args[@]}" -d "$dest" "${reqs[@]}"
ls "$dest"
