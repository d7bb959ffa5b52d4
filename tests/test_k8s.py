"""Kubernetes manifests for the model repository, validated offline; the capacity plan's arithmetic and simulation."""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import yaml

from helpers import k8s


@pytest.fixture
def written(tmp_path):
    plain = k8s.write(k8s.plain("triton-r18", ["resnet18"], queue_target_us=800), tmp_path / "plain")
    kserve = k8s.write(k8s.kserve("triton-r18", storage_uri="s3://bucket/models"), tmp_path / "kserve")
    return plain, kserve


def test_both_flavours_validate_against_a_current_kubernetes(written):
    plain, kserve = written
    assert [p.name.split("-", 1)[1].split("-")[0] for p in plain] == [
        "persistentvolumeclaim", "deployment", "service", "podmonitor", "configmap", "horizontalpodautoscaler"]
    report = k8s.validate([*plain, *kserve])
    assert len(report) == 7 and sum("(strict)" in line for line in report) == 5
    deployment = yaml.safe_load(plain[1].read_text())["spec"]["template"]["spec"]["containers"][0]
    assert deployment["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert deployment["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert deployment["resources"]["limits"]["nvidia.com/gpu"] == 1 and deployment["image"].endswith(":24.05-py3")
    hpa = yaml.safe_load(plain[-1].read_text())
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == k8s.QUEUE_METRIC
    assert hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "800"


def test_the_removed_hpa_api_fails(written, tmp_path):
    """Triton's own Helm chart still writes autoscaling/v2beta2, removed in Kubernetes 1.26."""
    hpa = yaml.safe_load(written[0][-1].read_text())
    hpa["apiVersion"] = "autoscaling/v2beta2"
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(hpa))
    with pytest.raises(k8s.ManifestError, match="no autoscaling/v2beta2 HorizontalPodAutoscaler"):
        k8s.validate([tmp_path / "old.yaml"])


def test_a_wrong_field_fails(written, tmp_path):
    deployment = yaml.safe_load(written[0][1].read_text())
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/", "port": 1}}
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(deployment))
    with pytest.raises(k8s.ManifestError, match="'readinesProbe' was unexpected"):
        k8s.validate([tmp_path / "typo.yaml"])
    service = yaml.safe_load(written[1][0].read_text())
    service["spec"]["predictor"]["model"]["storageURI"] = "s3://x"
    (tmp_path / "isvc.yaml").write_text(yaml.safe_dump(service))
    with pytest.raises(k8s.ManifestError, match=r"storageURI: not a field of this resource"):
        k8s.validate([tmp_path / "isvc.yaml"])


def test_object_store_repository_needs_no_volume():
    docs = k8s.plain("t", ["m"], repository_uri="s3://bucket/models")
    assert [d["kind"] for d in docs][0] == "Deployment"
    assert "--model-repository=s3://bucket/models" in docs[0]["spec"]["template"]["spec"]["containers"][0]["args"]


def test_replicas_follow_the_headroom_rule():
    assert k8s.replicas_for(20000, 21548.6, 0.3) == 2  # 20000 / (21548.6 x 0.7) = 1.33 -> 2
    assert k8s.replicas_for(100, 1000, 0.0) == 1
    with pytest.raises(ValueError, match="headroom"):
        k8s.replicas_for(1, 1, 1.0)
    # a burst of exactly six replicas' rate (the CPU recording's): 3 x 43.9679 x 2 / 43.9679 is 6.000000000000001
    assert 3 * 43.9679 * 2 / 43.9679 > 6 and k8s.replicas_at(3 * 43.9679 * 2, 43.9679) == 6
    assert k8s.replicas_at(264.0, 43.9679) == 7 and k8s.replicas_for(3 * 43.9679, 43.9679 / 0.7, 0.3) == 3


def test_simulation_queues_only_when_bursts_exceed_capacity():
    calm = k8s.simulate(2, 1000, 1000, base_ms=3, seconds=20, burst_factor=1.5, burst_share=0.2)
    tight = k8s.simulate(1, 1000, 900, base_ms=3, seconds=20, burst_factor=2.0, burst_share=0.2)
    assert np.percentile(calm, 99) < 10 < np.percentile(tight, 99)
    assert abs(len(calm) / 20 - 1000) < 100  # the mean rate is the target rate
    # exactly a fifth of the seconds are bursts, so the mean rate is the target's, whatever the seed
    for seed in range(3):
        drawn = k8s.simulate(3, 100, 136, base_ms=28, seconds=600, seed=seed)
        assert abs(len(drawn) / 600 - 136) < 3, len(drawn) / 600
    # the running-maximum recursion equals an event loop that sends each request to the earliest free replica
    rng = np.random.default_rng(1)
    for replicas, service in ((1, 0.01), (3, 1 / 250), (7, 0.002)):
        arrivals = np.sort(rng.random(3000) * 10)
        free, loop = np.zeros(replicas), []
        for at in arrivals:
            k = int(np.argmin(free))
            loop.append(max(at, free[k]))
            free[k] = loop[-1] + service
        assert np.allclose(k8s.starts(arrivals, replicas, service), loop, rtol=0, atol=1e-9)
    # a request that finds a replica free takes the measured latency without queueing, base_ms, and no more
    lone = k8s.simulate(50, 100, 1, base_ms=28.4, seconds=10)
    assert np.median(lone) == pytest.approx(28.4) and lone.min() == pytest.approx(28.4)


def test_manifests_are_plain_yaml_without_anchors(written):
    """Issue 24, item 32: the Deployment reuses one labels dict three times; PyYAML's default writes it as
    `&id001` ... `*id001`. The files spell it out, as a manifest written by hand does."""
    plain, kserve = written
    for path in [*plain, *kserve]:
        text = path.read_text()
        assert not re.search(r"[&*]id\d+", text), (path.name, text)
    deployment = yaml.safe_load(plain[1].read_text())
    assert deployment["spec"]["selector"]["matchLabels"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert "yaml.safe_dump" not in inspect.getsource(k8s.plain)  # the adapter rule's embedded YAML too
    assert "&id" in yaml.safe_dump(k8s.plain("a", ["m"])[1])  # what the plain dumper avoids


def _repository(tmp_path, kind: str):
    """A one-model repository whose instance group is `kind` (the config only: the check reads configs)."""
    folder = tmp_path / f"repo_{kind}" / "resnet18"
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(
        'name: "resnet18"\nplatform: "pytorch_libtorch"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n'
        f'instance_group [ {{ count: 1 kind: {kind} }} ]\n')
    return folder.parent


@pytest.mark.parametrize("gpus", [1, 0])
def test_exported_config_runs_where_the_pod_has_a_device(tmp_path, gpus):
    """Issue 24, item 32: a GPU pod serves a KIND_GPU config; a CPU pod requests no GPU and serves KIND_CPU. The
    opposite pairing is refused, for the plain and the KServe flavour alike."""
    match, other = ("KIND_GPU", "KIND_CPU") if gpus else ("KIND_CPU", "KIND_GPU")
    for docs in (k8s.plain("t", ["resnet18"], gpus=gpus), k8s.kserve("t", storage_uri="s3://b/m", gpus=gpus)):
        assert k8s.pod_gpus(docs) == gpus
        assert ("nvidia.com/gpu" in k8s.dump(docs[-1] if docs[0]["kind"] == "InferenceService" else docs[1])) == bool(gpus)
        assert k8s.check_repository(docs, _repository(tmp_path, match)) == [
            f"resnet18: {match} in pods with {gpus} GPU(s)"]
        with pytest.raises(k8s.ManifestError, match=f"instance group \\['{other}'\\] in a pod that requests {gpus} GPU"):
            k8s.check_repository(docs, _repository(tmp_path, other))
    plain = k8s.write(k8s.plain("t", ["resnet18"], gpus=gpus), tmp_path / f"plain{gpus}")
    assert len(k8s.validate(plain)) == 6


def test_the_loader_pod_fills_the_claim_the_pods_read(tmp_path):
    """The repository reaches the claim through a pod that mounts it read-write; the replicas mount it read-only."""
    docs = k8s.plain("triton-r18", ["resnet18"])
    claim, deployment = docs[0], docs[1]["spec"]["template"]["spec"]
    pod = k8s.loader("triton-r18")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # one writer first, then every replica reads
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": claim["metadata"]["name"]}
    assert not pod["spec"]["containers"][0]["volumeMounts"][0].get("readOnly")
    assert deployment["volumes"][1]["persistentVolumeClaim"]["readOnly"] is True
    files = k8s.write([pod], tmp_path / "load")
    assert len(k8s.validate(files)) == 1
    commands = k8s.load_commands("triton-r18", "build/k8s/model_repository", files[0], "plain/01-pvc.yaml")
    assert commands[0] == f"kubectl apply -f plain/01-pvc.yaml -f {files[0]}"
    assert "tar -C build/k8s/model_repository -cf - . | kubectl exec -i triton-r18-loader -- tar -xf - -C /models" in commands
    assert commands[-1] == "kubectl delete pod triton-r18-loader"


def test_warm_up_covers_every_batch_size_the_pods_can_form():
    """Helper review 10: a pod's batcher forms any size up to max_batch_size, so its warm-up covers 1..max_batch_size
    (this machine's server only the sizes its batch-1 levels can form); the printed config shows the warm-up."""
    assert k8s.warm_batch_sizes(64) == list(range(1, 65))
    assert k8s.warm_batch_sizes(64, up_to=4) == [1, 2, 3, 4] and k8s.warm_batch_sizes(8, up_to=16)[-1] == 8
    assert k8s.warm_batch_sizes(0) == [1]  # an unbatched model: one warm-up request
    config = k8s.mc.ModelConfig(name="m", max_batch_size=4)
    config.input.add(name="INPUT__0", data_type=k8s.mc.TYPE_FP32, dims=[3])
    for size in k8s.warm_batch_sizes(4):
        config.model_warmup.add(name=f"batch{size}", batch_size=size, count=2)
    text = k8s.config_text(config)
    assert text.count("model_warmup {") == 1 and 'name: "batch1"' in text
    assert text.endswith("# ... and 3 more model_warmup entries like this one, batch_size 2 to 4\n")
    assert len(config.model_warmup) == 4  # the config itself is not changed


def _knobs(stable: bool):
    import pandas as pd

    row = {"knob": "transport", "value": "gRPC", "concurrency": 16, "stable": stable,
           "throughput": 4000.0 if stable else float("nan"), "p50_ms": 4.0 if stable else float("nan"),
           "p99_ms": 6.0 if stable else float("nan"), "queue_ms": 1.5 if stable else float("nan"),
           "error": float("nan") if stable else "perf_analyzer passed the memory limit"}
    parts = dict(zip(k8s.LATENCY_PARTS, (0.1, 1.0, 1.5, 0.1, 2.0, 0.1, 0.2)))  # mean latency 5.0 ms, queue 1.5
    row.update({k: v if stable else float("nan") for k, v in parts.items()})
    return pd.DataFrame([{**row, **{k: 0.5 for k in k8s.LATENCY_PARTS}, "value": "gRPC + system shm", "stable": True,
                          "throughput": 5000.0, "p50_ms": 3.0, "p99_ms": 5.0, "queue_ms": 1.0, "error": float("nan")},
                         row])


def test_recorded_rate_reads_one_row_and_its_own_queue_free_latency():
    """Numbers review 15: the GPU recording's rate per replica and its latency without queueing come from one row, so one
    transport; an unstable row gives no rate, with the row's error; a missing row is named."""
    got = k8s.recorded_rate(_knobs(True))
    assert got["stable"] and got["throughput"] == 4000.0 and got["concurrency"] == 16
    # mean latency 5.0 - mean queue 1.5 (both means; not the p50, not the shared-memory row's)
    assert got["mean_ms"] == pytest.approx(5.0) and got["base_ms"] == pytest.approx(3.5)
    skipped = k8s.recorded_rate(_knobs(False))
    assert not skipped["stable"] and skipped["error"] == "perf_analyzer passed the memory limit"
    assert "throughput" not in skipped
    with pytest.raises(ValueError, match=r"knob == 'transport' and value == 'HTTP'; found 0 .*'gRPC \+ system shm'"):
        k8s.recorded_rate(_knobs(True), value="HTTP")
    with pytest.raises(ValueError, match=r"expected perf_analyzer's columns \['client_recv_ms'\]"):
        k8s.recorded_rate(_knobs(True).drop(columns="client_recv_ms"))


def test_model_pick_names_the_optimized_model_with_its_run_s_notebook_12_pick(tmp_path):
    """Fix review s22 P3: notebook 20 calls the GPU plan conservative only where the exported model is the one the
    recorded row measured; a run without notebook 12's results names no pick, so nothing matches it."""
    import json

    assert k8s.model_pick(tmp_path, "resnet18_pytorch") == "resnet18_pytorch"
    assert k8s.model_pick(tmp_path, "resnet18_opt") is None and k8s.model_pick(tmp_path, None) is None
    (tmp_path / "12_optimize_tensorrt.json").write_text(json.dumps({"winner": "fp16_nhwc_frozen"}))
    assert k8s.model_pick(tmp_path, "resnet18_opt") == "resnet18_opt (fp16_nhwc_frozen)"
    (tmp_path / "12_optimize_tensorrt.json").write_text(json.dumps({"winner": None}))
    assert k8s.model_pick(tmp_path, "resnet18_opt") is None


def test_the_knob_model_of_13s_results_older_than_the_key_comes_from_its_pair():
    """Numbers review s26 N2: a GPU recording made before 13 saved `knob_model` still names the model its rows
    measured (13 turned its knobs on the optimized model, else on resnet18_pytorch_db)."""
    assert k8s.knob_model({"knob_model": "resnet18_opt", "pair": "x"}) == "resnet18_opt"
    assert k8s.knob_model({"pair": "local runtime, cuda: resnet18_opt vs resnet18_pytorch"}) == "resnet18_opt"
    assert k8s.knob_model({"pair": "local runtime, cpu: dynamic batching vs resnet18_pytorch"}) == "resnet18_pytorch_db"
    assert k8s.knob_model({}) is None


def test_a_pods_network_and_the_hpa_floor():
    """Numbers review s23: the GPU plan's row ran over loopback, so notebook 20 prints the link a pod needs; teaching
    review s23 F3: the HPA target lies above what a lone request waits with the batcher's delay."""
    from tritonclient.grpc import model_config_pb2 as mc

    config = mc.ModelConfig(name="m", max_batch_size=16)
    config.input.add(name="x", data_type=mc.TYPE_FP32, dims=[3, 224, 224])
    assert k8s.request_bytes(config) == 602_112
    config.input.add(name="y", data_type=mc.TYPE_UINT8, dims=[224, 224, 3])
    assert k8s.request_bytes(config) == 602_112 + 150_528
    config.input.add(name="z", data_type=mc.TYPE_FP32, dims=[-1])
    with pytest.raises(ValueError, match=r"input 'z': a fixed-size numeric tensor expected; found TYPE_FP32 \[-1\]"):
        k8s.request_bytes(config)
    assert k8s.link_gbit(2000, 602_112) == pytest.approx(9.633792)
    assert k8s.queue_floor_us(0) == 100.0 and k8s.queue_floor_us(100) == 200.0
    assert k8s.queue_floor_us(100, idle_queue_us=240.86) == pytest.approx(481.72)
