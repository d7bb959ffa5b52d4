"""Inference over HTTP or gRPC with tritonclient, the request checked against the model's metadata first."""
from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .repository import numpy_dtype, triton_dtype

PROTOCOLS = ("http", "grpc")
_OPEN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> client, for close_clients


def connect(url: str, protocol: str = "http"):
    """A tritonclient InferenceServerClient for `url` (host:port) over `protocol`."""
    if protocol == "http":
        import tritonclient.http as module
    elif protocol == "grpc":
        import tritonclient.grpc as module
    else:
        raise ValueError(f"protocol must be one of {PROTOCOLS}; got {protocol!r}")
    client = module.InferenceServerClient(url=url)
    client._tutorial_url = url
    _OPEN[id(client)] = client
    return client


def close_clients(urls: Sequence[str]) -> int:
    """Close the clients `connect` made for these URLs; returns how many. An HTTP client keeps its connection open
    (keep-alive), and a stopping Triton waits for open HTTP connections up to `--exit-timeout-secs`."""
    closing = [c for c in list(_OPEN.values()) if getattr(c, "_tutorial_url", None) in set(urls)]
    for client in closing:
        _OPEN.pop(id(client), None)
        client.close()
        client._tutorial_closed = True
    return len(closing)


def _module(client):
    if type(client).__module__.startswith("tritonclient.grpc"):
        import tritonclient.grpc as module
    else:
        import tritonclient.http as module
    return module


@dataclass
class ModelInfo:
    """What the server says of a model: its inputs, outputs (name -> (datatype, shape)) and max batch size."""

    name: str
    inputs: dict[str, tuple[str, list[int]]]
    outputs: dict[str, tuple[str, list[int]]]
    max_batch_size: int
    platform: str


def model_info(client, model_name: str) -> ModelInfo:
    """Metadata and config of a served model; a name the server does not know raises with the names it does."""
    from tritonclient.utils import InferenceServerException

    grpc = _module(client).__name__.endswith("grpc")
    kwargs = {"as_json": True} if grpc else {}
    try:
        meta = client.get_model_metadata(model_name, **kwargs)
        config = client.get_model_config(model_name, **kwargs)
    except InferenceServerException as exc:
        index = client.get_model_repository_index(**kwargs)
        models = index.get("models", []) if isinstance(index, dict) else index
        known = sorted(m["name"] for m in models)
        raise ValueError(f"model {model_name!r} is not served here; the server has {known} ({exc.message()})") from exc
    config = config.get("config", config)

    def tensors(items):
        return {t["name"]: (t["datatype"], [int(d) for d in t["shape"]]) for t in items}

    return ModelInfo(meta["name"], tensors(meta["inputs"]), tensors(meta["outputs"]),
                     int(config.get("max_batch_size", 0)), meta.get("platform", ""))


def check_inputs(info: ModelInfo, inputs: Mapping[str, np.ndarray]) -> None:
    """Raise ValueError naming what the model expects when a name, dtype, shape or batch size is off."""
    if set(inputs) != set(info.inputs):
        raise ValueError(f"model {info.name!r} takes inputs {sorted(info.inputs)}; got {sorted(inputs)}")
    for name, array in inputs.items():
        datatype, shape = info.inputs[name]
        if array.dtype != numpy_dtype(datatype):
            raise ValueError(f"model {info.name!r} input {name!r} is {datatype} ({numpy_dtype(datatype)}); "
                             f"got {array.dtype}: cast with .astype(np.{numpy_dtype(datatype)})")
        if len(array.shape) != len(shape) or any(e not in (-1, a) for e, a in zip(shape, array.shape)):
            raise ValueError(f"model {info.name!r} input {name!r} has shape {shape} (-1: any); got {list(array.shape)}")
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            bad = int(array.size - np.isfinite(array).sum())
            raise ValueError(f"model {info.name!r} input {name!r} has {bad} non-finite values (NaN or Inf) of "
                             f"{array.size}: the server would answer with meaningless scores; fix the input first")
        if info.max_batch_size and array.shape[0] > info.max_batch_size:
            raise ValueError(f"model {info.name!r} takes batches of at most {info.max_batch_size}; "
                             f"got {array.shape[0]} in {name!r}")


def infer(client, model_name: str, inputs: Mapping[str, np.ndarray] | np.ndarray,
          info: ModelInfo | None = None) -> dict[str, np.ndarray]:
    """Send one checked request (binary tensors) and return every output by name."""
    if getattr(client, "_tutorial_closed", False):
        raise ValueError(f"this client was closed when the server at {client._tutorial_url} stopped; "
                         "make a new one with connect(server.url) for the running server")
    info = info or model_info(client, model_name)
    if isinstance(inputs, np.ndarray):
        if len(info.inputs) != 1:
            raise ValueError(f"model {model_name!r} has inputs {sorted(info.inputs)}; pass a dict of arrays")
        inputs = {next(iter(info.inputs)): inputs}
    check_inputs(info, inputs)
    module = _module(client)
    grpc = module.__name__.endswith("grpc")
    request = []
    for name, array in inputs.items():
        tensor = module.InferInput(name, list(array.shape), triton_dtype(array.dtype))
        tensor.set_data_from_numpy(np.ascontiguousarray(array), **({} if grpc else {"binary_data": True}))
        request.append(tensor)
    outputs = [module.InferRequestedOutput(name, **({} if grpc else {"binary_data": True})) for name in info.outputs]
    result = client.infer(model_name, request, outputs=outputs)
    return {name: result.as_numpy(name) for name in info.outputs}
