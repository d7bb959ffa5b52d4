"""Build the two classifiers (pretrained when available, random offline) and export them to ONNX and TorchScript."""
from __future__ import annotations

import os
import time
import urllib.request
import warnings
from pathlib import Path

import numpy as np

WEIGHTS = ("auto", "imagenet", "random")
KERAS_WEIGHTS_URL = ("https://storage.googleapis.com/tensorflow/keras-applications/resnet/"
                     "resnet50_weights_tf_dim_ordering_tf_kernels.h5")


def _reachable(url: str, timeout: float = 5.0) -> bool:
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
        return True
    except OSError:
        return False


def resolve_weights(weights: str, cached: Path, url: str) -> str:
    """`imagenet` or `random`: `auto` takes imagenet when the file is cached or its URL answers."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}; got {weights!r}")
    if weights != "auto":
        return weights
    if cached.exists() or _reachable(url):
        return "imagenet"
    print(f"weights='auto': {cached.name} is not cached and {url.split('/')[2]} is not reachable -> random weights "
          "(class names will be meaningless; parity checks still hold)")
    return "random"


def keras_resnet50(weights: str = "auto", seed: int = 0):
    """Keras ResNet50 with ImageNet or seeded random weights; returns (model, weights used)."""
    import keras

    cached = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "models" / KERAS_WEIGHTS_URL.rsplit("/", 1)[-1]
    used = resolve_weights(weights, cached, KERAS_WEIGHTS_URL)
    keras.utils.set_random_seed(seed)
    return keras.applications.ResNet50(weights="imagenet" if used == "imagenet" else None), used


CATCH_ERRORS_VARIABLE = "TF2ONNX_CATCH_ERRORS"


def keras_to_onnx(model, path: str | Path, *, batch_size: int | None = None, input_name: str = "input_1",
                  opset: int = 17, catch_errors: bool = True) -> Path:
    """Export a Keras model with tf2onnx's Python API; batch_size None keeps the batch dimension dynamic.
    catch_errors=False exports with TF2ONNX_CATCH_ERRORS=false: no copy of the graph before each optimizer pass, and
    a pass that fails stops the export instead of being skipped."""
    import tensorflow as tf
    import tf2onnx

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shape = (batch_size, *model.inputs[0].shape[1:])
    spec = (tf.TensorSpec(shape, tf.float32, name=input_name),)
    before = os.environ.pop(CATCH_ERRORS_VARIABLE, None)
    if not catch_errors:  # unset, tf2onnx catches; set, 1.17 reads any value as false (it upper-cases the name)
        os.environ[CATCH_ERRORS_VARIABLE] = "false"
    start = time.perf_counter()
    try:
        tf2onnx.convert.from_keras(model, input_signature=spec, opset=opset, output_path=str(path))
    finally:
        os.environ.pop(CATCH_ERRORS_VARIABLE, None)
        if before is not None:
            os.environ[CATCH_ERRORS_VARIABLE] = before
    print(f"tf2onnx wrote {path} ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - start:.0f} s")
    return path


def fix_batch(onnx_path: str | Path, out_path: str | Path, batch_size: int) -> Path:
    """The article's step: overwrite every graph input's first dimension with a fixed batch size."""
    import onnx

    model = onnx.load(str(onnx_path))
    for graph_input in model.graph.input:
        graph_input.type.tensor_type.shape.dim[0].dim_value = batch_size
    onnx.save(model, str(out_path))
    return Path(out_path)


def onnx_session(path: str | Path):
    """An ONNX Runtime CPU session for a file."""
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def run_onnx(path_or_session, batch: np.ndarray) -> np.ndarray:
    """First output of an ONNX model for one input batch."""
    session = onnx_session(path_or_session) if isinstance(path_or_session, (str, Path)) else path_or_session
    return session.run(None, {session.get_inputs()[0].name: batch})[0]


def torchvision_resnet18(weights: str = "auto", seed: int = 0):
    """torchvision ResNet18 in eval mode with ImageNet or seeded random weights; returns (model, weights used)."""
    import torch
    from torchvision.models import ResNet18_Weights, resnet18

    url = ResNet18_Weights.IMAGENET1K_V1.url
    cached = Path(torch.hub.get_dir()) / "checkpoints" / url.rsplit("/", 1)[-1]
    used = resolve_weights(weights, cached, url)
    torch.manual_seed(seed)
    return resnet18(weights=ResNet18_Weights.IMAGENET1K_V1 if used == "imagenet" else None).eval(), used


def half_precision(model):
    """Wrap a torch model so it computes in FP16 while taking and returning FP32 tensors."""
    import torch

    class HalfPrecision(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner.half()

        def forward(self, x):
            return self.inner(x.half()).float()

    return HalfPrecision(model)


def to_torchscript(model, path: str | Path, *, device: str = "cpu", fp16: bool = False, freeze: bool = False,
                   channels_last: bool = False, example_batch: int = 1, uint8_input: bool = False) -> Path:
    """Trace a torch model on `device` and save it as TorchScript; optionally FP16 inside (FP32 at its edges),
    NHWC (channels_last) memory inside, frozen (weights as constants, batch norm folded into convolutions), and
    taking UINT8 NHWC images with the ImageNet normalization inside (`uint8_input`, see with_preprocessing)."""
    import torch

    if fp16 and device == "cpu":
        raise ValueError("fp16 TorchScript needs device='cuda'; CPU kernels for FP16 convolutions are slow or missing")
    module = (half_precision(model) if fp16 else model).to(device).eval()
    if channels_last:
        module = nhwc(module)
    if uint8_input:
        module = with_preprocessing(module).to(device)
        example = torch.randint(0, 256, (example_batch, 224, 224, 3), dtype=torch.uint8, device=device)
    else:
        example = torch.randn(example_batch, 3, 224, 224, device=device)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.inference_mode():
        traced = torch.jit.trace(module, example)
    if freeze:
        # torch.jit.optimize_for_inference would go further, but its graph (MKLDNN ops on CPU) does not load again
        traced = torch.jit.freeze(traced.eval())
    traced.save(str(path))
    return path


def with_preprocessing(model):
    """Wrap an NCHW FP32 classifier so it takes UINT8 NHWC images (224x224x3, 0..255, as decoded) and normalizes them
    itself, on the model's device: 150 KB per image on the wire instead of 602 KB, and no client-side preprocessing."""
    import torch

    from .images import IMAGENET_MEAN, IMAGENET_STD

    class Uint8Input(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.register_buffer("scale", 1.0 / (255.0 * torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)))
            self.register_buffer("shift", (torch.tensor(IMAGENET_MEAN) / torch.tensor(IMAGENET_STD)).view(1, 3, 1, 1))

        def forward(self, x):
            return self.inner(x.permute(0, 3, 1, 2).float() * self.scale - self.shift)

    return Uint8Input(model)


def nhwc(model):
    """Wrap a torch model so its convolutions run on channels_last (NHWC) memory, faster on tensor cores; NCHW edges."""
    import torch

    class ChannelsLast(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner.to(memory_format=torch.channels_last)

        def forward(self, x):
            return self.inner(x.contiguous(memory_format=torch.channels_last))

    return ChannelsLast(model)


def torch_to_onnx(model, path: str | Path, *, input_name: str = "INPUT__0", output_name: str = "OUTPUT__0",
                  opset: int = 17) -> Path:
    """Export a torch image classifier to ONNX with a dynamic batch dimension and explicit I/O names."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # A TorchScript module's forward is a C++ builtin without a Python signature: the TorchScript exporter says it
        # cannot inspect it ("no signature found for builtin ... skipping _decide_input_format") and exports with the
        # positional input given, which is what this export wants; nothing for a reader to act on.
        warnings.filterwarnings("ignore", message="no signature found for builtin", category=UserWarning)
        torch.onnx.export(model.cpu().eval(), (torch.randn(1, 3, 224, 224),), str(path), input_names=[input_name],
                          output_names=[output_name], dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}},
                          opset_version=opset, dynamo=False)
    return path


def run_torchscript(path: str | Path, batch: np.ndarray, device: str = "cpu") -> np.ndarray:
    """Output of a saved TorchScript module for one NCHW batch, as NumPy."""
    import torch

    module = torch.jit.load(str(path), map_location=device).eval()
    with torch.inference_mode():
        return module(torch.from_numpy(batch).to(device)).float().cpu().numpy()
