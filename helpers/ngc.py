"""NGC container images and the `docker run` argument lists the series uses, all from one release tag."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# One release tag for every NGC container: the Triton server, its SDK image, TensorRT and PyTorch.
# An engine built by one TensorRT version only loads in the same version, so they must move together.
NGC_TAG = "24.05"

# TensorRT inside NGC releases, from NVIDIA's support matrix; for display only. Before a build, the notebooks read
# the version from the image itself (convert.tensorrt_version_in_image), so a tag missing here is no guess.
TENSORRT_IN_RELEASE = {"22.11": "8.5.1", "24.05": "10.0.1", "24.10": "10.5.0", "25.01": "10.8.0"}

# Oldest NGC release whose CUDA supports a compute capability major version (Blackwell: 10.x, 12.x).
FIRST_RELEASE_FOR_CC_MAJOR = {10: "25.01", 12: "25.01"}
# Driver a release's CUDA needs on any GPU (NVIDIA's release notes for each container).
MIN_DRIVER = {"22.11": 520, "24.05": 545, "24.10": 560, "25.01": 570}
# Data-center GPUs may also run a release on older long-term driver branches (CUDA forward compatibility), from the
# same release notes: branch -> the oldest driver of that branch. 24.05: "470.57 (or later R470), 525.85 (or later
# R525), 535.86 (or later R535), or 545.23 (or later R545)".
DATACENTER_BRANCHES = {
    "24.05": {470: (470, 57), 525: (525, 85), 535: (535, 86)},
    "24.10": {470: (470, 57), 525: (525, 85), 535: (535, 86), 545: (545, 23)},
    "25.01": {470: (470, 57), 525: (525, 85), 535: (535, 86), 545: (545, 23), 550: (550, 54), 560: (560, 35)},
}
# Data-center GPUs by name (nvidia-smi's): the forward-compatibility branches do not apply to GeForce/RTX workstation.
_DATACENTER = re.compile(r"\b(A2|A10G?|A16|A30|A40|A100|A800|H20|H100|H200|H800|GH200|B100|B200|GB200|L4|L20|L40S?|"
                         r"T4|V100|P100|P40|P4)\b|Tesla")

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


SERIES_TAG_VARIABLE = "TUTORIAL_NGC_TAG"


def series_tag(tag: str = "series") -> str:
    """The NGC release tag to use: `tag` itself, or for "series" the one tag set for the whole series
    ($TUTORIAL_NGC_TAG, which `./tutorial series --tag` and `./tutorial lab --tag` set; default NGC_TAG)."""
    if tag == "series":
        tag = os.environ.get(SERIES_TAG_VARIABLE) or NGC_TAG
    return check_tag(tag)


def series_tag_source() -> str:
    """Where series_tag("series") comes from, in words (notebook 00 prints it)."""
    value = os.environ.get(SERIES_TAG_VARIABLE)
    return f"${SERIES_TAG_VARIABLE}={value}" if value else f"the series' default (helpers/ngc.py NGC_TAG={NGC_TAG})"


def image(kind: str, tag: str = NGC_TAG) -> str:
    """Full image name of one NGC container (`tritonserver`, `sdk`, `tensorrt`, `pytorch`) at `tag`."""
    if kind not in IMAGES:
        raise ValueError(f"image kind must be one of {sorted(IMAGES)}; got {kind!r}")
    return IMAGES[kind].format(tag=check_tag(tag))


def tensorrt_version(tag: str = NGC_TAG) -> str | None:
    """TensorRT version shipped in the NGC release `tag`, or None when this series has not recorded it."""
    return TENSORRT_IN_RELEASE.get(check_tag(tag))


# One GPU by default: with `--gpus all`, an instance group of count N places N instances on *every* GPU, and an
# engine built on one GPU model may not load on another. Pick another with the notebooks' `gpu` parameter.
DEFAULT_GPUS = "device=0"


def gpus_flag(gpu: int | str | None) -> str | None:
    """`--gpus` value for one GPU index (0, 1, ...), `all`, or None for no GPU."""
    if gpu is None:
        return None
    if str(gpu) == "all":
        return "all"
    if not str(gpu).isdigit():
        raise ValueError(f"gpu must be a GPU index like 0, 'all', or None; got {gpu!r}")
    return f"device={gpu}"


def _driver(version: str) -> tuple[int, int]:
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0]
    return parts[0], parts[1]


def driver_problem(tag: str, name: str, driver: str) -> str | None:
    """Why `driver` cannot run NGC `tag` on the GPU `name`, or None: the release's minimum, or on a data-center GPU
    one of the long-term branches NVIDIA lists for it."""
    need = MIN_DRIVER.get(tag)
    if not need or not driver[:1].isdigit():
        return None
    have = _driver(driver)
    if have[0] >= need:
        return None
    branch = DATACENTER_BRANCHES.get(tag, {}).get(have[0])
    if _DATACENTER.search(name) and branch:
        if have >= branch:
            return None
        return (f"driver {driver} is older than {branch[0]}.{branch[1]}, the oldest of the R{branch[0]} branch NGC "
                f"{tag} accepts on a data-center GPU")
    allowed = ", ".join(f"{b[0]}.{b[1]}+ (R{k})" for k, b in DATACENTER_BRANCHES.get(tag, {}).items())
    return (f"driver {driver} is older than the {need} that NGC {tag}'s CUDA needs"
            + (f" (data-center GPUs may use {allowed}; {name} is not one)" if allowed else ""))


def gpu_problems(tag: str, gpus: Sequence[Mapping[str, str]], gpu: int | str | None = 0) -> list[str]:
    """Why the NGC release `tag` cannot use the GPU the series will use (`gpu`: an index, 'all', or None for every
    GPU listed), by compute capability and driver; [] when nothing is known against it. `gpus` as
    runtime.gpu_properties() gives them."""
    chosen = [g for g in gpus if gpu in (None, "all") or str(g.get("index")) == str(gpu)]
    problems = []
    for g in chosen:
        cc = g.get("compute_cap", "")
        major = int(cc.split(".")[0]) if cc[:1].isdigit() else 0
        first = FIRST_RELEASE_FOR_CC_MAJOR.get(major)
        if first and check_tag(tag) < first:
            problems.append(f"GPU {g.get('index', '?')} ({g.get('name', '?')}) has compute capability {cc}, "
                            f"which NGC {tag} does not support; use ngc_tag='{first}' or newer")
        problem = driver_problem(tag, g.get("name", ""), g.get("driver", ""))
        if problem:
            problems.append(f"GPU {g.get('index', '?')} ({g.get('name', '?')}): {problem}")
    return problems


def docker_run(
    image_name: str,
    command: Sequence[str] = (),
    *,
    volumes: Mapping[str | Path, str] | None = None,
    ports: Mapping[int, int] | None = None,
    host: str = "127.0.0.1",
    gpus: str | None = DEFAULT_GPUS,
    name: str | None = None,
    network: str | None = None,
    workdir: str | None = None,
    interactive: bool = False,
    as_user: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """Argument list for `docker run --rm`: absolute volume paths, ports published on `host` only; with as_user, the
    container runs as the calling user (files it writes into the mounts are the user's, and an NFS home with
    root_squash stays writable), with HOME in /tmp since that user has no home in the image."""
    args = ["docker", "run", "--rm"]
    if interactive:
        args.append("-it")
    if name:
        args += ["--name", name]
    if gpus:
        args += ["--gpus", f'"{gpus}"' if gpus.startswith("device=") and "," in gpus else gpus]
    if network:
        args += ["--network", network]
    if as_user:
        args += ["--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp"]
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


_OPTIONS_WITH_VALUE = {"--name", "--gpus", "--network", "--user", "-p", "-v", "-w", "-e", "--shm-size", "--ulimit"}


def image_of(args: Sequence[str]) -> str:
    """The image a `docker run` argument list runs (the first argument after the options)."""
    args = list(args)
    if args[:2] != ["docker", "run"]:
        raise ValueError(f"expected a `docker run ...` argument list; got {as_shell(args[:3])} ...")
    i = 2
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _OPTIONS_WITH_VALUE else 1
    if i >= len(args):
        raise ValueError(f"no image in {as_shell(args)}")
    return args[i]


def image_present(image_name: str) -> bool:
    """Whether the Docker engine already has the image (`docker image inspect`)."""
    return subprocess.run(["docker", "image", "inspect", image_name], capture_output=True).returncode == 0


def ensure_image(image_name: str) -> None:
    """Pull the image unless the engine has it, showing docker's progress; a failed pull raises with docker's words.

    Run before any timeout starts: an NGC image is 10-20 GB, and `docker run` would pull it silently."""
    if image_present(image_name):
        return
    print(f"pulling {image_name} (first use; NGC images are large, this can take many minutes) ...", flush=True)
    proc = subprocess.Popen(["docker", "pull", image_name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = []
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-15:]
        if not line.startswith(" ") or "Pull complete" in line or "Status" in line or "Digest" in line:
            print(line.rstrip(), flush=True)
    if proc.wait() != 0:
        raise RuntimeError(f"docker pull {image_name} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def pull_all(tag: str = NGC_TAG) -> list[str]:
    """Pull every image the series uses at `tag` (for a workshop room: do it the day before)."""
    names = [image(kind, tag) for kind in IMAGES]
    for name in names:
        ensure_image(name)
    return names


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Pull the NGC images the series uses.")
    parser.add_argument("action", choices=["pull", "list"])
    parser.add_argument("--tag", default="series", help="an NGC release tag (default: the series' tag)")
    ns = parser.parse_args()
    tag = series_tag(ns.tag)
    if ns.action == "list":
        print("\n".join(image(kind, tag) for kind in IMAGES))
    else:
        print("pulled:", ", ".join(pull_all(tag)))
    sys.exit(0)
