"""Preprocessing, labels, parity and timing helpers."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import bench, images


def test_helpers_load_torch_before_tensorflow_and_only_when_it_comes():
    """torch after TensorFlow segfaults with the pinned wheels; a process that only serves must not pay for torch."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    probe = ("import sys; from helpers.server import TritonServer; assert 'torch' not in sys.modules; "
             "import keras; assert 'torchvision' in sys.modules; import torch, torchvision; print('ok')")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_keras_preprocessing_matches_keras_preprocess_input():
    import keras

    _, img = images.load_image("astronaut")
    raw = images.keras_resnet50_batch([img], preprocess=False)
    assert raw.shape == (1, 224, 224, 3) and raw.max() > 1.5  # 0..255 range kept
    np.testing.assert_allclose(images.keras_resnet50_batch([img]),
                               keras.applications.resnet50.preprocess_input(raw.copy()), atol=1e-4)


def test_torchvision_batch_is_normalized_nchw():
    batch = images.torchvision_batch([img for _, img in images.sample_images(2)])
    assert batch.shape == (2, 3, 224, 224) and batch.dtype == np.float32
    assert -3 < batch.mean() < 3 and batch.std() > 0.3


def test_labels_and_top_k():
    assert len(images.imagenet_classes()) == 1000
    scores = np.zeros(1000)
    scores[[207, 281]] = [0.7, 0.2]
    top = images.top_k(scores, 2)
    assert [(i, n) for i, n, _ in top] == [(207, "golden retriever"), (281, "tabby")]


def test_bad_image_names_are_refused():
    with pytest.raises(ValueError, match="image must be 'auto', a URL or one of"):
        images.load_image("dog")
    with pytest.raises(ValueError, match="n must be between 1 and"):
        images.sample_images(0)


def test_parity_and_summary():
    a = np.array([[0.1, 0.9], [0.8, 0.2]])
    assert bench.parity(a, a + 1e-3) == pytest.approx({"max_abs_diff": 1e-3, "top1_agreement": 1.0}, abs=1e-6)
    assert bench.parity(a, a[:, ::-1])["top1_agreement"] == 0.0
    with pytest.raises(ValueError, match="same shape"):
        bench.parity(a, a[:1])
    calls = []
    samples = bench.time_calls(lambda: calls.append(1), warmup=2, repeats=4)
    assert len(calls) == 6 and len(samples) == 4
    table = bench.summarize({"x": np.array([1.0, 2.0, 3.0, 4.0])})
    assert table.loc["x", "p50_ms"] == 2.5 and table.loc["x", "n"] == 4
