"""Notebook 15's docker path through the test docker: Model Analyzer's SDK container in remote mode against the
series' server container (review 2026-12-03, HIGH 1-2, MED 3-4), and what the test docker now models (MED 12)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import analyzer, ngc, perf
from helpers.runtime import RuntimeChoice

FAKE = Path(__file__).resolve().parent / "fakedocker"
DOCKER = RuntimeChoice("docker", "test docker")


@pytest.fixture
def fake_docker(fake_docker, monkeypatch):
    """conftest's test docker, without perf_analyzer's machine-wide lock (these tests measure nothing)."""
    import contextlib

    monkeypatch.setattr(perf, "one_load_generator", contextlib.nullcontext)
    return fake_docker


def _search(repo: Path, work: Path) -> dict:
    return {"model_repository": str(repo), "output_model_repository_path": str(work / "output_model_repository"),
            "override_output_model_repository": True, "export_path": str(work / "profile"),
            "checkpoint_directory": str(work / "checkpoints"), "run_config_search_mode": "brute",
            "profile_models": {"tiny": {"cpu_only": False, "model_config_parameters": {
                "max_batch_size": [8], "dynamic_batching": {"max_queue_delay_microseconds": [100]},
                "instance_group": [[{"kind": "KIND_GPU", "count": 1}]]}, "parameters": {"concurrency": [2]}}},
            "objectives": ["perf_throughput"], "constraints": {"perf_latency_p99": {"max": 5000.0}},
            "perf_analyzer_flags": {"shared-memory": "system", "measurement-mode": "count_windows",
                                    "measurement-request-count": 20, "max-trials": 5, "stability-percentage": 500}}


def test_the_docker_worlds_search_puts_every_instance_on_the_gpu(tmp_path):
    """Teaching review s22 F3: the YAML notebook 15 prints for the docker world says what that world writes, GPU
    instances, even when this machine searched on its CPU."""
    search = _search(tmp_path / "models", tmp_path / "ma")
    spec = search["profile_models"]["tiny"]
    spec["cpu_only"] = True
    spec["model_config_parameters"]["instance_group"] = [[{"kind": "KIND_CPU", "count": 1}], [{"kind": "KIND_CPU", "count": 2}]]
    shown = analyzer.on_gpu(search)["profile_models"]["tiny"]
    assert shown["cpu_only"] is False
    assert shown["model_config_parameters"]["instance_group"] == [[{"kind": "KIND_GPU", "count": 1}],
                                                                  [{"kind": "KIND_GPU", "count": 2}]]
    assert spec["cpu_only"] is True and spec["model_config_parameters"]["instance_group"][0][0]["kind"] == "KIND_CPU"
    assert "model_config_parameters" not in analyzer.on_gpu({"profile_models": {"q": {"cpu_only": True}}})["profile_models"]["q"]


@pytest.mark.parametrize("tag", ["24.05", "26.02"])
def test_model_analyzer_in_the_sdk_image_searches_the_series_server_in_remote_mode(fake_docker, tiny_repo, tmp_path,
                                                                                   monkeypatch, tag):
    monkeypatch.setenv(ngc.SERIES_TAG_VARIABLE, tag)
    work = analyzer.fresh_workdir(tmp_path / "ma")
    server = analyzer.explicit_server(tiny_repo, DOCKER, ["tiny"], tag=tag, startup_timeout=120).start()
    try:
        config = {**_search(tiny_repo, work), **analyzer.remote_launch(server, None, dcgm_disable=True)}
        ma = analyzer.run_docker(config, tag, tiny_repo, work, timeout_s=240, grace=10)
    finally:
        server.stop()
    assert ma.returncode == 0, ma.tail()
    table = analyzer.results(ma.export_path)
    assert set(table["config_name"]) == {"tiny_config_default", "tiny_config_0"} and (table["throughput"] > 0).all()
    assert "max_batch_size: 8" in analyzer.variant_config(config["output_model_repository_path"], "tiny_config_0")
    calls = [json.loads(line) for line in fake_docker.read_text().splitlines()]
    sdk = next(c for c in calls if c[0] == "run" and ngc.image("sdk", tag) in c)
    assert "--user" in sdk and "--init" in sdk and not any("docker.sock" in a for a in sdk)
    assert config["triton_grpc_endpoint"].startswith("127.0.0.1:")  # the series' server: loopback, its own ports
    assert not [n for n in subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True,
                                          text=True).stdout.split()], "a container outlived the search"
    analyzer.remove_tree(work)  # written as the user: deleted without a word


def test_the_stand_in_refuses_what_model_analyzer_refuses(fake_docker, tiny_repo, tmp_path):
    """An unknown key, and remote mode without the server's endpoints (the defaults are not the series' server)."""
    work = analyzer.fresh_workdir(tmp_path / "ma")
    for config, words in [({**_search(tiny_repo, work), "triton_launch_mode": "remote", "no_such_key": 1},
                           "unknown profile options ['no_such_key']"),
                          ({**_search(tiny_repo, work), "triton_launch_mode": "remote"},
                           "Must specify triton-grpc-endpoint")]:
        ma = analyzer.run_docker(config, "26.02", tiny_repo, work, timeout_s=60, grace=5)
        assert ma.returncode != 0 and words in ma.output, ma.output


def test_a_root_container_writes_files_the_user_cannot_delete(fake_docker, tmp_path):
    """MED 12 (b), HIGH 1: without --user the container is root, and its files are root's; the series' cleanup then
    fails loudly with the path (the user's view: tests/fakedocker/userfs)."""
    results = tmp_path / "ma" / "run-old"
    results.mkdir(parents=True)
    (tmp_path / "docker-state").mkdir()
    (tmp_path / "docker-state" / "images").write_text(ngc.image("sdk", "26.02") + "\n")
    config = results / "config.yml"
    config.write_text("triton_launch_mode: remote\ncheckpoint_directory: " + str(results / "checkpoints") + "\n")
    root = subprocess.run(["docker", "run", "--rm", "--network", "host", "-v", f"{results}:{results}",
                           ngc.image("sdk", "26.02"), "model-analyzer", "profile", "-f", str(config)],
                          capture_output=True, text=True, timeout=120)
    assert "Must specify triton-grpc-endpoint" in root.stderr  # refused, after nothing was written
    (results / "checkpoints").mkdir()  # what a root Model Analyzer leaves: recorded as root's by the test docker
    with open(tmp_path / "docker-state" / "root-owned", "a") as owned:
        owned.write(f"{results / 'checkpoints'}\n")
    (results / "checkpoints" / "0.ckpt").write_text("{}")
    env = {**os.environ, "PYTHONPATH": str(FAKE / "userfs")}
    env.pop("FAKE_DOCKER_DAEMON", None)
    out = subprocess.run([sys.executable, "-c", "from helpers import analyzer; import sys; "
                          f"analyzer.fresh_workdir({str(tmp_path / 'ma')!r})"], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and f"cannot delete {results / 'checkpoints' / '0.ckpt'}" in out.stderr, out.stderr


def test_a_root_container_records_what_it_created(fake_docker, tmp_path):
    """MED 12 (b): the test docker lists what a container without --user created in a writable mount."""
    (tmp_path / "docker-state").mkdir()
    (tmp_path / "docker-state" / "images").write_text(ngc.image("sdk", "26.02") + "\n")
    out_dir = tmp_path / "results"
    out_dir.mkdir()
    for user in ([], ["--user", f"{os.getuid()}:{os.getgid()}"]):
        subprocess.run(["docker", "run", "--rm", "--network", "host", *user, "-v", f"{out_dir}:/results",
                        ngc.image("sdk", "26.02"), "perf_analyzer", "-m", "m", "-u", "127.0.0.1:1",
                        "-f", "/results/x.csv"], capture_output=True, text=True, timeout=60)
    owned = (tmp_path / "docker-state" / "root-owned")
    assert not owned.exists() or all(str(out_dir) not in line or "x.csv" in line for line in owned.read_text().splitlines())


@pytest.mark.parametrize("tag, flag, ok", [("24.05", "--warmup-request-count=5", False),
                                           ("24.10", "--warmup-request-count=5", True),
                                           ("26.02", "--no-such-flag", False)])
def test_each_tag_has_its_own_perf_analyzer(fake_docker, tmp_path, tag, flag, ok):
    """MED 12 (a)/(c): the test docker ran one perf_analyzer for every tag; now each tag's own options count
    (warm-up request counts came with perf_analyzer r24.10, client r24.05 lacks them: tests/fakedocker/flags.py)."""
    (tmp_path / "docker-state").mkdir()
    (tmp_path / "docker-state" / "images").write_text(ngc.image("sdk", tag) + "\n")
    out = subprocess.run(["docker", "run", "--rm", "--network", "host", ngc.image("sdk", tag), "perf_analyzer",
                          "-m", "m", "-u", "127.0.0.1:1", flag], capture_output=True, text=True, timeout=60)
    assert ("unrecognized option" in out.stderr) is not ok, out.stderr


def test_every_docker_command_of_the_series_is_accepted_by_each_tags_binaries(tmp_path, monkeypatch):
    """Issue 35, item 3: the docker world runs one tag (conftest.DOCKER_TAG); every tritonserver, perf_analyzer,
    trtexec and model-analyzer command the helpers build (with Model Analyzer's YAML keys) is checked here against
    the option tables of 24.05 and 26.02 (and 24.10, 25.01): a few seconds instead of a docker world per tag."""
    sys.path.insert(0, str(FAKE))
    import flags
    from helpers import convert
    from helpers.server import TritonServer

    (tmp_path / "models").mkdir()
    (tmp_path / "ma").mkdir()
    assert "fp16" in flags.TRTEXEC["10.16"] and "fp16" not in flags.TRTEXEC["11.0"]  # as convert.py says of 11
    for tag in flags.TRITONSERVER:
        monkeypatch.setenv(ngc.SERIES_TAG_VARIABLE, tag)
        servers = [TritonServer(tmp_path / "models", DOCKER, models=["m"]).command(),
                   TritonServer(tmp_path / "models", DOCKER, poll_secs=5).command(),
                   analyzer.explicit_server(tmp_path / "models", DOCKER, ["m"], tag=tag).command()]
        for cmd in servers:
            args = cmd[cmd.index("tritonserver") + 1:]
            assert not flags.unknown_options("tritonserver", tag, args), (tag, args)
        clients = [perf.level_command("m", "127.0.0.1:8001", tmp_path / "perf" / "c1.csv", tag)[0],
                   perf.warmup_command("m", "127.0.0.1:8001", tmp_path / "perf" / "c1.csv", 4, tag)[0]]
        for cmd in clients:
            args = cmd[cmd.index("perf_analyzer") + 1:]
            assert not flags.unknown_options("perf_analyzer", tag, args), (tag, args)
        tensorrt = ngc.tensorrt_version(tag)  # None for 26.02: every TensorRT 10 trtexec from 25.01's on
        major = convert.command_major(tensorrt)
        builds = [convert.trtexec_args("m.onnx", "m.plan", "input", [3, 224, 224], fp16=fp16, fp16_io=io,
                                       tensorrt_major=major)
                  for fp16, io in ((True, False), (True, True), (False, False))]
        runs = [convert.engine_outputs_args("m.plan", "input", "x.bin", [1, 3, 224, 224], "out.json")]
        for args in builds + runs:
            cmd = convert.in_tensorrt_container(args, tmp_path, tag)
            trtexec = cmd[cmd.index(ngc.image("tensorrt", tag)) + 1:]
            assert trtexec[0] == "trtexec" and not flags.unknown_trtexec_options(tensorrt, trtexec[1:]), (tag, trtexec)
        server = TritonServer(tmp_path / "models", DOCKER, models=["m"])
        config = analyzer.config_for_tag({**_search(tmp_path / "models", tmp_path / "ma"),
                                          **analyzer.remote_launch(server, None, dcgm_disable=True)}, tag)
        cmd = analyzer.docker_command(tag, tmp_path / "models", tmp_path / "ma")
        args = cmd[cmd.index(ngc.image("sdk", tag)) + 1:]
        refused = flags.unknown_model_analyzer(tag, args[1:], list(config))
        assert args[0] == "model-analyzer" and not refused, (tag, args, refused)
        refused = flags.unknown_model_analyzer(tag, ["profile"], ["dcgm_disable"])  # the table does say no
        assert bool(refused) is (tag < analyzer.FIRST_TAG_WITH_DCGM_DISABLE), (tag, refused)
