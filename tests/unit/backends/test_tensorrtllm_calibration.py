"""The engine step finds its checkpoint and its calibration dataset again from its inputs and params."""

from __future__ import annotations

from tritonbuild.backends.tensorrtllm.run import _split_calibration


def test_checkpoint_and_dataset_are_told_apart():
    inputs = {
        "/r/ck/config.json": "a",
        "/r/ck/model.safetensors": "b",
        "/r/data/x/train.jsonl": "c",
        "/r/data/y.txt": "a",
    }
    params = {
        "calibration": {"files": {"x/train.jsonl": "c", "y.txt": "a"}, "size": 8, "is_dir": True}
    }
    ckpt, data = _split_calibration(params, inputs)
    assert sorted(ckpt) == ["/r/ck/config.json", "/r/ck/model.safetensors"] and data == "/r/data"


def test_single_file_dataset_and_none():
    inputs = {"/r/ck/config.json": "a", "/r/c.jsonl": "z"}
    ckpt, data = _split_calibration(
        {"calibration": {"files": {"c.jsonl": "z"}, "size": 1, "is_dir": False}}, inputs
    )
    assert list(ckpt) == ["/r/ck/config.json"] and data == "/r/c.jsonl"
    assert _split_calibration({}, inputs) == (inputs, None)


def test_examples_dir_finds_the_images_layout(monkeypatch):
    from tritonbuild.backends.tensorrtllm import argv

    monkeypatch.delenv("TRITONBUILD_TRTLLM_EXAMPLES", raising=False)
    monkeypatch.setattr(
        argv.os.path, "isdir", lambda p: p == "/app/examples"
    )  # tensorrtllm_backend's image
    assert argv.examples_dir() == "/app/examples"
    monkeypatch.setattr(argv.os.path, "isdir", lambda p: False)
    assert argv.examples_dir() == "/app/tensorrt_llm/examples"
    monkeypatch.setenv("TRITONBUILD_TRTLLM_EXAMPLES", "/opt/x")
    assert argv.examples_dir() == "/opt/x"
