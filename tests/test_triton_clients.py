"""Triton's own example image client against the series' models (issue 33, item 4).

`triton_client/image_client.py` is the client repository's `src/python/examples/image_client.py` at branch r24.10
(commit f50fc7a; BSD-3-Clause, `triton_client/LICENSE`), unchanged: the first client Triton's quick start shows. It
reads a model's input `format` and asks for the top classes (`class_count`), whose labels come from the output's
`label_filename`. Each model must give the top class the series' own client gets for the very tensor the example
client sends (built with its own `preprocess`)."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers import client as tc, images, series
from helpers.server import TritonServer

CLIENT = Path(__file__).parent / "triton_client" / "image_client.py"
MODELS = ("resnet50_onnx", "resnet18_pytorch")  # notebook 04's Keras model, notebook 10's ResNet18


def _image_client():
    """The example client, imported as a module (its `preprocess` builds the tensor it sends)."""
    spec = importlib.util.spec_from_file_location("image_client", CLIENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _top_class(stdout: str) -> tuple[int, str]:
    """The index and label of the first class image_client.py printed (`    <score> (<index>) = <label>`)."""
    m = re.search(r"^\s+\S+ \((\d+)\) = (.+)$", stdout, re.M)
    assert m, f"image_client.py printed no class:\n{stdout}"
    return int(m.group(1)), m.group(2).strip()


@pytest.mark.notebooks
def test_tritons_image_client_classifies_every_series_image_model_like_the_series_client(ci_run, tmp_path):
    name, pixels = images.sample_images(1)[0]
    photo = tmp_path / f"{name}.png"
    Image.fromarray(pixels).save(photo)
    example = _image_client()
    labels = images.imagenet_classes()
    with TritonServer(series.ROOT / "models", "local", models=list(MODELS)) as server:
        http = tc.connect(server.url)
        for model in MODELS:
            config = http.get_model_config(model)
            tensor = config["input"][0]
            fmt = example.mc.ModelInput.Format.Value(tensor["format"])
            dims = [int(d) for d in tensor["dims"]]
            c, h, w = dims if fmt == example.mc.ModelInput.FORMAT_NCHW else (dims[2], dims[0], dims[1])
            sent = example.preprocess(Image.open(photo), fmt, tensor["data_type"].removeprefix("TYPE_"), c, h, w,
                                      "INCEPTION", "http")
            scores = next(iter(tc.infer(http, model, sent[np.newaxis]).values()))
            expected = int(np.argmax(scores[0]))
            for protocol, url in (("HTTP", server.url), ("gRPC", server.grpc_url)):
                done = subprocess.run([sys.executable, str(CLIENT), "-m", model, "-s", "INCEPTION", "-c", "1",
                                       "-u", url, "-i", protocol, str(photo)], capture_output=True, text=True,
                                      timeout=120)
                assert done.returncode == 0, f"{model} over {protocol}:\n{done.stdout}\n{done.stderr}"
                assert _top_class(done.stdout) == (expected, labels[expected]), (model, protocol, done.stdout)
