"""Sample images (the article's URL when reachable, else scikit-image's bundled photos), preprocessing and labels."""
from __future__ import annotations

import io
import urllib.request
from functools import lru_cache

import numpy as np

# torchvision's ImageNet normalization (also inside export.with_preprocessing, for models that take UINT8)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
ARTICLE_IMAGE_URL = "https://images.dog.ceo/breeds/retriever-golden/n02099601_3004.jpg"
# Photos that ship inside scikit-image, so tests and offline runs need no network.
SKIMAGE_SAMPLES = ("chelsea", "astronaut", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry")


def _skimage(name: str) -> np.ndarray:
    from skimage import data

    img = getattr(data, name)()
    return img[..., :3] if img.ndim == 3 else np.stack([img] * 3, axis=-1)


def load_image(source: str = "auto", timeout: float = 5.0) -> tuple[str, np.ndarray]:
    """(name, HxWx3 uint8 RGB): `auto` tries the article's URL then falls back to skimage's cat; or a skimage name/URL."""
    if source in SKIMAGE_SAMPLES:
        return source, _skimage(source)
    url = ARTICLE_IMAGE_URL if source == "auto" else source
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"image must be 'auto', a URL or one of {SKIMAGE_SAMPLES}; got {source!r}")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            from skimage import io as skio

            return url.rsplit("/", 1)[-1], skio.imread(io.BytesIO(resp.read()))[..., :3]
    except OSError as exc:
        if source != "auto":
            raise
        print(f"article image not reachable ({type(exc).__name__}); using skimage.data.chelsea() instead")
        return "chelsea", _skimage("chelsea")


def sample_images(n: int = 6) -> list[tuple[str, np.ndarray]]:
    """`n` distinct real photos from scikit-image (at most len(SKIMAGE_SAMPLES))."""
    if not 1 <= n <= len(SKIMAGE_SAMPLES):
        raise ValueError(f"n must be between 1 and {len(SKIMAGE_SAMPLES)}; got {n}")
    return [(name, _skimage(name)) for name in SKIMAGE_SAMPLES[:n]]


def resize(img: np.ndarray, size: int = 224) -> np.ndarray:
    """Resize to size x size, keeping the 0..255 range as float32 (what the article's `255 * resize(...)` meant)."""
    from skimage.transform import resize as sk_resize

    return sk_resize(img, (size, size), preserve_range=True, anti_aliasing=True).astype(np.float32)


def keras_resnet50_batch(images: list[np.ndarray], preprocess: bool = True) -> np.ndarray:
    """NHWC float32 batch for Keras ResNet50; `preprocess` applies its preprocess_input (RGB->BGR, ImageNet means)."""
    batch = np.stack([resize(img) for img in images])
    if not preprocess:
        return batch
    # keras.applications.resnet50.preprocess_input ("caffe" mode), written out so it needs no TensorFlow import.
    return batch[..., ::-1] - np.array([103.939, 116.779, 123.68], dtype=np.float32)


def torchvision_batch(images: list[np.ndarray]) -> np.ndarray:
    """NCHW float32 batch for torchvision classifiers: resize 256, center crop 224, ImageNet mean/std."""
    import torch
    from torchvision.models import ResNet18_Weights

    transform = ResNet18_Weights.IMAGENET1K_V1.transforms()
    return torch.stack([transform(torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)) for img in images]).numpy()


def _resize_crop(image):
    """[3, H, W] uint8 tensor -> [224, 224, 3] uint8: shorter side to 256 (antialiased), center crop 224 (the same
    steps as torchvision's ResNet transforms and as notebook 14's server-side decoder)."""
    import torchvision.transforms.v2.functional as F

    return F.center_crop(F.resize(image, [256], antialias=True), [224, 224]).permute(1, 2, 0)


def uint8_batch(images: list[np.ndarray]) -> np.ndarray:
    """NHWC uint8 batch [n, 224, 224, 3] of HxWx3 photos, resized and cropped but not normalized (what a decoder
    gives a model that normalizes on the server)."""
    import torch

    return torch.stack([_resize_crop(torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1))
                        for img in images]).numpy()


def normalize(pixels: np.ndarray) -> np.ndarray:
    """UINT8 NHWC pixels -> FP32 NCHW with ImageNet mean/std: the client-side preprocessing of the article."""
    mean = np.array(IMAGENET_MEAN, np.float32).reshape(1, 3, 1, 1)
    std = np.array(IMAGENET_STD, np.float32).reshape(1, 3, 1, 1)
    return ((pixels.transpose(0, 3, 1, 2).astype(np.float32) / 255.0 - mean) / std).astype(np.float32)


def encode_jpeg(img: np.ndarray, quality: int = 90) -> bytes:
    """An HxWx3 uint8 photo as JPEG bytes."""
    import torch
    from torchvision.io import encode_jpeg as encode

    return encode(torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1), quality=quality).numpy().tobytes()


def decode_and_resize(jpegs: list[bytes]) -> np.ndarray:
    """JPEG bytes -> NHWC uint8 [n, 224, 224, 3], decoded on the CPU and resized as uint8_batch does."""
    import torch
    from torchvision.io import decode_jpeg

    return torch.stack([_resize_crop(decode_jpeg(torch.frombuffer(bytearray(j), dtype=torch.uint8)))
                        for j in jpegs]).numpy()


@lru_cache(maxsize=1)
def imagenet_classes() -> list[str]:
    """The 1000 ImageNet-1k class names, in the index order Keras and torchvision both use (offline)."""
    from torchvision.models import ResNet18_Weights

    return list(ResNet18_Weights.IMAGENET1K_V1.meta["categories"])


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def top_k(scores: np.ndarray, k: int = 5) -> list[tuple[int, str, float]]:
    """(index, class name, score) of the k highest scores of one row."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    names = imagenet_classes()
    return [(int(i), names[i], float(scores[i])) for i in np.argsort(-scores)[:k]]
