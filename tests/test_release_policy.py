"""The NGC release policy decides from data (issue 35, item 3; docker review 2026-12-03, findings 5-9): the compute
floor follows the tag's TensorRT, an unrecorded tag borrows the nearest recorded release's facts, tags older than the
series' commands are refused, missing GPU facts are problems, and a failed pull is a reported step failure."""
from __future__ import annotations

import os
import textwrap
import warnings
from pathlib import Path

import pytest

from helpers import convert, ngc, runtime

V100 = {"index": "0", "name": "Tesla V100-SXM2-16GB", "compute_cap": "7.0", "driver": "570.86.10"}
RTX_4090 = {"index": "0", "name": "NVIDIA GeForce RTX 4090", "compute_cap": "8.9", "driver": "535.161.08"}


def _script(folder: Path, name: str, body: str) -> Path:
    """An executable shell script `name` in `folder` (a stand-in for docker or nvidia-smi on PATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


# --- finding 5: the compute floor follows the tag's TensorRT -------------------------------------------------------

def test_24_10_refuses_volta_because_its_tensorrt_dropped_it():
    """Finding 5: 24.10 ships TensorRT 10.5, which removed Volta (7.0); the policy accepted a V100 for 24.10."""
    problems = ngc.gpu_problems("24.10", [V100], 0)
    assert problems and "needs 7.5 or newer" in problems[0] and "TensorRT 10.5.0" in problems[0], problems
    assert ngc.tensorrt_compute_floor("10.4.0") == (7, 0) and ngc.tensorrt_compute_floor("10.5.0.18") == (7, 5)
    assert ngc.tensorrt_compute_floor(None) is None
    assert "ngc_tag='24.05'" in problems[0]  # the newest release whose TensorRT still builds for a V100
    assert ngc.gpu_problems("24.05", [V100], 0) == []  # TensorRT 10.0.1: SM 7.0 or higher
    assert {tag: ngc.min_compute(tag) for tag in ngc.RELEASE_POLICY} == {
        "24.05": (7, 0), "24.10": (7, 5), "25.01": (7, 5), "26.02": (7, 5)}


# --- finding 6: an unrecorded tag gets the nearest recorded release's facts, with a warning ----------------------

@pytest.mark.parametrize("tag, stand_in, gpu, words", [
    ("26.09", "26.02", RTX_4090, "older than the 580 that NGC 26.09's CUDA needs"),  # newer than every recorded one
    ("25.06", "25.01", V100, "needs 7.5 or newer"),                                  # between two recorded ones
    ("24.08", "24.05", RTX_4090, "older than the 545 that NGC 24.08's CUDA needs"),
])
def test_an_unrecorded_tag_is_checked_against_the_nearest_recorded_release(tag, stand_in, gpu, words):
    """Finding 6: a tag the table did not record (26.xx included) got no driver or GPU check at all."""
    with pytest.warns(ngc.UnrecordedRelease, match=rf"NGC {tag} is not in .*the facts of NGC {stand_in}"):
        problems = ngc.gpu_problems(tag, [gpu], 0)
    assert problems and words in problems[0], problems
    with pytest.warns(ngc.UnrecordedRelease):
        assert ngc.release_facts(tag) == (stand_in, ngc.RELEASE_POLICY[stand_in])


def test_a_recorded_tag_gives_no_warning_and_a_month_must_exist():
    """Finding 6: `24.13` passed check_tag and failed only at the pull."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ngc.UnrecordedRelease)
        assert ngc.release_facts("25.01")[0] == "25.01"
    for tag in ("24.13", "25.00"):
        with pytest.raises(ValueError, match=rf"YY\.MM, month 01-12\); got '{tag}'"):
            ngc.check_tag(tag)


# --- finding 7: tags older than the series' commands are refused ---------------------------------------------------

def test_tags_older_than_24_05_are_refused_with_the_reason(monkeypatch):
    """Finding 7: 22.11 (in the table) and other tags before 24.05 were accepted with no recorded facts to check
    (22.11's server also lacks --metrics-address); they are refused, with the reason."""
    assert ngc.OLDEST_TAG == "24.05" == min(ngc.RELEASE_POLICY)
    for tag in ("22.11", "23.05", "24.04"):
        with pytest.raises(ValueError, match=rf"must be 24\.05 or newer.*facts this series records and has run; got '{tag}'"):
            ngc.check_tag(tag)
        with pytest.raises(ValueError, match="must be 24.05 or newer"):
            ngc.image("tritonserver", tag)
    monkeypatch.setenv(ngc.SERIES_TAG_VARIABLE, "23.11")
    with pytest.raises(ValueError, match="must be 24.05 or newer"):
        ngc.series_tag()
    assert ngc.check_tag("24.05") == "24.05" and "22.11" not in ngc.TENSORRT_IN_RELEASE


# --- finding 8: GPU facts that cannot be read are problems, and the driver is asked for on its own ------------------

@pytest.fixture
def old_driver_smi(tmp_path, monkeypatch):
    """An nvidia-smi of driver R470: it rejects the `compute_cap` field, as drivers before R510 do."""
    _script(tmp_path / "bin", "nvidia-smi", """\
        case "$*" in
          *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.'; echo; exit 2 ;;
          *--query-gpu=index,name,driver_version*) echo "0, ${FAKE_SMI_NAME:-NVIDIA GeForce RTX 3090}, 470.182.03" ;;
          *) echo "unexpected: $*" >&2; exit 9 ;;
        esac
        """)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")


def test_an_old_driver_is_caught_although_nvidia_smi_cannot_report_compute_capability(old_driver_smi, monkeypatch):
    """Finding 8: one query asked for compute_cap with the driver; a pre-R510 nvidia-smi rejects it, so no facts came
    back and docker was chosen for a driver that runs no CUDA 12 image."""
    gpus = runtime.gpu_properties()
    assert [(g["index"], g["driver"], g["compute_cap"]) for g in gpus] == [("0", "470.182.03", "")], gpus
    assert "not a valid field" in gpus[0]["compute_cap_error"]
    problems = ngc.gpu_problems("24.05", gpus, 0)
    assert any("could not be read" in p and "not a valid field" in p for p in problems), problems
    assert any("driver 470.182.03 is older than the 545" in p for p in problems), problems
    monkeypatch.setattr(runtime, "docker_engine", lambda: (True, "engine 28.2"))
    monkeypatch.setattr(runtime, "nvidia_gpu", lambda: (True, "NVIDIA GeForce RTX 3090, 470.182.03"))
    monkeypatch.setattr(runtime, "container_toolkit", lambda: (True, "NVIDIA Container Toolkit (test)"))
    monkeypatch.setattr(runtime, "docker_rootless", lambda: (False, "not rootless"))
    choice = runtime.choose_runtime("auto", "24.05", gpu=0)
    assert choice.name == "local" and "driver 470.182.03 is older" in choice.reason, choice
    with pytest.raises(RuntimeError, match="could not be read"):
        runtime.choose_runtime("docker", "24.05", gpu=0)


def test_a_data_center_gpu_on_r470_is_judged_by_its_name(old_driver_smi, monkeypatch):
    """Finding 8, the other side: R470 is allowed on data-center GPUs by 24.05's notes; the compute capability its
    nvidia-smi cannot give is taken from the GPU's name."""
    monkeypatch.setenv("FAKE_SMI_NAME", "Tesla T4")
    assert ngc.gpu_problems("24.05", runtime.gpu_properties(), 0) == []
    monkeypatch.setenv("FAKE_SMI_NAME", "Tesla V100-PCIE-16GB")
    problems = ngc.gpu_problems("24.10", runtime.gpu_properties(), 0)
    assert problems and "compute capability 7.0; NGC 24.10 needs 7.5" in problems[0], problems


def test_missing_gpu_facts_are_problems_not_passes():
    """Finding 8: no facts for the GPU the series uses (none listed, an index that does not exist, an unreadable
    driver or compute capability) passed the check."""
    assert "nvidia-smi lists no GPU" in ngc.gpu_problems("24.05", [], 0)[0]
    missing = ngc.gpu_problems("24.05", [RTX_4090 | {"driver": "550.54"}], 3)
    assert len(missing) == 1 and "GPU 3 is not among the GPUs nvidia-smi lists (indices 0)" in missing[0]
    unreadable = ngc.gpu_problems("24.05", [{**RTX_4090, "driver": "[N/A]"}], 0)
    assert unreadable and "driver version could not be read" in unreadable[0], unreadable
    unknown = ngc.gpu_problems("24.05", [{**RTX_4090, "compute_cap": "", "driver": "550.54"}], 0)
    assert unknown and "compute capability could not be read" in unknown[0], unknown
    assert ngc.gpu_problems("24.05", [{**RTX_4090, "driver": "550.54.14"}], 0) == []


# --- finding 9: a failed pull is a reported step failure -----------------------------------------------------------

@pytest.fixture
def failing_pull(tmp_path, monkeypatch):
    """A docker whose engine has no image and whose pull fails with $FAKE_PULL_ERROR; `run` must not be reached."""
    calls = tmp_path / "docker-calls"
    _script(tmp_path / "bin", "docker", f"""\
        echo "$*" >> {calls}
        case "$1" in
          info) echo '{{"ServerVersion": "test"}}' ;;
          image) exit 1 ;;
          pull) echo "24.05-py3: Pulling from nvidia/pytorch"; echo "a1b2c3d4e5f6: Pulling fs layer"
                echo "$FAKE_PULL_ERROR" >&2; exit 1 ;;
          *) exit 99 ;;
        esac
        """)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_PULL_ERROR", "write /var/lib/docker/tmp/GetImageBlob1: no space left on device")
    return calls


@pytest.mark.parametrize("output, reason", [
    ("failed to register layer: write /usr/lib/x: no space left on device", "is full"),
    ("toomanyrequests: You have reached your pull rate limit.", "rate limit"),
    ('Get "https://nvcr.io/v2/": dial tcp: lookup nvcr.io: no such host', "cannot be reached"),
    ("manifest for nvcr.io/nvidia/tritonserver:26.09-py3 not found: manifest unknown", "no such image"),
    ("something new", "something new"),
])
def test_a_failed_pull_says_why(output, reason):
    """Finding 9: the reason a pull failed was buried in docker's output."""
    assert reason in ngc.pull_failure_reason(f"26.02-py3: Pulling from nvidia/tritonserver\n{output}\n")


def test_a_failed_pull_fails_the_step_not_the_notebook(failing_pull, tmp_path, monkeypatch, capsys):
    """Finding 9: a full disk during notebook 12's optional torch-tensorrt pull (or 03's and 12's version read) raised
    RuntimeError out of run_optional and tensorrt_version_of, notebook 12 failed and 13-15 never ran."""
    image = ngc.image("pytorch", "24.05")
    command = convert.in_pytorch_container(["python", "x.py"], tmp_path)
    error = convert.run_optional(command, tmp_path / "logs" / "t.log")
    assert error.startswith(f"docker pull {image} failed (exit 1): the disk") and "no space left" in error, error
    assert "no space left on device" in (tmp_path / "logs" / "t.log").read_text()
    version, source = convert.tensorrt_version_of("24.05", read_image=True)  # notebooks 03 and 12, outside any try
    assert version == "10.0.1" and "the disk that holds Docker's images is full" in source, source
    with pytest.raises(ngc.PullFailed, match=rf"docker pull {image} failed \(exit 1\): the disk .* is full") as info:
        ngc.ensure_image(image)
    assert info.value.image == image and "no space left on device" in str(info.value)
    monkeypatch.setenv("FAKE_PULL_ERROR", "toomanyrequests: Too Many Requests")
    with pytest.raises(convert.ContainerStepFailed, match="registry's rate limit"):
        convert.run_checked(convert.in_tensorrt_container(["trtexec"], tmp_path), tmp_path / "logs" / "b.log")
    assert not any(line.startswith("run ") for line in failing_pull.read_text().splitlines())
    printed = capsys.readouterr().out
    assert "Pulling from nvidia/pytorch" in printed and "Pulling fs layer" not in printed  # one line, not one per layer


def test_image_of_reads_long_form_options():
    """Review LOW 17: `--security-opt label=disable` (the usual SELinux workaround) was taken for the image, and
    ensure_image then tried to pull "label=disable"."""
    image = ngc.image("tritonserver", "24.05")
    args = ["docker", "run", "--rm", "--security-opt", "label=disable", "--volume", "/a:/b", "--env", "X=1",
            "--label", "k=v", "--entrypoint", "sh", "--workdir", "/w", "-u", "1:1", image, "tritonserver"]
    assert ngc.image_of(args) == image
    assert ngc.name_of([*args[:2], "--name", "n1", *args[2:]]) == "n1"


# --- LOW 13: a data-center GPU on a branch the release does not list ----------------------------------------------

def test_a_data_center_gpu_on_an_unlisted_branch_is_told_so_not_that_it_is_no_data_center_gpu():
    """Review 2026-12-03, LOW 13: an H100 on R550 was refused for 25.01 with "...; NVIDIA H100 80GB HBM3 is not one"
    (not a data-center GPU), which it is; the branch is what the release's notes do not list."""
    h100 = {"index": "0", "name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0", "driver": "550.54.15"}
    problems = ngc.gpu_problems("25.01", [h100])
    assert problems and "its branch R550 is not among those NGC 25.01's notes list for data-center GPUs" in problems[0]
    assert "is not one" not in problems[0]
    geforce = ngc.gpu_problems("25.01", [{**RTX_4090, "driver": "550.54.15"}])
    assert geforce and "NVIDIA GeForce RTX 4090 is not one" in geforce[0]
