"""NGC container images and the `docker run` argument lists the series uses, all from one release tag."""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

# One release tag for every NGC container: the Triton server, its SDK image, TensorRT and PyTorch.
# An engine built by one TensorRT version only loads in the same version, so they must move together.
NGC_TAG = "24.05"

# TensorRT inside each NGC release we have checked (NGC support matrix); others are reported as unknown.
TENSORRT_IN_RELEASE = {"22.11": "8.5.1", "24.05": "10.0.1"}

IMAGES = {
    "tritonserver": "nvcr.io/nvidia/tritonserver:{tag}-py3",
    "sdk": "nvcr.io/nvidia/tritonserver:{tag}-py3-sdk",
    "tensorrt": "nvcr.io/nvidia/tensorrt:{tag}-py3",
    "pytorch": "nvcr.io/nvidia/pytorch:{tag}-py3",
}


def check_tag(tag: str) -> str:
    """Return `tag` if it looks like an NGC release tag (YY.MM), else raise."""
    if not re.fullmatch(r"\d{2}\.\d{2}", tag):
        raise ValueError(f"NGC tag must look like '24.05' (YY.MM); got {tag!r}")
    return tag


def image(kind: str, tag: str = NGC_TAG) -> str:
    """Full image name of one NGC container (`tritonserver`, `sdk`, `tensorrt`, `pytorch`) at `tag`."""
    if kind not in IMAGES:
        raise ValueError(f"image kind must be one of {sorted(IMAGES)}; got {kind!r}")
    return IMAGES[kind].format(tag=check_tag(tag))


def tensorrt_version(tag: str = NGC_TAG) -> str | None:
    """TensorRT version shipped in the NGC release `tag`, or None when this series has not recorded it."""
    return TENSORRT_IN_RELEASE.get(check_tag(tag))


def docker_run(
    image_name: str,
    command: Sequence[str] = (),
    *,
    volumes: Mapping[str | Path, str] | None = None,
    ports: Mapping[int, int] | None = None,
    host: str = "127.0.0.1",
    gpus: str | None = "all",
    name: str | None = None,
    network: str | None = None,
    workdir: str | None = None,
    interactive: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """Argument list for `docker run --rm`: absolute volume paths, ports published on `host` only."""
    args = ["docker", "run", "--rm"]
    if interactive:
        args.append("-it")
    if name:
        args += ["--name", name]
    if gpus:
        args += ["--gpus", gpus]
    if network:
        args += ["--net", network]
    for host_port, container_port in (ports or {}).items():
        published = f"{host}:{host_port}" if host else str(host_port)
        args += ["-p", f"{published}:{container_port}"]
    for src, dst in (volumes or {}).items():
        src_path = Path(src).expanduser().resolve()
        if not src_path.exists():
            raise FileNotFoundError(f"volume source must exist on the host; {src_path} does not")
        if not dst.startswith("/"):
            raise ValueError(f"volume target must be an absolute path in the container; got {dst!r}")
        args += ["-v", f"{src_path}:{dst}"]
    if workdir:
        args += ["-w", workdir]
    args += list(extra)
    args.append(image_name)
    args += list(command)
    return args


def as_shell(args: Sequence[str]) -> str:
    """The argument list as one line a user can paste into a terminal."""
    return shlex.join([str(a) for a in args])
