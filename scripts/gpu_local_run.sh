#!/usr/bin/env bash
# Runs ResNet18 notebooks on a GPU machine that has PyTorch with CUDA but neither Docker nor TensorRT (local
# runtime, device cuda, the `gpu-local` profile): the GPU recording, docs/runs/gpu (its run.json names the
# card), rendered in docs/benchmarks.md.
#
#   scripts/gpu_local_run.sh RUN_DIR [NOTEBOOK_PREFIX ...]     (default notebooks: 10 11 12 13)
#
# Chained calls into one RUN_DIR add to its run.json. To keep the run (10-16, all from one commit):
#   python scripts/record_run.py RUN_DIR gpu --root <the device checkout> && python scripts/benchmark_numbers.py --write
#
# Needs importable: torch (CUDA), torchvision, onnx, onnxruntime, pandas, matplotlib, scikit-image, psutil, pyyaml,
# tqdm, ipywidgets, tritonclient, papermill, ipykernel; a Triton server ($TRITON_SERVER_BIN or on PATH) and perf_analyzer on
# PATH. Building the PyTorch and ONNX Runtime backends needs cmake, a C++ compiler, nvcc and the Python headers; without network,
# TRITON_SOURCE_DIR names a folder with the release's source archives (see helpers/native_backends.py).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${1:?usage: $0 RUN_DIR [NOTEBOOK_PREFIX ...]}
shift
# Triton's Python backend activates EXECUTION_ENV_PATH/bin/activate, so the notebooks must run from a virtual
# environment: python3's own when it is one, else a new one that sees the system's packages.
OWN=$(python3 -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')
VENV=${VENV:-${OWN:-$PWD/build/gpu-venv}}
[ -x "$VENV/bin/python" ] || python3 -m venv --without-pip --system-site-packages "$VENV"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# The notebooks' progress bars (tqdm.auto) need ipywidgets (pinned in requirements.txt): without it every notebook
# records "TqdmWarning: IProgress not found" in its outputs, which tests/test_site.py refuses in docs/runs.
"$VENV/bin/python" -c 'import ipywidgets' 2>/dev/null || {
  echo "gpu_local_run.sh: ipywidgets is not importable in $VENV: install the version requirements.txt pins" >&2
  exit 1
}
# Triton 2.51's Python backend cannot exchange tensors with numpy 2 (helpers/pyenv.py): where this environment has
# numpy 2, the Python models (notebook 14's JPEG step) get an environment of their own with the series' numpy 1.x.
# Without network, WHEEL_DIR (default: .wheels when present) holds the numpy wheel.
if ! "$VENV/bin/python" -c 'import numpy, sys; sys.exit(int(numpy.__version__.split(".")[0]) >= 2)'; then
  export TUTORIAL_PYTHON_ENV=${TUTORIAL_PYTHON_ENV:-$PWD/build/triton-python-env}
  WHEEL_DIR=${WHEEL_DIR:-$( [ -d .wheels ] && echo "$PWD/.wheels" || true )}
  [ -x "$TUTORIAL_PYTHON_ENV/bin/python" ] ||
    "$VENV/bin/python" -m helpers.pyenv "$TUTORIAL_PYTHON_ENV" ${WHEEL_DIR:+--find-links "$WHEEL_DIR"}
fi
[ $# -gt 0 ] || set -- 10 11 12 13
# Triton's PyTorch backend, built with CUDA for this server, and its ONNX Runtime backend, built for the CPU against
# this environment's onnxruntime wheel (sources from GitHub, or $TRITON_SOURCE_DIR offline)
"$VENV/bin/python" -m helpers.native_backends --strict pytorch onnxruntime
exec "$VENV/bin/python" -m helpers.series --profile gpu-local --run-dir "$RUN_DIR" --only "$@"
