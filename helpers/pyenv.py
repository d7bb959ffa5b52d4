"""The Python environment Triton's Python backend runs models in on the local server (`EXECUTION_ENV_PATH`), and a
check that its numpy can exchange tensors with the backend's stub.

Triton 2.51's Python backend (release r24.10, the server of the local world) was built with pybind11 2.10, which
predates numpy 2: with numpy 2 in the model's environment every input arrives as 0xff bytes and every output empty,
without an error (python_backend pull request 384, fixed in r24.11). The series pins numpy 1.26.4; a machine whose
PyTorch comes with numpy 2 gives the Python models an environment of their own:

    python -m helpers.pyenv build/triton-python-env [--find-links DIR]
    export TUTORIAL_PYTHON_ENV=$PWD/build/triton-python-env
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ENV_VAR = "TUTORIAL_PYTHON_ENV"
NUMPY1 = "numpy==1.26.4"  # the pin of requirements.txt (a test keeps them equal)
UPSTREAM = "https://github.com/triton-inference-server/python_backend/pull/384"


def python_env() -> Path:
    """The environment Python-backend models run in: $TUTORIAL_PYTHON_ENV, else this process's environment."""
    return Path(os.environ.get(ENV_VAR) or sys.prefix)


def numpy_version(env: Path) -> str:
    """numpy's version as the environment `env` imports it ("" when it has none)."""
    if env.resolve() == Path(sys.prefix).resolve():
        import numpy

        return numpy.__version__
    python = env / "bin" / "python"
    if not python.exists():
        raise FileNotFoundError(f"{ENV_VAR} must name a Python environment with bin/python; {python} does not exist")
    out = subprocess.run([str(python), "-c", "import numpy; print(numpy.__version__)"],
                         capture_output=True, text=True, timeout=120)
    return out.stdout.strip() if out.returncode == 0 else ""


def stub_handles_numpy2(stub: Path) -> bool:
    """Whether a Python-backend stub binary was built with a pybind11 that knows numpy 2's `numpy._core` (>= 2.12)."""
    data = stub.read_bytes()
    return b"numpy._core" in data or b"numpy.core.multiarray" not in data


def environment_problem(backend_dir: Path, env: Path | None = None) -> str | None:
    """Why the Python backend in `backend_dir` cannot run models in `env` (None when it can)."""
    env = env or python_env()
    stub = backend_dir / "python" / "triton_python_backend_stub"
    if not stub.is_file() or stub_handles_numpy2(stub):
        return None
    version = numpy_version(env)
    if not version or int(version.split(".")[0]) < 2:
        return None
    return (f"Python-backend models would run in {env}, which has numpy {version}; this server's Python backend "
            f"stub ({stub}) was built with a pybind11 older than 2.12, which cannot exchange tensors with numpy 2: "
            f"inputs arrive as 0xff bytes and outputs empty, without an error ({UPSTREAM}, fixed in Triton 24.11). "
            f"Give the models an environment with numpy 1.x, from the checkout: "
            f"`python -m helpers.pyenv build/triton-python-env` "
            f"(add `--find-links DIR` without network), then `export {ENV_VAR}=$PWD/build/triton-python-env`")


def make_env(target: Path, find_links: Path | None = None, numpy: str = NUMPY1) -> Path:
    """A virtual environment at `target` that sees this environment's packages but imports `numpy` of its own."""
    target = Path(target).resolve()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    ask = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(target / "bin" / "python"), "-c", ask], capture_output=True, text=True,
                               check=True).stdout.strip())
    # this environment's package folders, searched after the new one's own (where numpy 1.x goes)
    parents = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    folders = dict.fromkeys([sysconfig.get_paths()["purelib"], *parents])
    (site / "_parent_environment.pth").write_text("\n".join(folders) + "\n")
    source = ["--no-index", "--find-links", str(find_links)] if find_links else []
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                           *source, numpy], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install {numpy} into {site}: {done.stderr.strip()[-600:]}")
    found = numpy_version(target)
    if not found.startswith("1."):
        raise RuntimeError(f"expected numpy 1.x in {target} after installing {numpy}; it imports numpy {found or 'none'}")
    return target


def main(argv: list[str] | None = None) -> int:
    """Command line: make the environment and print the line that selects it."""
    parser = argparse.ArgumentParser(description="An environment with numpy 1.x for Triton 2.51's Python backend")
    parser.add_argument("target", type=Path)
    parser.add_argument("--find-links", type=Path, help="a folder holding the numpy wheel (no network)")
    args = parser.parse_args(argv)
    env = make_env(args.target, args.find_links)
    print(f"numpy {numpy_version(env)} in {env}; select it with:\nexport {ENV_VAR}={env}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
