#!/usr/bin/env bash
# Run yolo_sm from source on a GPU host without network or package index whose Python already has
# torch (docs/offline_gpu.md). Two steps:
#   on a machine with network, from the repository root: download the pure wheels the host lacks
#     bash tools/offline_gpu.sh wheels [PYTHON_VERSION] [REQUIREMENT ...]      (default 3.12)
#   on the GPU host, from the repository root (with .whl/ and .whl-dist/ copied along):
#     source tools/offline_gpu.sh
#     -> installs .whl/*.whl and .whl-dist/*.whl into /tmp/site, puts the source tree on
#        PYTHONPATH, sets $OUT and defines `yolo_sm` as `python3 -m yolo_sm`
# Pins come from constraints.txt; the host's own packages (numpy, pandas, pyarrow, ...) are used.
PURE=(ultralytics-opencv-headless ultralytics-thop nvtx)

_pin() { grep -iE "^$1==" constraints.txt || echo "$1"; }

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then  # executed: the download step
  set -euo pipefail
  [[ "${1:-}" == wheels ]] || { echo "usage: bash tools/offline_gpu.sh wheels [PYTHON_VERSION] [REQ ...]" >&2; exit 2; }
  py=${2:-3.12}
  shift $(( $# >= 2 ? 2 : 1 ))
  reqs=()
  for p in "${PURE[@]}"; do reqs+=("$(_pin "$p")"); done
  mkdir -p .whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "${reqs[@]}" "$@"
  ls .whl
  exit 0
fi

# sourced: the set-up on the GPU host
for d in .whl .whl-dist; do  # .whl-dist: tools/wheels_distributed.sh (collect --workers)
  if compgen -G "$d/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "$d"/*.whl || { echo "offline_gpu.sh: wheel install from $d failed" >&2; return 1; }
  fi
done
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export YOLO_SM_CACHE=${YOLO_SM_CACHE:-/tmp/yolo_sm_cache}
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
yolo_sm() { python3 -m yolo_sm "$@"; }
