"""The series' model repository on Kubernetes: manifests (plain, and KServe), their offline validation, and a
capacity plan from measured numbers. Nothing here needs a cluster; `kubectl apply -f <folder>` is the reader's step.

Kubernetes API: https://kubernetes.io/docs/reference/kubernetes-api/
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml
from tritonclient.grpc import model_config_pb2 as mc

from . import ngc
from . import repository as repo
from .perf import LATENCY_PARTS

# The newest Kubernetes release whose schemas the pinned kubernetes-validate ships (autoscaling/v2beta2 was
# removed in 1.26, so a manifest that still uses it does not validate against this version).
K8S_VERSION = "1.37.0"
CONTAINER_PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002}
# The per-request queue time the HPA reads, as prometheus-adapter names it from Triton's counters.
QUEUE_METRIC = "triton_queue_us_per_request"

# Custom resources the manifests use and the fields they set, from the upstream CRDs (prometheus-operator's
# PodMonitor, KServe's InferenceService): kubernetes-validate has no schema for CRDs, so these are checked here.
CRD_FIELDS = {
    ("monitoring.coreos.com/v1", "PodMonitor"): {
        "spec": {"selector": {"matchLabels": None}, "podMetricsEndpoints": [{"port": None, "path": None,
                                                                              "interval": None}]}},
    ("serving.kserve.io/v1beta1", "InferenceService"): {
        "spec": {"predictor": {"minReplicas": None, "maxReplicas": None, "scaleMetric": None, "scaleTarget": None,
                               "model": {"modelFormat": {"name": None, "version": None}, "runtime": None,
                                         "runtimeVersion": None, "storageUri": None, "args": None,
                                         "resources": None}}}},
}


def _labels(app: str) -> dict:
    return {"app.kubernetes.io/name": app}


class _PlainDumper(yaml.SafeDumper):
    """PyYAML's safe dumper without anchors: a dict used twice (the Deployment's labels, its selector and its
    template's labels) is written out twice, as a manifest is written by hand, not as `&id001` ... `*id001`."""

    def ignore_aliases(self, data) -> bool:
        return True


def dump(doc: dict) -> str:
    """One manifest as plain YAML: keys in the order built, no anchors or aliases."""
    return yaml.dump(doc, Dumper=_PlainDumper, sort_keys=False)


def _resources(gpus: int, cpu: str, memory: str) -> dict:
    """A container's resources: `gpus` GPUs (the device plugin's `nvidia.com/gpu` limit) or none, and CPU/memory."""
    if gpus < 0:
        raise ValueError(f"gpus must be >= 0; got {gpus}")
    requests = {"requests": {"cpu": cpu, "memory": memory}}
    return {"limits": {"nvidia.com/gpu": gpus}, **requests} if gpus else requests


def plain(app: str, models: Sequence[str], *, tag: str = "series", repository_uri: str = "pvc",
          pvc_size: str = "10Gi", min_replicas: int = 1, max_replicas: int = 4, queue_target_us: float = 1000.0,
          cpu: str = "4", memory: str = "16Gi", gpus: int = 1) -> list[dict]:
    """Deployment, Service, PodMonitor, prometheus-adapter rule and HPA, one Triton per pod with `gpus` GPUs (0: a
    CPU pod, no GPU request), in apply order.
    `repository_uri`: "pvc" (a PersistentVolumeClaim mounted at /models, also created) or an object-store URI
    Triton reads itself (s3://..., gs://..., as://...)."""
    labels = _labels(app)
    docs: list[dict] = []
    repo = "/models" if repository_uri == "pvc" else repository_uri
    if repository_uri == "pvc":
        # written once by the loader pod (`loader`), read by every replica: a storage class with ReadWriteMany
        # (NFS, CephFS, a cloud file store); the pods mount it read-only
        docs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"{app}-models"},
                     "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": pvc_size}}}})
    probe = lambda path, period, failures: {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period,
                                            "failureThreshold": failures}
    container = {
        "name": "tritonserver", "image": ngc.image("tritonserver", tag),
        "args": ["tritonserver", f"--model-repository={repo}", "--model-control-mode=explicit",
                 *[f"--load-model={m}" for m in models], "--exit-timeout-secs=30"],
        "ports": [{"name": n, "containerPort": p} for n, p in CONTAINER_PORTS.items()],
        "resources": _resources(gpus, cpu, memory),
        # ready: every model loaded (the load balancer sends nothing before); live: the process answers
        "startupProbe": probe("/v2/health/ready", 10, 60),  # up to 10 minutes to load models and warm up
        "readinessProbe": probe("/v2/health/ready", 5, 3),
        "livenessProbe": probe("/v2/health/live", 10, 3),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}]
    if repository_uri == "pvc":
        container["volumeMounts"].append({"name": "models", "mountPath": "/models", "readOnly": True})
        volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": f"{app}-models", "readOnly": True}})
    docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "labels": labels},
                 "spec": {"replicas": min_replicas, "selector": {"matchLabels": labels},
                          "template": {"metadata": {"labels": labels},
                                       "spec": {"containers": [container], "volumes": volumes,
                                                "terminationGracePeriodSeconds": 40}}}})
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "labels": labels},
                 "spec": {"selector": labels, "ports": [{"name": n, "port": p, "targetPort": n}
                                                        for n, p in CONTAINER_PORTS.items()]}})
    docs.append({"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
                 "metadata": {"name": app, "labels": labels},
                 "spec": {"selector": {"matchLabels": labels},
                          "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s"}]}})
    docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{app}-adapter-rule"},
                 "data": {"config.yaml": dump({"rules": [adapter_rule()]})}})
    docs.append({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": app},
                 "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app},
                          "minReplicas": min_replicas, "maxReplicas": max_replicas,
                          "metrics": [{"type": "Pods", "pods": {
                              "metric": {"name": QUEUE_METRIC},
                              "target": {"type": "AverageValue", "averageValue": f"{int(queue_target_us)}"}}}],
                          "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}}})
    return docs


LOADER_IMAGE = "busybox:1.36"  # has tar, which `kubectl exec ... tar -xf -` needs


def loader(app: str) -> dict:
    """A pod that mounts the repository's PersistentVolumeClaim read-write and waits, so the exported repository can
    be copied in (`kubectl exec -i POD -- tar -xf - -C /models`) before the Deployment starts."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{app}-loader", "labels": _labels(app)},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "loader", "image": LOADER_IMAGE, "command": ["sleep", "3600"],
                                     "volumeMounts": [{"name": "models", "mountPath": "/models"}]}],
                     "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": f"{app}-models"}}]}}


def load_commands(app: str, repository: str | Path, loader_file: str | Path, pvc_file: str | Path) -> list[str]:
    """The shell commands that fill the claim with `repository`: claim, loader pod, copy, loader gone."""
    pod = f"{app}-loader"
    return [f"kubectl apply -f {pvc_file} -f {loader_file}",
            f"kubectl wait --for=condition=Ready pod/{pod} --timeout=300s",
            f"tar -C {repository} -cf - . | kubectl exec -i {pod} -- tar -xf - -C /models",
            f"kubectl delete pod {pod}"]


def adapter_rule() -> dict:
    """prometheus-adapter rule: Triton's cumulative queue time over its successful requests, per pod, as the
    average microseconds a request waited in the last minute (what notebook 20 measures against concurrency)."""
    return {
        "seriesQuery": 'nv_inference_queue_duration_us{namespace!="",pod!=""}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"matches": "^nv_inference_queue_duration_us$", "as": QUEUE_METRIC},
        "metricsQuery": ("sum(rate(nv_inference_queue_duration_us{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>) / "
                         "clamp_min(sum(rate(nv_inference_request_success{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>), 1)"),
    }


def kserve(app: str, *, tag: str = "series", storage_uri: str, min_replicas: int = 1,
           max_replicas: int = 4, gpus: int = 1) -> list[dict]:
    """An InferenceService on KServe's `kserve-tritonserver` runtime serving the whole repository (modelFormat
    triton; its `tensorrt` format is declared as TensorRT 8, older than the engines of NGC 24.05+), `gpus` GPUs per
    pod (0: none requested)."""
    return [{"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": app},
             "spec": {"predictor": {"minReplicas": min_replicas, "maxReplicas": max_replicas,
                                    "model": {"modelFormat": {"name": "triton"}, "runtime": "kserve-tritonserver",
                                              "runtimeVersion": f"{ngc.series_tag(tag)}-py3", "storageUri": storage_uri,
                                              "resources": _resources(gpus, "4", "16Gi")}}}}]


def write(docs: Sequence[dict], folder: str | Path) -> list[Path]:
    """One numbered YAML file per manifest, in the order `kubectl apply -f folder` should meet them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.yaml"):
        old.unlink()
    paths = []
    for k, doc in enumerate(docs, 1):
        path = folder / f"{k:02d}-{doc['kind'].lower()}-{doc['metadata']['name']}.yaml"
        path.write_text(dump(doc))
        paths.append(path)
    return paths


class ManifestError(ValueError):
    """A manifest Kubernetes (or the CRD it uses) would refuse; the message names the file and the field."""


def _check_fields(value, allowed, where: str) -> None:
    if allowed is None:
        return
    if isinstance(allowed, list):
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            _check_fields(item, allowed[0], f"{where}[{i}]")
        return
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: expected an object, found {type(value).__name__}")
    for key, item in value.items():
        if key not in allowed:
            raise ManifestError(f"{where}.{key}: not a field of this resource (known: {sorted(allowed)})")
        _check_fields(item, allowed[key], f"{where}.{key}")


def validate(paths: Sequence[str | Path], version: str = K8S_VERSION) -> list[str]:
    """Validate manifest files offline: built-in kinds with kubernetes-validate against `version` (strict: unknown
    fields fail, and an API the version no longer serves fails), custom resources against CRD_FIELDS. Returns one
    line per manifest; raises ManifestError at the first problem."""
    import kubernetes_validate

    report = []
    for path in map(Path, paths):
        for doc in yaml.safe_load_all(path.read_text()):
            key = (doc.get("apiVersion", ""), doc.get("kind", ""))
            where = f"{path.name}: {key[1]} {doc.get('metadata', {}).get('name', '?')}"
            if key in CRD_FIELDS:
                _check_fields({k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")},
                              CRD_FIELDS[key], where)
                report.append(f"{where}: fields checked against the {key[0]} CRD")
                continue
            if "." in key[0].split("/")[0] and not key[0].startswith(("apps/", "autoscaling/", "batch/", "policy/")):
                raise ManifestError(f"{where}: {key[0]} {key[1]} is a custom resource this series does not know")
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                raise ManifestError(f"{where}: Kubernetes {version} has no {key[0]} {key[1]} (a removed or "
                                    "misspelled API: HorizontalPodAutoscaler is autoscaling/v2 since 1.23, and "
                                    "autoscaling/v2beta2 was removed in 1.26)") from None
            except kubernetes_validate.ValidationError as exc:
                raise ManifestError(f"{where}: {exc.message} (at {'.'.join(map(str, exc.path))})") from None
            report.append(f"{where}: valid for Kubernetes {version} (strict)")
    return report


def pod_gpus(docs: Sequence[dict]) -> int:
    """The GPUs each Triton pod of these manifests requests (`nvidia.com/gpu`), from its Deployment or
    InferenceService; raises when they disagree or there is no Triton pod."""
    found = set()
    for doc in docs:
        if doc["kind"] == "Deployment":
            containers = doc["spec"]["template"]["spec"]["containers"]
        elif doc["kind"] == "InferenceService":
            containers = [doc["spec"]["predictor"]["model"]]
        else:
            continue
        found |= {int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)) for c in containers}
    if len(found) != 1:
        raise ManifestError(f"expected one GPU count for the Triton pods; found {sorted(found) or 'no Triton pod'}")
    return found.pop()


def check_repository(docs: Sequence[dict], repository: str | Path) -> list[str]:
    """Every model the pods would load runs where the pods have a device: KIND_GPU instance groups for pods that
    request GPUs, KIND_CPU for pods that do not (a KIND_CPU model on a GPU pod leaves the GPU idle; a KIND_GPU model
    on a CPU pod fails to load). Returns one line per model; raises ManifestError at the first mismatch."""
    gpus = pod_gpus(docs)
    want = "KIND_GPU" if gpus else "KIND_CPU"
    lines = []
    for folder in sorted(p for p in Path(repository).iterdir() if (p / "config.pbtxt").exists()):
        config = repo.read_config(folder)
        kinds = [mc.ModelInstanceGroup.Kind.Name(g.kind) for g in config.instance_group] or ["KIND_AUTO (no group)"]
        if any(kind != want for kind in kinds):
            raise ManifestError(f"model '{config.name}': instance group {kinds} in a pod that requests {gpus} GPU(s); "
                                f"expected {want} (derive the exported model with instance_kind={want!r}, or change "
                                "the pods' nvidia.com/gpu request)")
        lines.append(f"{config.name}: {', '.join(kinds)} in pods with {gpus} GPU(s)")
    if not lines:
        raise ManifestError(f"no model with a config.pbtxt in {repository}")
    return lines


def replicas_at(rate_rps: float, per_replica_rps: float) -> int:
    """The fewest replicas that serve `rate_rps` at `per_replica_rps` each (a quotient that is whole in exact
    arithmetic stays whole: 6.000000000000001 is 6)."""
    return max(1, math.ceil(round(rate_rps / per_replica_rps, 9)))


def replicas_for(target_rps: float, per_replica_rps: float, headroom: float = 0.3) -> int:
    """Replicas for a request rate when each may run at (1 - headroom) of its measured knee throughput."""
    if not 0 <= headroom < 1:
        raise ValueError(f"headroom must be in [0, 1); got {headroom}")
    return replicas_at(target_rps, per_replica_rps * (1 - headroom))


def simulate(replicas: int, per_replica_rps: float, target_rps: float, *, base_ms: float, seconds: float = 600.0,
             burst_factor: float = 2.0, burst_share: float = 0.2, seed: int = 0) -> np.ndarray:
    """Latencies (ms) of a discrete-event run: Poisson arrivals in one-second periods, exactly round(burst_share x
    periods) of them bursts at rate x burst_factor (at random places), the rest lower, so the mean is the target;
    each request goes to the replica that frees up first; a replica serves one request per 1/per_replica_rps (its
    measured knee, so batching is folded into that rate); a request's latency is its wait for a free replica plus
    base_ms, the latency measured without queueing."""
    rng = np.random.default_rng(seed)
    low = target_rps * (1 - burst_share * burst_factor) / (1 - burst_share)
    if low <= 0:
        raise ValueError("burst_factor x burst_share must stay below 1")
    periods = max(1, round(seconds))
    bursts = np.zeros(periods, bool)
    bursts[rng.permutation(periods)[:round(burst_share * periods)]] = True
    counts = rng.poisson(np.where(bursts, target_rps * burst_factor, low))
    arrivals = np.concatenate([t + np.sort(rng.random(n)) for t, n in enumerate(counts)]) if counts.sum() else np.zeros(0)
    return (starts(arrivals, replicas, 1.0 / per_replica_rps) - arrivals) * 1000.0 + base_ms


def starts(arrivals: np.ndarray, replicas: int, service_s: float) -> np.ndarray:
    """When each request (sorted arrival times, s) starts, each sent to the replica that frees up first. With equal
    service times replicas free up in the order their requests started, so request i starts once request i - replicas
    is done: start_i = max(arrival_i, start_(i - replicas) + service), a running maximum along each chain."""
    start = np.empty(len(arrivals))
    for chain in range(replicas):
        a = arrivals[chain::replicas]
        k = np.arange(len(a)) * service_s
        start[chain::replicas] = k + np.maximum.accumulate(a - k) if len(a) else a
    return start


def warm_batch_sizes(max_batch_size: int, up_to: int | None = None) -> list[int]:
    """Every batch size 1..max_batch_size (at most `up_to`): the sizes a dynamic batcher can form. TorchScript
    specializes on each new shape, so a pod warmed at these sizes at load serves no request at a cold size."""
    top = max(max_batch_size, 1) if up_to is None else min(max(max_batch_size, 1), up_to)
    return list(range(1, top + 1))


def config_text(config: mc.ModelConfig) -> str:
    """A config as config.pbtxt text, its model_warmup entries after the first (which differ from it only in name
    and batch_size) summarized in one line."""
    brief = mc.ModelConfig()
    brief.CopyFrom(config)
    more = [w.batch_size for w in brief.model_warmup[1:]]
    del brief.model_warmup[1:]
    return repo.to_text(brief) + (f"# ... and {len(more)} more model_warmup entries like this one, batch_size "
                                  f"{more[0]} to {more[-1]}\n" if more else "")


_ELEMENT_BYTES = {"TYPE_BOOL": 1, "TYPE_UINT8": 1, "TYPE_INT8": 1, "TYPE_FP16": 2, "TYPE_BF16": 2, "TYPE_INT16": 2,
                  "TYPE_UINT16": 2, "TYPE_FP32": 4, "TYPE_INT32": 4, "TYPE_UINT32": 4, "TYPE_FP64": 8, "TYPE_INT64": 8,
                  "TYPE_UINT64": 8}


def request_bytes(config: mc.ModelConfig) -> int:
    """Bytes of one batch-1 request's inputs, as a model config declares them (dims x element size)."""
    total = 0
    for tensor in config.input:
        kind = mc.DataType.Name(tensor.data_type)
        if kind not in _ELEMENT_BYTES or any(d < 0 for d in tensor.dims):
            raise ValueError(f"input '{tensor.name}': a fixed-size numeric tensor expected; found {kind} {list(tensor.dims)}")
        total += _ELEMENT_BYTES[kind] * math.prod(tensor.dims)
    return total


def link_gbit(rate_rps: float, nbytes: int) -> float:
    """The network a replica needs for its input tensors alone (Gbit/s) at `rate_rps` requests of `nbytes`."""
    return rate_rps * nbytes * 8 / 1e9


def queue_floor_us(max_queue_delay_us: float, idle_queue_us: float = 0.0) -> float:
    """The lowest HPA target on queue time: twice what a request waits with the server idle (the batcher's delay,
    which a request below every preferred size waits in full, or the queue measured at the lowest load), at least 100 us."""
    return max(100.0, 2 * float(max_queue_delay_us), 2 * float(idle_queue_us))


def knob_model(results_13: dict) -> str | None:
    """The model notebook 13 turned its knobs on: its `knob_model`; in results older than that key, the first model of
    its `pair` ('<optimized> vs resnet18_pytorch', where 'dynamic batching' stood for resnet18_pytorch_db)."""
    if results_13.get("knob_model"):
        return results_13["knob_model"]
    pair = str(results_13.get("pair") or "")
    first = pair.split(": ", 1)[-1].split(" vs ")[0].strip() if " vs " in pair else ""
    return {"": None, "dynamic batching": "resnet18_pytorch_db"}.get(first, first)


def model_pick(results_dir: str | Path, model: str | None) -> str | None:
    """`model` as a run measured it: the optimized model named with notebook 12's pick from that run's results
    (`resnet18_opt (fp16_nhwc_frozen)`), another model by its name; None where the results do not say."""
    if model != "resnet18_opt":
        return model
    file = Path(results_dir) / "12_optimize_tensorrt.json"
    winner = json.loads(file.read_text()).get("winner") if file.exists() else None
    return f"resnet18_opt ({winner})" if winner else None


def recorded_rate(table, knob: str = "transport", value: str = "gRPC") -> dict:
    """One row of a recorded knob table (notebook 13's 13_knobs.csv) as a replica's rate: its concurrency,
    throughput, p50 and p99, and its latency without queueing (the row's mean latency, the sum of perf_analyzer's
    parts, minus its mean queue time: the same row, so the same transport). `stable` is False, with the row's
    `error`, when that row was not measured to a stable result."""
    rows = table[(table["knob"].astype(str) == knob) & (table["value"].astype(str) == value)]
    if len(rows) != 1:
        values = sorted(table.loc[table["knob"].astype(str) == knob, "value"].astype(str))
        raise ValueError(f"expected one row with knob == {knob!r} and value == {value!r}; found {len(rows)} "
                         f"(that knob's values: {values})")
    row = rows.iloc[0]
    found = {"knob": knob, "value": value, "concurrency": int(row["concurrency"])}
    measured = ("throughput", "p50_ms", "p99_ms", "queue_ms")
    missing = [c for c in (*measured, *LATENCY_PARTS) if c not in row]
    if missing:
        raise ValueError(f"expected perf_analyzer's columns {missing} in the knob table; found {list(row.index)}")
    if str(row["stable"]).strip().lower() != "true" or any(row[c] != row[c] for c in measured):  # NaN != NaN
        error = row.get("error")
        return {**found, "stable": False,
                "error": str(error) if error == error and error is not None else "no error recorded"}
    mean_ms = sum(float(row[c]) for c in LATENCY_PARTS)
    return {**found, "stable": True, **{c: float(row[c]) for c in measured}, "mean_ms": mean_ms,
            "base_ms": mean_ms - float(row["queue_ms"])}
