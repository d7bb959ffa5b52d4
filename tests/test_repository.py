"""Model configs built through ModelConfig and checked against their artifacts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers import repository
from conftest import make_onnx


def test_config_from_onnx_reads_names_dtypes_and_dynamic_batch(tiny_onnx):
    config = repository.config_from_onnx("tiny", tiny_onnx)
    assert config.platform == "onnxruntime_onnx" and config.max_batch_size == 32
    assert [(t.name, list(t.dims)) for t in config.input] == [("X", [8])]
    assert [(t.name, list(t.dims)) for t in config.output] == [("Y", [4])]
    text = repository.to_text(config)
    assert 'data_type: TYPE_FP32' in text and "kind: KIND_CPU" in text


def test_fixed_batch_onnx_gets_max_batch_size_zero_and_full_dims(tmp_path):
    path = make_onnx(tmp_path / "fixed.onnx", batch=32)
    config = repository.config_from_onnx("fixed", path)
    assert config.max_batch_size == 0 and list(config.input[0].dims) == [32, 8]
    repository.validate(config, path)


def test_config_text_round_trips(tmp_path, tiny_onnx):
    config = repository.config_from_onnx("tiny", tiny_onnx, max_batch_size=8, preferred_batch_sizes=[2, 4],
                                         max_queue_delay_us=100, instance_kind="KIND_GPU", instance_count=2)
    model_dir = repository.add_model(tmp_path / "repo", config, tiny_onnx)
    back = repository.read_config(model_dir)
    assert back == config
    assert list(back.dynamic_batching.preferred_batch_size) == [2, 4]
    assert (model_dir / "1" / "model.onnx").exists()



def test_read_config_names_the_missing_model_folder(tmp_path):
    with pytest.raises(repository.ConfigError, match=r"model 'absent': expected a model folder at .*absent, found none"):
        repository.read_config(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(repository.ConfigError, match=r"model 'empty': no config.pbtxt at .*empty/config.pbtxt"):
        repository.read_config(tmp_path / "empty")

@pytest.mark.parametrize("change, field", [
    (lambda c: setattr(c.input[0], "data_type", repository.mc.TYPE_FP16), "data_type is TYPE_FP16"),
    (lambda c: c.input[0].dims.__setitem__(0, 9), r"dims \[9\] in config"),
    (lambda c: setattr(c.output[0], "name", "predictions"), "output names"),
])
def test_mismatched_config_is_refused_naming_the_field(tiny_onnx, change, field):
    config = repository.config_from_onnx("tiny", tiny_onnx)
    change(config)
    with pytest.raises(repository.ConfigMismatch, match=field):
        repository.validate(config, tiny_onnx)


def test_fixed_batch_under_max_batch_size_is_refused(tmp_path):
    path = make_onnx(tmp_path / "fixed.onnx", batch=32)
    config = repository.build_config("m", "onnxruntime_onnx", [repository.TensorSpec("X", "FP32", (-1, 8))],
                                     [repository.TensorSpec("Y", "FP32", (-1, 4))], max_batch_size=32)
    with pytest.raises(repository.ConfigMismatch, match="fixes input 'X' batch to 32"):
        repository.validate(config, path)


@pytest.fixture
def linear_torchscript(tmp_path):
    """A traced Linear(8 -> 4) saved as TorchScript (a zip archive, whatever its file name)."""
    path = tmp_path / "linear.pt"
    torch.jit.trace(torch.nn.Linear(8, 4).eval(), torch.zeros(1, 8)).save(str(path))
    return path


def _linear_config(platform: str, classes: int = 4):
    return repository.build_config("m", platform, [repository.TensorSpec("INPUT__0", "FP32", (-1, 8))],
                                   [repository.TensorSpec("OUTPUT__0", "FP32", (-1, classes))], max_batch_size=8)


def test_torchscript_saved_as_plan_is_refused(linear_torchscript):
    plan = linear_torchscript.rename(linear_torchscript.with_name("model.plan"))
    with pytest.raises(repository.ConfigMismatch, match="zip archive"):
        repository.validate(_linear_config("tensorrt_plan"), plan)


def test_torchscript_checked_by_running_it(linear_torchscript):
    repository.validate(_linear_config("pytorch_libtorch"), linear_torchscript)
    with pytest.raises(repository.ConfigMismatch, match="OUTPUT__0"):
        repository.validate(_linear_config("pytorch_libtorch", classes=1000), linear_torchscript)


def test_derive_changes_batching_and_instances_only(tmp_path, tiny_repo):
    repository.derive(tiny_repo, "tiny", "tiny_i2", target=tmp_path / "other", instance_count=2,
                      preferred_batch_sizes=[8], max_queue_delay_us=500)
    derived = repository.read_config(tmp_path / "other" / "tiny_i2")
    source = repository.read_config(tiny_repo / "tiny")
    assert derived.name == "tiny_i2" and derived.instance_group[0].count == 2
    assert derived.dynamic_batching.max_queue_delay_microseconds == 500
    assert derived.input == source.input and derived.output == source.output


def test_dtype_mapping_rejects_unknown():
    assert repository.triton_dtype(np.float16) == "FP16"
    assert repository.numpy_dtype("TYPE_INT64") == np.dtype(np.int64)
    with pytest.raises(ValueError, match="dtype must be one of"):
        repository.triton_dtype(np.complex64)


@pytest.fixture(scope="module")
def resnet18_module(tmp_path_factory):
    from helpers import export

    model, _ = export.torchvision_resnet18("random")
    return export.to_torchscript(model, tmp_path_factory.mktemp("r18") / "model.pt")


def _r18_config(dims=(3, 224, 224), dtype="FP32", max_batch_size=8, name="INPUT__0"):
    batch = (-1,) if max_batch_size else ()
    return repository.build_config("r18", "pytorch_libtorch", [repository.TensorSpec(name, dtype, batch + dims)],
                                   [repository.TensorSpec("OUTPUT__0", "FP32", batch + (1000,))],
                                   max_batch_size=max_batch_size)


@pytest.mark.parametrize("config_kwargs, found, fix", [
    ({"dtype": "INT32"}, "INT32", "data_type TYPE_FP32"),
    ({"dims": (1, 224, 224)}, "1x224x224", "dims [3, 224, 224] (3 channels; the config says 1)"),
    ({"dims": (224, 224, 3)}, "224x224x3", "dims [3, 224, 224] (channels first, NCHW"),
    ({"max_batch_size": 0}, "3x224x224", "max_batch_size > 0"),
])
def test_torchscript_config_errors_name_the_field_and_what_would_work(resnet18_module, config_kwargs, found, fix):
    with pytest.raises(repository.ConfigMismatch) as info:
        repository.validate(_r18_config(**config_kwargs), resnet18_module)
    assert "model 'r18'" in str(info.value) and found in str(info.value) and fix in str(info.value)


def test_input_index_beyond_forward_arguments_is_refused(resnet18_module):
    with pytest.raises(repository.ConfigMismatch, match=r"'INPUT__1' names position 1 .* name it INPUT__0"):
        repository.validate(_r18_config(name="INPUT__1"), resnet18_module)


def test_input_name_the_backend_binds_by_order_is_explained_not_refused(resnet18_module):
    """Round two, item 12: Triton's PyTorch backend (r24.10, GetNamingConvention) accepts names that are neither
    forward()'s arguments nor <name>__<index> by falling back to the config's order; pre-flight refused them."""
    with pytest.warns(repository.ConfigWarning, match=r"input 'image' .* binds the inputs in the config's order"):
        repository.validate(_r18_config(name="image"), resnet18_module)


def test_preflight_refuses_name_mismatch_and_bad_syntax_in_seconds(tmp_path, tiny_onnx):
    import time

    from helpers.preflight import RepositoryError, check_repository
    from helpers.runtime import RuntimeChoice, find_local_triton
    from helpers.server import TritonServer

    repo = tmp_path / "models"
    repository.add_model(repo, repository.config_from_onnx("tiny", tiny_onnx), tiny_onnx)
    (repo / "tiny").rename(repo / "renamed")
    started = time.monotonic()
    with pytest.raises(RepositoryError, match=r"model folder 'renamed': config.pbtxt says name: \"tiny\".*name: \"renamed\""):
        TritonServer(repo, RuntimeChoice("local", "test", find_local_triton())).start()
    assert time.monotonic() - started < 5
    (repo / "renamed" / "config.pbtxt").write_text('name: "renamed"\nmax_batch_sise: 8\n')
    with pytest.raises(RepositoryError, match=r"model 'renamed': .*renamed/config.pbtxt is not a valid model config: "
                                              r".*max_batch_sise"):
        check_repository(repo)
    (repo / "renamed" / "config.pbtxt").write_text('name: "renamed"\nplatform: "onnxruntime_onnx"\n')
    (repo / "renamed" / "1" / "model.onnx").rename(repo / "renamed" / "1" / "other.onnx")
    with pytest.raises(RepositoryError, match=r"expects renamed/1/model.onnx; version folder 1/ holds \['other.onnx'\]"):
        check_repository(repo)


def test_config_from_engine_takes_what_the_engine_reports():
    """Defect 10: the engine's profile and FP16 I/O were notebook 03's parameters, its config notebook 04's."""
    described = {"tensorrt": "10.0.1", "io": [
        {"name": "input_1", "input": True, "dtype": "HALF", "shape": [-1, 224, 224, 3],
         "profile": [[1, 224, 224, 3], [8, 224, 224, 3], [16, 224, 224, 3]]},
        {"name": "predictions", "input": False, "dtype": "HALF", "shape": [-1, 1000]}]}
    config = repository.config_from_engine("engine", described)
    assert config.max_batch_size == 16 and config.platform == "tensorrt_plan"
    assert [repository.mc.DataType.Name(t.data_type) for t in (*config.input, *config.output)] == ["TYPE_FP16"] * 2
    assert list(config.input[0].dims) == [224, 224, 3] and config.instance_group[0].kind == config.instance_group[0].KIND_GPU


def test_client_refuses_non_finite_input_naming_the_count():
    from helpers import client as tc

    info = tc.ModelInfo("m", {"X": ("FP32", [-1, 4])}, {"Y": ("FP32", [-1, 2])}, 8, "onnxruntime_onnx")
    x = np.ones((2, 4), np.float32)
    x[0, 1], x[1, 3] = np.nan, np.inf
    with pytest.raises(ValueError, match=r"model 'm' input 'X' has 2 non-finite values \(NaN or Inf\) of 8"):
        tc.check_inputs(info, {"X": x})


def test_hand_written_config_is_parsed_checked_and_written_as_is(tmp_path):
    from helpers.repository import ConfigError, add_model_text

    text = 'name: "tiny"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n' \
           'input [ { name: "X" data_type: TYPE_FP32 dims: [ 8 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    onnx = make_onnx(tmp_path / "tiny.onnx")
    folder = add_model_text(tmp_path / "models", text, onnx)
    assert (folder / "config.pbtxt").read_text() == text and (folder / "1" / "model.onnx").exists()
    with pytest.raises(ConfigError, match=r"2:\d+ .*Expected"):  # a typo names its line
        add_model_text(tmp_path / "models", text.replace("platform:", "platform"), onnx)
    with pytest.raises(repository.ConfigMismatch):  # the artifact disagrees with what was written
        add_model_text(tmp_path / "models", text.replace("dims: [ 8 ]", "dims: [ 7 ]"), onnx)
    with pytest.raises(ValueError, match="needs its artifact"):
        add_model_text(tmp_path / "models", text)
