"""Where Triton can run here: Docker + NVIDIA GPU (the NGC containers) or a local `tritonserver` binary."""
from __future__ import annotations

import json

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import ngc

RUNTIMES = ("auto", "docker", "local")


def _ok(cmd: list[str], timeout: float = 15) -> tuple[bool, str]:
    """Run a probe command; return (succeeded, first line of its output or error)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    text = out.stdout.strip() if out.returncode == 0 else (out.stderr.strip() or out.stdout.strip())
    return out.returncode == 0, (text.splitlines() or [f"exit code {out.returncode}, no output"])[0]


def nvidia_gpu() -> tuple[bool, str]:
    """Whether `nvidia-smi` sees a GPU, with its name, driver and memory, or the reason it does not."""
    if not shutil.which("nvidia-smi"):
        return False, "nvidia-smi not found"
    ok, line = _ok(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    return ok, (f"{line} (name, driver, memory)" if ok else line)


def docker_engine() -> tuple[bool, str]:
    """Whether a Docker engine answers (`docker info`, read once: ngc.docker_info), with its version or the reason
    it does not."""
    if not shutil.which("docker"):
        return False, "docker CLI not found"
    info = ngc.docker_info()
    if not info.ok:
        return False, f"docker CLI present but no engine answers ({info.error})"
    return True, f"engine {info.fields.get('ServerVersion', '?')}"


def docker_rootless() -> tuple[bool, str]:
    """Whether the Docker engine runs rootless or remaps user namespaces (docker_userns), with what that breaks for
    the series: either way its containers cannot have this host's network and user ids (ngc.docker_info)."""
    info = ngc.docker_info()
    if not info.rootless:
        return docker_userns() if info.userns else (False, "not rootless")
    return True, ("the Docker engine runs rootless (`docker info` lists name=rootless): its `--network host` is the "
                  "rootless daemon's network namespace, not this host's, so clients here cannot reach the server on "
                  "127.0.0.1, and `--user` maps to a subordinate uid; use a rootful engine for the docker path")


def docker_userns() -> tuple[bool, str]:
    """Whether the Docker engine remaps user namespaces, with what that breaks for the series (ngc.docker_info)."""
    if not ngc.docker_info().userns:
        return False, "no userns-remap"
    return True, ("the Docker engine remaps user namespaces (`docker info` lists name=userns): such an engine cannot "
                  "share the host's network with a container (`--network host`, which every server and client "
                  "container of the series uses), and `--user` maps to a subordinate uid (Docker's userns-remap "
                  "page, 'User namespace known limitations'); use an engine without userns-remap for the docker path")


def container_toolkit() -> tuple[bool, str]:
    """Whether Docker can give containers a GPU (the NVIDIA Container Toolkit), or why not."""
    info = ngc.docker_info()
    if info.ok and "nvidia" in (info.fields.get("Runtimes") or {}):
        return True, "NVIDIA Container Toolkit (nvidia runtime registered)"
    hook = shutil.which("nvidia-container-runtime-hook") or shutil.which("nvidia-ctk")
    if hook:
        return True, f"NVIDIA Container Toolkit ({hook})"
    return False, ("the NVIDIA Container Toolkit is missing (no nvidia runtime in `docker info`, no "
                   "nvidia-container-runtime-hook): every `docker run --gpus` would fail with 'could not select "
                   "device driver \"\" with capabilities: [[gpu]]'; install the toolkit and restart Docker")


def _query_gpus(fields: Sequence[str]) -> tuple[list[dict[str, str]], str]:
    """One `nvidia-smi --query-gpu` of `fields`: a row per GPU, or [] and nvidia-smi's words when it fails."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"{type(exc).__name__}: {exc}"
    if out.returncode != 0:
        text = (out.stdout.strip() or out.stderr.strip()).splitlines()
        return [], (text[0] if text else f"exit code {out.returncode}, no output")
    rows = [[part.strip() for part in line.split(",")] for line in out.stdout.strip().splitlines()]
    return [dict(zip(fields, row)) for row in rows if len(row) == len(fields)], ""


def gpu_properties() -> list[dict[str, str]]:
    """Each visible NVIDIA GPU's index, name, driver and compute capability (nvidia-smi), or [] without one.

    The driver is asked for on its own: a driver before R510 rejects the whole query when it names `compute_cap`
    ("Field "compute_cap" is not a valid field to query"), and the driver is the fact that catches an old driver;
    its compute capability is then "" (ngc.gpu_problems says so, or takes it from a data-center GPU's name)."""
    if not shutil.which("nvidia-smi"):
        return []
    gpus, _ = _query_gpus(("index", "name", "driver_version"))
    compute, why = _query_gpus(("index", "compute_cap"))
    by_index = {row["index"]: row["compute_cap"] for row in compute}
    return [{"index": g["index"], "name": g["name"], "compute_cap": by_index.get(g["index"], ""),
             "driver": g["driver_version"], **({"compute_cap_error": why} if why else {})} for g in gpus]


@dataclass
class LocalTriton:
    """A `tritonserver` binary on this machine, its backend directory and the backends found there."""

    binary: Path
    backend_dir: Path
    source: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def backends(self) -> list[str]:
        """Backend names present in the backend directory (sub-folders holding a `libtriton_*.so`), less those that
        $TUTORIAL_WITHOUT_BACKENDS names (comma-separated): their models are then served as on a machine that could
        not build them, by the labelled Python-backend stand-in."""
        left_out = {b.strip() for b in os.environ.get("TUTORIAL_WITHOUT_BACKENDS", "").split(",") if b.strip()}
        return [b for b in list_backends(self.backend_dir) if b not in left_out]

    @property
    def cpu_only_backends(self) -> list[str]:
        """Backends that `./tutorial setup` built without GPU support (their build stamp says `cuda: cpu`)."""
        found = []
        for name in self.backends:
            stamp = self.backend_dir / name / BUILD_STAMP
            if stamp.is_file() and json.loads(stamp.read_text()).get("key", {}).get("cuda") == "cpu":
                found.append(name)
        return found


# Written by helpers.native_backends beside each backend it builds: what the build depended on.
BUILD_STAMP = "built-by-triton-tutorials.json"


def list_backends(backend_dir: Path) -> list[str]:
    """Names of the backends installed in a Triton backend directory."""
    if not backend_dir.is_dir():
        return []
    return sorted(d.name for d in backend_dir.iterdir() if d.is_dir() and any(d.glob("libtriton_*.so")))


def _pytriton_bundle() -> LocalTriton | None:
    """The Triton server bundled in the nvidia-pytriton wheel, with a Python-backend directory assembled for it."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    root = purelib / "pytriton" / "tritonserver"
    binary = root / "bin" / "tritonserver"
    stub = root / "python_backend_stubs" / f"{sys.version_info.major}.{sys.version_info.minor}" / "triton_python_backend_stub"
    if not binary.exists():
        return None
    if not stub.exists():
        raise FileNotFoundError(f"nvidia-pytriton has no Python backend stub for Python "
                                f"{sys.version_info.major}.{sys.version_info.minor}: expected {stub}")
    # Triton wants backends/python/{libtriton_python.so, triton_python_backend_utils.py, stub} in one folder.
    backend_dir = Path(sys.prefix) / "triton-backends"
    python_dir = backend_dir / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for src in [*sorted((root / "backends" / "python").iterdir()), stub]:
        link = python_dir / src.name
        if not link.exists():
            link.symlink_to(src)
    libs = purelib / "nvidia_pytriton.libs"
    ld = os.pathsep.join(p for p in [str(libs), os.environ.get("LD_LIBRARY_PATH", "")] if p)
    built = [b for b in list_backends(backend_dir) if b != "python"]
    source = "bundled in the nvidia-pytriton wheel; backends: python" + "".join(f", {b} (built by setup)" for b in built)
    return LocalTriton(binary, backend_dir, source,
                       {"LD_LIBRARY_PATH": ld})


def _backend_dir_near(binary: Path) -> Path:
    """The backend directory that belongs to a tritonserver binary ($TRITON_BACKEND_DIR wins)."""
    if os.environ.get("TRITON_BACKEND_DIR"):
        return Path(os.environ["TRITON_BACKEND_DIR"])
    real = binary.resolve()
    for cand in (real.parent.parent / "backends", real.parent.parent / "triton" / "backends",
                 Path("/opt/tritonserver/backends")):
        if cand.is_dir():
            return cand
    return real.parent.parent / "backends"


def find_local_triton() -> LocalTriton | None:
    """First Triton server found: $TRITON_SERVER_BIN, `tritonserver` on PATH, /opt/tritonserver, nvidia-pytriton."""
    env_bin = os.environ.get("TRITON_SERVER_BIN")
    if env_bin:
        path = Path(env_bin)
        if not path.exists():
            raise FileNotFoundError(f"TRITON_SERVER_BIN points to {path}, which does not exist")
        return LocalTriton(path, _backend_dir_near(path), "$TRITON_SERVER_BIN")
    on_path = shutil.which("tritonserver")
    if on_path:
        return LocalTriton(Path(on_path), _backend_dir_near(Path(on_path)), "tritonserver on PATH")
    opt = Path("/opt/tritonserver/bin/tritonserver")
    if opt.exists():
        return LocalTriton(opt, Path("/opt/tritonserver/backends"), "/opt/tritonserver (NGC container)")
    return _pytriton_bundle()


@dataclass
class RuntimeChoice:
    """The runtime the notebooks use and why it was picked."""

    name: str
    reason: str
    local: LocalTriton | None = None

    def __str__(self) -> str:
        return f"runtime: {self.name} ({self.reason})"


def choose_runtime(requested: str = "auto", tag: str | None = "series", gpu: int | str | None = "series") -> RuntimeChoice:
    """Resolve `auto`/`docker`/`local`: docker where a rootful Docker, the NVIDIA Container Toolkit and the GPU the
    series will use (`gpu`, an index, 'all' or "series": ngc.series_gpu) suit the NGC release `tag`, else local (each
    reason printed)."""
    if requested not in RUNTIMES:
        raise ValueError(f"runtime must be one of {RUNTIMES}; got {requested!r}")
    tag = ngc.series_tag(tag or "series")
    docker_ok, docker_why = docker_engine() if requested != "local" else (False, "not asked for")
    gpu_ok, gpu_why = nvidia_gpu() if requested != "local" else (False, "not asked for")
    toolkit_ok, toolkit_why = container_toolkit() if docker_ok else (False, "no Docker engine")
    rootless, rootless_why = docker_rootless() if docker_ok else (False, "no Docker engine")
    problems = ngc.gpu_problems(tag, gpu_properties(), gpu) if docker_ok and gpu_ok else []
    if rootless:
        problems = [rootless_why, *problems]
    if requested == "docker":
        if not docker_ok:
            raise RuntimeError(f"runtime='docker' needs a Docker engine; {docker_why}")
        if not toolkit_ok:
            raise RuntimeError(f"runtime='docker' needs GPUs in containers; {toolkit_why}")
        if problems:
            raise RuntimeError(f"runtime='docker' with NGC {tag}: " + "; ".join(problems))
        return RuntimeChoice("docker", f"asked for; Docker {docker_why}; {toolkit_why}; GPU: {gpu_why}")
    if requested == "auto" and docker_ok and gpu_ok and toolkit_ok and not problems:
        return RuntimeChoice("docker", f"Docker {docker_why}, {toolkit_why} and GPU {gpu_why}")
    if requested == "auto" and docker_ok and (gpu_ok or rootless):
        docker_why = f"{docker_why}, but " + "; ".join(problems if toolkit_ok else
                                                        [toolkit_why, *([rootless_why] if rootless else [])])
    local = find_local_triton()
    if local is None:
        raise RuntimeError("no Triton server found: set TRITON_SERVER_BIN, put tritonserver on PATH, "
                           "or install the pinned requirements (nvidia-pytriton bundles one)")
    if requested == "local":
        reason = f"asked for; {local.binary} ({local.source})"
    else:
        reason = (f"Docker: {docker_why}; GPU: {gpu_why}; so the local server {local.binary} ({local.source})")
    return RuntimeChoice("local", reason, local)
