"""NGC container images and the `docker run` argument lists the series uses, all from one release tag."""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# One release tag for every NGC container: the Triton server, its SDK image, TensorRT and PyTorch.
# An engine built by one TensorRT version only loads in the same version, so they must move together.
NGC_TAG = "24.05"


_TRT_10_1_MATRIX = "https://docs.nvidia.com/deeplearning/tensorrt/archives/tensorrt-1010/support-matrix/index.html"
_TRT_10_5_NOTES = "https://docs.nvidia.com/deeplearning/tensorrt/latest/getting-started/release-notes-10/10.5.0.html"
# TensorRT's own compute-capability floor, keyed by the first TensorRT (major, minor) that has it: TensorRT 10.0 to
# 10.4 are "compiled to support all NVIDIA hardware with capability SM 7.0 or higher" (_TRT_10_1_MATRIX); TensorRT
# 10.5 removed Volta: "NVIDIA Volta support (GPUs with compute capability 7.0) has been removed starting with TensorRT
# 10.5" (_TRT_10_5_NOTES, Announcements; 10.0.1-10.4 announced it as deprecated). Read 2026-12.
TENSORRT_COMPUTE_FLOOR = {(10, 0): (7, 0), (10, 5): (7, 5)}


def _release_of(version: str) -> tuple[int, ...]:
    """(major, minor, ...) of a version string such as "10.5.0.18"."""
    return tuple(int(p) for p in re.findall(r"\d+", version))


def tensorrt_compute_floor(version: str | None) -> tuple[int, int] | None:
    """The oldest compute capability TensorRT `version` builds for (TENSORRT_COMPUTE_FLOOR), or None when the
    version is unknown or older than any floor recorded."""
    if not version:
        return None
    found = [floor for first, floor in sorted(TENSORRT_COMPUTE_FLOOR.items()) if _release_of(version)[:2] >= first]
    return found[-1] if found else None


@dataclass(frozen=True)
class ReleasePolicy:
    """What one NGC release asks of the GPU and its driver, and the TensorRT it ships, from NVIDIA's notes."""

    server_compute: tuple[int, int]  # the oldest compute capability the release's server supports (its notes)
    min_driver: int               # the driver branch the release's CUDA needs on any GPU
    # data-center GPUs may also use these older branches (CUDA forward compatibility): branch -> its oldest driver
    datacenter_branches: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    tensorrt: str | None = None   # for display and the stale-engine check; builds read it from the image itself
    source: str = ""
    tensorrt_note: str = ""       # why `tensorrt` is None: what was read and did not say it
    # the PyTorch (major.minor) whose libtorch the release's PyTorch backend links, for the TorchScript check; with
    # pytorch_floor, only the least it can be (the release's own number was not read): pytorch_note says why
    pytorch: str | None = None
    pytorch_floor: bool = False
    pytorch_note: str = ""

    @property
    def min_compute(self) -> tuple[int, int]:
        """The oldest compute capability every step of the series runs on: the server's floor or its TensorRT's
        (tensorrt_compute_floor), whichever is higher; min_compute(tag) also covers an unrecorded TensorRT."""
        return max(self.server_compute, tensorrt_compute_floor(self.tensorrt) or self.server_compute)


_NOTES = "https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-{}.html"
_CUDA_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
_TRITON_MATRIX = ("https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/introduction/"
                  "compatibility.html")
_TRT_2602_UNKNOWN = ("not in the release notes read (the 26.02 notes' contents list and the TensorRT container's 26.02 "
                     "notes were not available; Triton's compatibility matrix gives 10.13.3.9 only for the "
                     "trtllm-python-py3 image, built on CUDA 13.0.2, not the -py3 images' 13.1.1)")
_TRITON_2602 = "https://github.com/triton-inference-server/server/tree/v2.66.0"
_CUDA12_BRANCHES = {470: (470, 57), 525: (525, 85), 535: (535, 86), 545: (545, 23)}

# Per release, from the Triton container release notes ("Driver Requirements", "GPU Requirements"), read 2026-12:
# 24.05 (_NOTES.format("24-05")): CUDA 12.4, driver 545+, or on a data-center GPU 470.57+ (R470), 525.85+ (R525),
#   535.86+ (R535), 545.23+ (R545); the server supports compute capability 6.0+, but the series builds with TensorRT
#   10, "compiled to support all NVIDIA hardware with capability SM 7.0 or higher" (_TRT_10_1_MATRIX), so a Pascal
#   GPU (P100, P4, P40) would pass the server's floor and fail in trtexec: the series' floor (min_compute) is the
#   higher of the server's and its TensorRT's (TENSORRT_COMPUTE_FLOOR), 7.0 here.
# 24.10 (_NOTES.format("24-10")): CUDA 12.6.2, driver 560+, the same four data-center branches; the server 6.0+, but
#   its TensorRT 10.5.0 dropped Volta (_TRT_10_5_NOTES): 7.5, a V100 is refused.
# 25.01 (_NOTES.format("25-01")): CUDA 12.8.0, driver 560+ (the notes' number; the branches are the same four),
#   compute capability 7.5+ (Turing and newer: a V100 is refused). TensorRT 10.8.0.43 (Triton's compatibility matrix).
#   The notes' 560 is kept although CUDA 12.8's own driver table names 570.26: any CUDA 12.x runs on a driver >= 525
#   "with limited feature-set" (_CUDA_COMPAT, minor version compatibility), so below 570 is not a certain failure,
#   while 26.02's CUDA 13 needs 580 outright (no older major driver). Likewise 24.10's allow list keeps R545.
# 26.02 (_NOTES.format("26-02")): CUDA 13.1.1, compute capability 7.5+ (Turing to Blackwell). Its notes say "driver 575
#   or later" and list the CUDA 12 data-center branches again, but CUDA 13.x needs driver >= 580 (_CUDA_COMPAT, table 1:
#   "CUDA 13.x >= 580"), and no R470-R545 branch runs CUDA 13: the policy takes 580 and no older branch.
#   Its TensorRT is not recorded (_TRT_2602_UNKNOWN): the notes' list of what the container includes and the TensorRT
#   container's own 26.02 notes were not available to this series, and the one 26.02 TensorRT version
#   Triton's compatibility matrix (_TRITON_MATRIX) gives, 10.13.3.9, is the trtllm-python-py3 image's, built on CUDA
#   13.0.2 where the notes give the -py3 images CUDA 13.1.1: another base, so not the version of the images the series
#   uses. Notebooks 03 and 12 read it from the image before a build, and the stale-engine check reads it from the
#   TensorRT image when that is on the machine (convert.tensorrt_version_of). Triton's defaults the series relies on
#   are as in 24.05 there (_TRITON_2602, the 26.02 server's sources, v2.66.0): every tritonserver flag the launcher
#   passes is still in src/command_line_parser.cc, and build.py gives the Python backend numpy<2 and virtualenv only,
#   so 14's JPEG step is left out as with 24.05. trtexec's flags across TensorRT 10 and 11: convert.py.
# 22.11 (the articles' tag, TensorRT 8.5.1) was in the series' first table; it is older than OLDEST_TAG, so it is gone.
# The PyTorch backend of a tritonserver:<tag>-py3 image links the libtorch of the NGC PyTorch container of the same
# tag (server build.py: `nvcr.io/nvidia/pytorch:{upstream_container_version}-py3`, at v2.46.0 for 24.05); its PyTorch
# is in the PyTorch container's release notes (_PYTORCH_NOTES), "PyTorch container image version YY.MM is based on":
# 24.05: 2.4.0a0+07cecf4 (NVIDIA's 24.05 build of it is named torch-2.4.0a0+07cecf4168.nv24.05; the review of
#   2026-12-03 read it with server build.py v2.46.0); 25.12: 2.10.0a0+b4e4ee81d3 (_PYTORCH_NOTES.format("25-12"), read
#   2026-12). 24.10, 25.01 and 26.02's notes were not read: 24.10 and 25.01 take 24.05's as the least they can be
#   (pytorch_of), and 26.02 takes 25.12's 2.10, a release before it.
_PYTORCH_NOTES = "https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-{}.html"
_PYTORCH_2602 = (f"at least 2.10, NGC PyTorch 25.12's ({_PYTORCH_NOTES.format('25-12')}: 2.10.0a0+b4e4ee81d3); the "
                 f"26.02 PyTorch notes ({_PYTORCH_NOTES.format('26-02')}) were not read")
RELEASE_POLICY = {
    "24.05": ReleasePolicy((6, 0), 545, _CUDA12_BRANCHES, "10.0.1", _NOTES.format("24-05"), pytorch="2.4",
                           pytorch_note=f"2.4.0a0+07cecf4 ({_PYTORCH_NOTES.format('24-05')})"),
    "24.10": ReleasePolicy((6, 0), 560, _CUDA12_BRANCHES, "10.5.0", _NOTES.format("24-10")),
    "25.01": ReleasePolicy((7, 5), 560, _CUDA12_BRANCHES, "10.8.0", _NOTES.format("25-01")),
    "26.02": ReleasePolicy((7, 5), 580, {}, None, f"{_NOTES.format('26-02')} and {_CUDA_COMPAT}",
                           tensorrt_note=_TRT_2602_UNKNOWN, pytorch="2.10", pytorch_floor=True,
                           pytorch_note=_PYTORCH_2602),
}

# TensorRT inside NGC releases; for display and the stale-engine check only. Before a build, the notebooks read
# the version from the image itself (convert.tensorrt_version_in_image), so a tag missing here is no guess.
TENSORRT_IN_RELEASE = {tag: p.tensorrt for tag, p in RELEASE_POLICY.items() if p.tensorrt}

# The oldest tag the series runs: the oldest release whose facts it records (RELEASE_POLICY) and has run end to end
# (24.05, its default). The commands alone would reach further back: the launcher's tritonserver --metrics-address is
# in every server since 23.05 (server PR #5737, https://github.com/triton-inference-server/server/pull/5737), and every
# perf_analyzer flag the series passes, count windows included, is parsed by the client's r23.05 branch
# (src/c++/perf_analyzer/command_line_parser.cc). Older tags are refused because nothing here checks their driver,
# GPU or TensorRT facts, not because a command is known to fail.
OLDEST_TAG = "24.05"
if min(RELEASE_POLICY) != OLDEST_TAG:  # every tag check_tag accepts has a recorded release at or before it
    raise AssertionError(f"RELEASE_POLICY must start at OLDEST_TAG {OLDEST_TAG}; it starts at {min(RELEASE_POLICY)}")

# Oldest NGC release whose CUDA supports a compute capability major version (Blackwell: 10.x, 12.x).
FIRST_RELEASE_FOR_CC_MAJOR = {10: "25.01", 12: "25.01"}
# Driver a release's CUDA needs on any GPU, and the long-term branches a data-center GPU may use instead.
MIN_DRIVER = {tag: p.min_driver for tag, p in RELEASE_POLICY.items()}
DATACENTER_BRANCHES = {tag: dict(p.datacenter_branches) for tag, p in RELEASE_POLICY.items() if p.datacenter_branches}
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
    """Return `tag` if it is an NGC release tag (YY.MM, month 01-12) the series can run (OLDEST_TAG or newer)."""
    if not re.fullmatch(r"\d{2}\.\d{2}", tag) or not 1 <= int(tag[3:]) <= 12:
        raise ValueError(f"NGC tag must look like '24.05' (YY.MM, month 01-12); got {tag!r}")
    if tag < OLDEST_TAG:
        raise ValueError(f"NGC tag must be {OLDEST_TAG} or newer, the oldest release whose driver, GPU and TensorRT "
                         f"facts this series records and has run; got {tag!r}")
    return tag


class UnrecordedRelease(UserWarning):
    """An NGC tag the release table does not record: another release's facts stand in for its checks."""


def _stand_in(tag: str) -> str:
    """The recorded release whose facts hold for `tag`: itself, else the newest recorded one at or before it."""
    return tag if tag in RELEASE_POLICY else max(t for t in RELEASE_POLICY if t <= check_tag(tag))


def release_facts(tag: str) -> tuple[str, ReleasePolicy]:
    """The release whose facts the checks use for NGC `tag`, and its policy: `tag`'s own, or for a tag the table does
    not record the newest recorded release at or before it (the newest of all for a newer tag), with a warning that
    says which (UnrecordedRelease); a tag older than OLDEST_TAG is refused (check_tag)."""
    stand_in = _stand_in(check_tag(tag))
    if stand_in != tag:
        warnings.warn(f"NGC {tag} is not in helpers/ngc.py's release table; the facts of NGC {stand_in}, the newest "
                      f"recorded release before it, stand in for its driver and GPU checks (driver "
                      f"{RELEASE_POLICY[stand_in].min_driver}+, compute capability "
                      f"{'.'.join(map(str, min_compute(tag)))}+): see {_NOTES.format(tag.replace('.', '-'))}",
                      UnrecordedRelease, stacklevel=2)
    return stand_in, RELEASE_POLICY[stand_in]


def _floor(tag: str) -> tuple[tuple[int, int], str | None]:
    """min_compute(tag), and the TensorRT version whose floor it is (None where the server's floor binds)."""
    stand_in = _stand_in(tag)
    policy = RELEASE_POLICY[stand_in]
    known = [p.tensorrt for t, p in sorted(RELEASE_POLICY.items()) if t <= stand_in and p.tensorrt]
    tensorrt = policy.tensorrt or (known[-1] if known else None)
    floor = tensorrt_compute_floor(tensorrt)
    return (floor, tensorrt) if floor and floor > policy.server_compute else (policy.server_compute, None)


def min_compute(tag: str) -> tuple[int, int]:
    """The oldest compute capability every step of the series runs on with NGC `tag` (its stand-in's for an
    unrecorded tag): the server's floor or its TensorRT's, whichever is higher; a TensorRT the table does not record
    is at least that of the newest recorded release before it (TensorRT only moves forward with the tag)."""
    return _floor(tag)[0]


def pytorch_of(tag: str) -> tuple[str | None, bool, str]:
    """The PyTorch (major.minor) whose libtorch NGC `tag`'s PyTorch backend links, whether that is exact (else the
    least it can be: the newest recorded PyTorch of a release at or before the tag), and where it comes from; None
    when nothing is recorded. PyTorch only moves forward with the tag."""
    stand_in = _stand_in(check_tag(tag))
    known = [(t, p) for t, p in sorted(RELEASE_POLICY.items()) if t <= stand_in and p.pytorch]
    if not known:
        return None, False, "no PyTorch recorded for it or an earlier release"
    recorded, policy = known[-1]
    exact = recorded == tag and not policy.pytorch_floor
    source = policy.pytorch_note if recorded == tag else f"NGC {recorded}'s: {policy.pytorch_note}"
    return policy.pytorch, exact, source


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


def image(kind: str, tag: str = "series") -> str:
    """Full image name of one NGC container (`tritonserver`, `sdk`, `tensorrt`, `pytorch`) at `tag` ("series": the
    series' one tag, series_tag; every helper that takes a tag defaults to it, so none falls back to another)."""
    if kind not in IMAGES:
        raise ValueError(f"image kind must be one of {sorted(IMAGES)}; got {kind!r}")
    return IMAGES[kind].format(tag=series_tag(tag))


def tensorrt_version(tag: str = "series") -> str | None:
    """TensorRT version shipped in the NGC release `tag`, or None when this series has not recorded it."""
    return TENSORRT_IN_RELEASE.get(series_tag(tag))


# One GPU by default: with `--gpus all`, an instance group of count N places N instances on *every* GPU, and an
# engine built on one GPU model may not load on another. The whole series uses one GPU, $TUTORIAL_GPU (an index such
# as 1, or `all`; default 0), read here only; a notebook's `gpu` parameter may still name another.
GPU_VARIABLE = "TUTORIAL_GPU"
DEFAULT_GPU = 0


def series_gpu(gpu: int | str | None = "series") -> int | str | None:
    """The GPU to use: `gpu` itself (an index, 'all', or None for no GPU), or for "series" the one GPU set for the
    whole series ($TUTORIAL_GPU, default 0)."""
    if gpu == "series":
        value = os.environ.get(GPU_VARIABLE, "").strip()
        if not value:
            return DEFAULT_GPU
        if value != "all" and not value.isdigit():
            raise ValueError(f"${GPU_VARIABLE} must be a GPU index like 0 or 1, or 'all'; got {value!r}")
        return value if value == "all" else int(value)
    return gpu


def series_gpu_source() -> str:
    """Where series_gpu("series") comes from, in words."""
    value = os.environ.get(GPU_VARIABLE, "").strip()
    return f"${GPU_VARIABLE}={value}" if value else f"the series' default (GPU {DEFAULT_GPU}; set ${GPU_VARIABLE})"


def gpus_flag(gpu: int | str | None) -> str | None:
    """`--gpus` value for one GPU index (0, 1, ...), `all`, "series" (the series' GPU), or None for no GPU."""
    gpu = series_gpu(gpu) if gpu == "series" else gpu
    if gpu is None:
        return None
    if str(gpu) == "all":
        return "all"
    if not str(gpu).isdigit():
        raise ValueError(f"gpu must be a GPU index like 0, 'all', 'series' or None; got {gpu!r}")
    return f"device={gpu}"


def _driver(version: str) -> tuple[int, int]:
    """(branch, minor) of a driver version such as "535.161.08"."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0]
    return parts[0], parts[1]


def _driver_problem(tag: str, policy: ReleasePolicy, name: str, driver: str) -> str | None:
    """driver_problem against one release's policy (`tag` names it in the message)."""
    if not re.match(r"\d+\.\d+", driver or ""):
        return (f"its driver version could not be read (nvidia-smi gave {driver!r}), so whether it can run NGC {tag}'s "
                f"CUDA (driver {policy.min_driver}+) is not known")
    need, branches = policy.min_driver, dict(policy.datacenter_branches)
    have = _driver(driver)
    if have[0] >= need:
        return None
    branch = branches.get(have[0])
    if _DATACENTER.search(name) and branch:
        if have >= branch:
            return None
        return (f"driver {driver} is older than {branch[0]}.{branch[1]}, the oldest of the R{branch[0]} branch NGC "
                f"{tag} accepts on a data-center GPU")
    allowed = ", ".join(f"{b[0]}.{b[1]}+ (R{k})" for k, b in branches.items())
    if allowed and _DATACENTER.search(name):  # a data-center GPU on a branch the release does not list
        return (f"driver {driver} is older than the {need} that NGC {tag}'s CUDA needs, and its branch R{have[0]} is "
                f"not among those NGC {tag}'s notes list for data-center GPUs ({allowed})")
    return (f"driver {driver} is older than the {need} that NGC {tag}'s CUDA needs"
            + (f" (data-center GPUs may use {allowed}; {name} is not one)" if allowed else ""))


def driver_problem(tag: str, name: str, driver: str) -> str | None:
    """Why `driver` cannot run NGC `tag` on the GPU `name`, or None: the release's minimum, or on a data-center GPU
    one of the long-term branches NVIDIA lists for it (an unrecorded tag: release_facts' stand-in, with a warning); a
    driver version that cannot be read is a problem too."""
    _, policy = release_facts(tag)
    return _driver_problem(tag, policy, name, driver)


def _compute(cc: str) -> tuple[int, int] | None:
    """(major, minor) of a compute capability such as "8.6", or None when it is not one."""
    found = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", cc or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


# Compute capability by name (https://developer.nvidia.com/cuda-gpus) of the data-center GPUs that may run a driver
# branch older than R510, whose nvidia-smi has no `compute_cap` field ("Field "compute_cap" is not a valid field to
# query" with 470.182: huggingface/candle#733, NVIDIA/TensorRT-LLM#735): R470 is allowed on them by the CUDA 12
# releases' forward compatibility. Any other GPU on such a driver is refused by the driver check anyway.
_COMPUTE_BY_NAME = {r"P4|P40": "6.1", r"P100": "6.0", r"V100": "7.0", r"T4": "7.5", r"A100|A800|A30": "8.0",
                    r"A2|A10G?|A16|A40": "8.6"}


def _compute_from_name(name: str) -> str | None:
    """The compute capability of a data-center GPU named `name` (_COMPUTE_BY_NAME), or None."""
    found = [cc for names, cc in _COMPUTE_BY_NAME.items() if re.search(rf"\b({names})\b", name or "")]
    return found[0] if len(found) == 1 else None


def gpu_problems(tag: str, gpus: Sequence[Mapping[str, str]], gpu: int | str | None = "series") -> list[str]:
    """Why the NGC release `tag` cannot use the GPU the series will use (`gpu`: an index, 'all', "series", or None
    for every GPU listed), by compute capability and driver; [] only when every fact was read and holds. `gpus` as
    runtime.gpu_properties() gives them. An unrecorded tag is checked against release_facts' stand-in (warned).

    Facts that cannot be read are problems, not passes: no GPU listed, the chosen index missing (`--gpus device=N`
    would fail), an unreadable driver, or a compute capability neither nvidia-smi (drivers before R510 lack the field)
    nor the GPU's name (_COMPUTE_BY_NAME) gives. Refusing rather than warning, because a passed check sends `auto` to
    docker, where each of these fails inside a container (trtexec, the server) far from its cause, while refusing
    leaves the local world, and runtime="docker" then says which fact was missing."""
    _, policy = release_facts(tag)
    floor = min_compute(tag)
    gpu = series_gpu(gpu) if gpu == "series" else gpu
    chosen = [g for g in gpus if gpu in (None, "all") or str(g.get("index")) == str(gpu)]
    if not gpus:
        return [f"nvidia-smi lists no GPU here (none, or its facts could not be read), so whether NGC {tag} can use "
                "one (driver, compute capability) cannot be checked"]
    if not chosen:
        listed = ", ".join(str(g.get("index", "?")) for g in gpus)
        return [f"GPU {gpu} is not among the GPUs nvidia-smi lists (indices {listed}): `--gpus device={gpu}` would "
                f"fail, and its driver and compute capability cannot be checked; set ${GPU_VARIABLE} to one of them"]
    problems = []
    for g in chosen:
        cc, name = g.get("compute_cap", ""), g.get("name", "")
        label = f"GPU {g.get('index', '?')} ({name or '?'})"
        have = _compute(cc)
        if have is None and _compute_from_name(name):
            cc = _compute_from_name(name)
            have = _compute(cc)
        first = FIRST_RELEASE_FOR_CC_MAJOR.get(have[0]) if have else None
        if have is None:
            said = f"said {g['compute_cap_error']!r}" if g.get("compute_cap_error") else f"gave {cc!r}"
            problems.append(f"{label}: its compute capability could not be read (nvidia-smi {said}; drivers before "
                            f"R510 cannot report it), so whether NGC {tag} supports it ({'.'.join(map(str, floor))}+) "
                            "is not known")
        elif first and tag < first:
            problems.append(f"{label} has compute capability {cc}, which NGC {tag} does not support; use "
                            f"ngc_tag='{first}' or newer")
        elif have < floor:
            newest_ok = [t for t in sorted(RELEASE_POLICY) if have >= min_compute(t)]
            tensorrt, later = _floor(tag)[1], "" if tag in RELEASE_POLICY else " or later"
            why = (f": TensorRT {tensorrt}{later}, which the notebooks build with, supports no older GPU"
                   if tensorrt else "")
            problems.append(f"{label} has compute capability {cc}; NGC {tag} needs "
                            f"{'.'.join(map(str, floor))} or newer{why}"
                            + (f" (ngc_tag='{newest_ok[-1]}' is the newest release the series knows for it)"
                               if newest_ok else ""))
        problem = _driver_problem(tag, policy, name, g.get("driver", ""))
        if problem:
            problems.append(f"{label}: {problem}")
    return problems


@dataclass(frozen=True)
class DockerInfo:
    """What `docker info` said: the engine's fields, or why no engine answered (`error`)."""

    fields: Mapping[str, object] = field(default_factory=dict)
    error: str = ""

    @property
    def ok(self) -> bool:
        """Whether an engine answered."""
        return not self.error

    @property
    def security_options(self) -> list[str]:
        """The engine's SecurityOptions (`name=seccomp,profile=builtin`, `name=selinux`, `name=rootless`, ...)."""
        return [str(option) for option in self.fields.get("SecurityOptions") or []]

    @property
    def selinux(self) -> bool:
        """Whether the engine enforces SELinux labels (bind mounts then need `:z`)."""
        return any(o.split(",")[0] == "name=selinux" for o in self.security_options)

    @property
    def userns(self) -> bool:
        """Whether the engine remaps user namespaces (userns-remap: its containers cannot share the host's network)."""
        return any(o.split(",")[0] == "name=userns" for o in self.security_options)

    @property
    def rootless(self) -> bool:
        """Whether the engine runs rootless (its `--network host` and `--user` are not the host's)."""
        return any(o.split(",")[0] == "name=rootless" for o in self.security_options)


_DOCKER_INFO: dict[tuple[tuple[str, str], ...], DockerInfo] = {}


def docker_info() -> DockerInfo:
    """`docker info`, read once per environment (the same PATH, DOCKER_HOST and context give the same engine); an
    engine that refuses is asked again next time, since it may have been started in between (one that does not
    answer within 15 s is not: every command the helpers build would wait for it again)."""
    key = tuple(sorted(os.environ.items()))
    if key in _DOCKER_INFO:
        return _DOCKER_INFO[key]
    if not shutil.which("docker"):
        return DockerInfo(error="docker CLI not found")
    try:
        out = subprocess.run(["docker", "info", "--format", "{{json .}}"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired as exc:
        _DOCKER_INFO[key] = DockerInfo(error=f"TimeoutExpired: {exc}")
        return _DOCKER_INFO[key]
    except OSError as exc:
        return DockerInfo(error=f"{type(exc).__name__}: {exc}")
    try:
        fields = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}
    except json.JSONDecodeError:
        fields = {}
    errors = [str(e) for e in fields.get("ServerErrors") or []]
    if out.returncode != 0 or errors or not fields:
        text = "; ".join(errors) or out.stderr.strip() or out.stdout.strip()
        return DockerInfo(fields, (text.splitlines() or [f"exit code {out.returncode}, no output"])[0])
    _DOCKER_INFO[key] = DockerInfo(fields)
    return _DOCKER_INFO[key]


def docker_run(
    image_name: str,
    command: Sequence[str] = (),
    *,
    volumes: Mapping[str | Path, str] | None = None,
    ports: Mapping[int, int] | None = None,
    host: str = "127.0.0.1",
    gpus: str | None = "series",
    name: str | None = None,
    network: str | None = None,
    workdir: str | None = None,
    interactive: bool = False,
    as_user: bool = False,
    init: bool = False,
    selinux: bool | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """Argument list for `docker run --rm --pull=never` (the image is pulled before, with progress: ensure_image; a
    missing image then fails at once instead of a silent pull inside a timed step): absolute volume paths (a target
    may end in `:ro`), ports published on `host` only; `gpus` a --gpus value, "series" for the series' GPU
    (series_gpu), None for none; with init, Docker's init is PID 1 and passes signals on (a tool such as trtexec as
    PID 1 ignores SIGINT and SIGTERM); with as_user, the container runs as the calling user (files it writes into the
    mounts are the user's, and an NFS home with root_squash stays writable), with HOME in /tmp since that user has no
    home in the image. Under SELinux (selinux, or None: ask docker_info) every mount gets `:z`, or the container
    cannot read it."""
    args = ["docker", "run", "--rm", "--pull=never"]
    if init:
        args.append("--init")
    if interactive:
        args.append("-it")
    if name:
        args += ["--name", name]
    gpus = gpus_flag("series") if gpus == "series" else gpus
    if gpus:
        args += ["--gpus", f'"{gpus}"' if gpus.startswith("device=") and "," in gpus else gpus]
    if network:
        args += ["--network", network]
    if as_user:
        args += ["--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp"]
    for host_port, container_port in (ports or {}).items():
        published = f"{host}:{host_port}" if host else str(host_port)
        args += ["-p", f"{published}:{container_port}"]
    if volumes and selinux is None:
        selinux = docker_info().selinux
    for src, dst in (volumes or {}).items():
        src_path = Path(src).expanduser().resolve()
        if not src_path.exists():
            raise FileNotFoundError(f"volume source must exist on the host; {src_path} does not")
        target, _, mode = dst.partition(":")
        if not target.startswith("/"):
            raise ValueError(f"volume target must be an absolute path in the container; got {dst!r}")
        modes = [m for m in mode.split(",") if m]
        unknown = [m for m in modes if m not in ("ro", "rw", "z", "Z")]
        if unknown:
            raise ValueError(f"volume mode must be ro, rw, z or Z; got {mode!r} in {dst!r}")
        if selinux and not {"z", "Z"} & set(modes):
            modes.append("z")
        args += ["-v", f"{src_path}:{target}" + (f":{','.join(modes)}" if modes else "")]
    if workdir:
        args += ["-w", workdir]
    args += list(extra)
    args.append(image_name)
    args += list(command)
    return args


def as_shell(args: Sequence[str]) -> str:
    """The argument list as one line a user can paste into a terminal."""
    return shlex.join([str(a) for a in args])


# `docker run` options that take the next argument as their value (long and short forms; `--opt=value` is one argument)
_OPTIONS_WITH_VALUE = {"--name", "--gpus", "--network", "--net", "--user", "-u", "-p", "--publish", "-v", "--volume",
                       "-w", "--workdir", "-e", "--env", "--env-file", "--shm-size", "--ulimit", "--ipc", "--pid",
                       "--security-opt", "--mount", "--device", "--entrypoint", "-l", "--label", "--group-add",
                       "--cap-add", "--cap-drop", "--add-host", "-h", "--hostname", "-m", "--memory", "--cpus",
                       "--runtime", "--platform", "--tmpfs", "--log-driver", "--log-opt", "--restart", "--pull"}


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


CONTAINER_PREFIX = "triton-tutorials-"  # every container the series starts: `docker ps -a` finds leftovers by it


def user_prefix() -> str:
    """The start of this user's one-shot container names, CONTAINER_PREFIX then u<uid>- (one Docker engine serves
    every user of a machine: a scan for leftovers must not take another user's live containers for its own)."""
    return f"{CONTAINER_PREFIX}u{os.getuid()}-"


def name_of(args: Sequence[str]) -> str | None:
    """The --name of a `docker run` argument list, or None."""
    image = image_of(args)
    options = list(args)[2:list(args).index(image)]
    for i, arg in enumerate(options):
        if arg == "--name" and i + 1 < len(options):
            return options[i + 1]
        if arg.startswith("--name="):
            return arg.split("=", 1)[1]
    return None


def named(args: Sequence[str]) -> tuple[list[str], str]:
    """`args` (a `docker run`) and its container's name: the --name it has, else a new one of this process
    (triton-tutorials-u<uid>-<image>-<pid>-<random>: user_prefix) inserted after `docker run`, so that it can be
    removed by name."""
    name = name_of(args)
    if name:
        return list(args), name
    kind = re.sub(r"[^a-zA-Z0-9_.-]", "-", image_of(args).rsplit("/", 1)[-1].split(":")[0])
    name = f"{user_prefix()}{kind}-{os.getpid()}-{secrets.token_hex(3)}"
    return [*list(args)[:2], "--name", name, *list(args)[2:]], name


def guarded(command: Sequence[str], cleanup: Sequence[str] = (), grace: float | None = None) -> list[str]:
    """`command` run under helpers/reaper.py, which stops its whole process group when this process dies and then
    runs `cleanup` (e.g. `docker rm -f NAME`, for a container the Docker daemon would keep)."""
    reaper = [sys.executable, str(Path(__file__).with_name("reaper.py")), "--parent", str(os.getpid())]
    if grace is not None:
        reaper += ["--grace", str(grace)]
    if cleanup:
        reaper += ["--on-exit", shlex.join(cleanup)]
    return [*reaper, "--", *command]


def start_container(args: Sequence[str], **popen) -> tuple[subprocess.Popen, str]:
    """Start a one-shot `docker run` (named if it is not) under the reaper, in its own session; returns the process
    and the container's name. A dead kernel leaves the reaper, which stops the CLI and runs `docker rm -f NAME`."""
    if list(args[:2]) != ["docker", "run"]:
        raise ValueError(f"expected a `docker run ...` argument list; got {as_shell(list(args)[:3])} ...")
    args, name = named(args)
    proc = subprocess.Popen(guarded(args, ["docker", "rm", "-f", name], grace=5), start_new_session=True, **popen)
    return proc, name


def stop_container(proc: subprocess.Popen, name: str, grace: float = 10.0) -> None:
    """Stop what start_container started: SIGINT to the docker CLI first (it passes it to the container, whose init
    passes it to the tool), SIGKILL to the CLI after `grace` seconds, then `docker rm -f NAME` whatever happened
    (a killed CLI leaves its container running). Safe to call when the container has ended already."""
    try:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it may end between poll() and killpg()
                try:
                    os.killpg(proc.pid, signal.SIGINT)  # the reaper ignores it, the CLI in its group gets it
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
    finally:
        try:
            if proc.poll() is None:
                proc.wait(5)
        finally:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)


def run_container(args: Sequence[str], *, capture: bool = False, grace: float = 10.0,
                  **popen) -> subprocess.CompletedProcess:
    """Run a one-shot `docker run` to its end, as subprocess.run would (`capture`: its output as text), and leave no
    container behind: on Ctrl-C or any exception the CLI gets SIGINT, then `docker rm -f NAME` runs (stop_container);
    a dead kernel leaves it to the reaper. The result's args are the command as run (with its --name)."""
    if capture:
        popen.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc, name = start_container(args, **popen)
    finished = False
    try:
        out, err = proc.communicate()
        finished = True
    finally:
        if not finished:
            stop_container(proc, name, grace)
    as_run = proc.args[proc.args.index("--") + 1:]
    return subprocess.CompletedProcess(as_run, proc.returncode, out, err)


class PullFailed(RuntimeError):
    """`docker pull` failed; `reason` says why in a few words (pull_failure_reason), the message adds docker's tail."""

    def __init__(self, image_name: str, reason: str, detail: str = "", code: int | None = None) -> None:
        self.image, self.reason, self.code = image_name, reason, code
        exit_code = f" (exit {code})" if code is not None else ""
        super().__init__(f"docker pull {image_name} failed{exit_code}: {reason}" + (f"\n{detail}" if detail else ""))


# What `docker pull` prints when it fails, and what that means (the first that matches wins).
_PULL_FAILURES = [
    (r"Cannot connect to the Docker daemon|Is the docker daemon running", "no Docker engine answers"),
    (r"permission denied while trying to connect", "this user may not use the Docker engine (permission denied "
                                                  "on its socket)"),
    (r"no space left on device", "the disk that holds Docker's images is full (no space left on device); free space "
                                 "(`docker system df`, `docker image prune`) and run again"),
    (r"toomanyrequests|too many requests|rate limit", "the registry's rate limit (toomanyrequests); wait, or log in "
                                                       "(`docker login nvcr.io`) and run again"),
    (r"unauthorized|authentication required|denied", "the registry refused access (unauthorized or denied); check "
                                                     "`docker login nvcr.io`"),
    (r"manifest unknown|not found", "the registry has no such image (is the tag published?)"),
    (r"dial tcp|no such host|connection refused|i/o timeout|network is unreachable|TLS handshake timeout|"
     r"context deadline exceeded|Client\.Timeout|connection reset", "the registry cannot be reached (network)"),
]


def pull_failure_reason(output: str) -> str:
    """Why a `docker pull` failed, in a few words, from its output (disk full, rate limit, registry unreachable, ...);
    else its last line."""
    for pattern, reason in _PULL_FAILURES:
        if re.search(pattern, output, re.IGNORECASE):
            return reason
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "docker pull printed nothing"


_LAYER_EVENT = re.compile(r"^[0-9a-f]{12}: ")  # one line per layer and event when docker pull's output is no TTY


def ensure_image(image_name: str) -> None:
    """Pull the image unless the engine has it, showing docker's progress; a failed pull raises PullFailed with the
    reason (pull_failure_reason) and docker's last lines, and a Ctrl-C stops the `docker pull` it started.

    Run before any timeout starts: an NGC image is 10-20 GB, and `docker run` would pull it silently."""
    if image_present(image_name):
        return
    print(f"pulling {image_name} (first use; NGC images are large, this can take many minutes) ...", flush=True)
    try:
        proc = subprocess.Popen(["docker", "pull", image_name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
    except OSError as exc:
        raise PullFailed(image_name, f"docker could not start ({type(exc).__name__}: {exc})") from exc
    tail: list[str] = []
    try:
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-15:]
            if not line.startswith(" ") and (not _LAYER_EVENT.match(line) or "Pull complete" in line):
                print(line.rstrip(), flush=True)
        code = proc.wait()
    finally:
        if proc.poll() is None:  # interrupted: the pull would go on downloading after the notebook moved on
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if code != 0:
        output = "\n".join(tail)
        raise PullFailed(image_name, pull_failure_reason(output), output, code)


def pull_all(tag: str = "series") -> list[str]:
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
        try:
            print("pulled:", ", ".join(pull_all(tag)))
        except PullFailed as failed:
            sys.exit(str(failed))
    sys.exit(0)
