"""The TensorRT-LLM llm_args.py reader (trtllm_llm_args.py, `refresh trtllm-llmapi`) derives the per-release facts
from either shape the file has had (1.x: ClassVar tags, DecodingBaseConfig.from_dict applied by
update_llm_args_with_extra_dict; main: Literal tags in a union discriminated on decoding_type), from a wheel read
by HTTP range requests, a local wheel, or a git tag; and the recorded releases hold the builder's tags."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import subprocess
import threading
import zipfile

import pytest

from tests.contracts import trtllm_llm_args as reader
from tests.contracts.facts import load

# Synthetic llm_args.py files in the two shapes (class skeletons written for this test, not upstream's text).
FROM_DICT_SHAPE = """from typing import ClassVar, Optional, Union

class StrictBaseModel(BaseModel):
    class Config:
        extra = "forbid"

class DecodingBaseConfig(StrictBaseModel):
    max_draft_len: Optional[int] = None

    @classmethod
    def from_dict(cls, data: dict):
        known = {"DraftTarget": DraftTargetDecodingConfig, "Eagle": EagleDecodingConfig}
        return known[data.pop("decoding_type")](**data)

class DraftTargetDecodingConfig(DecodingBaseConfig):
    decoding_type: ClassVar[str] = "Draft_Target"

class EagleDecodingConfig(DecodingBaseConfig):
    decoding_type: ClassVar[str] = "Eagle"

SpeculativeConfig = Optional[Union[DraftTargetDecodingConfig, EagleDecodingConfig]]

class CapacitySchedulerPolicy(StrEnum):
    MAX_UTILIZATION = "MAX_UTILIZATION"
    GUARANTEED_NO_EVICT = "GUARANTEED_NO_EVICT"

class BaseLlmArgs(StrictBaseModel):
    max_beam_width: int = 1
    speculative_config: SpeculativeConfig = None

class TorchLlmArgs(BaseLlmArgs):
    enable_chunked_prefill: bool = False

def update_llm_args_with_extra_dict(llm_args, llm_args_dict, extra=None):
    mapping = {"speculative_config": DecodingBaseConfig, "lora_config": LoraConfig}
    for name, kind in mapping.items():
        if name == "speculative_config" and name in llm_args_dict:
            llm_args_dict[name] = kind.from_dict(llm_args_dict[name])
    return llm_args | llm_args_dict
"""
DISCRIMINATED_SHAPE = """from typing import Annotated, Literal, Union

class StrictBaseModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

class DecodingBaseConfig(StrictBaseModel):
    max_draft_len: int | None = None

class DraftTargetDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal["Draft_Target"] = "Draft_Target"

class EagleDecodingConfig(DecodingBaseConfig):
    decoding_type: Literal["Eagle"] = Field(default="Eagle")

SpeculativeConfig = Annotated[
    Union[DraftTargetDecodingConfig, EagleDecodingConfig], Field(discriminator="decoding_type")
]

class BaseLlmArgs(StrictBaseModel):
    speculative_config: SpeculativeConfig | None = None

class TorchLlmArgs(BaseLlmArgs):
    max_input_len: int = 1024

def update_llm_args_with_extra_dict(llm_args, llm_args_dict, extra=None):
    mapping = {"lora_config": LoraConfig, "moe_config": MoeConfig}
    return llm_args | llm_args_dict
"""


def _line(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if fragment in line)


def test_the_from_dict_shape_is_read_with_its_lines():
    facts = reader.llm_args_facts(FROM_DICT_SHAPE)
    spec, t = facts["speculative"], FROM_DICT_SHAPE
    assert spec["decoding_configs"] == {
        "DraftTargetDecodingConfig": {
            "decoding_type": "Draft_Target",
            "declared_as": "ClassVar",
            "annotation": "ClassVar[str]",
            "line": _line(t, '= "Draft_Target"'),
        },
        "EagleDecodingConfig": {
            "decoding_type": "Eagle",
            "declared_as": "ClassVar",
            "annotation": "ClassVar[str]",
            "line": _line(t, '= "Eagle"'),
        },
    }
    assert spec["extra"] == {
        "class": "StrictBaseModel",
        "extra": "forbid",
        "line": _line(t, "extra ="),
    }
    assert spec["from_dict"] == {
        "line": _line(t, "def from_dict"),
        "types": {"DraftTarget": "DraftTargetDecodingConfig", "Eagle": "EagleDecodingConfig"},
    }
    assert spec["union"] == {
        "line": _line(t, "SpeculativeConfig ="),
        "members": ["DraftTargetDecodingConfig", "EagleDecodingConfig"],
        "discriminator": None,
    }
    update = facts["update_llm_args_with_extra_dict"]
    assert update["converts"]["speculative_config"] == "DecodingBaseConfig"
    assert update["from_dict_calls"] == [_line(t, "kind.from_dict(")]
    args = facts["llm_args"]
    assert args["arguments"]["max_beam_width"] == {
        "class": "BaseLlmArgs",
        "annotation": "int",
        "line": _line(t, "max_beam_width:"),
    }
    assert args["arguments"]["enable_chunked_prefill"]["class"] == "TorchLlmArgs"
    assert args["arguments"]["max_input_len"] is None  # not declared in this file
    assert args["extra"]["class"] == "StrictBaseModel"
    assert args["CapacitySchedulerPolicy"]["members"] == ["MAX_UTILIZATION", "GUARANTEED_NO_EVICT"]


def test_the_discriminated_shape_is_read_with_its_lines():
    facts = reader.llm_args_facts(DISCRIMINATED_SHAPE)
    spec, t = facts["speculative"], DISCRIMINATED_SHAPE
    draft = spec["decoding_configs"]["DraftTargetDecodingConfig"]
    assert draft == {
        "decoding_type": "Draft_Target",
        "declared_as": "field",
        "annotation": "Literal['Draft_Target']",
        "line": _line(t, 'Literal["Draft_Target"]'),
    }
    assert spec["decoding_configs"]["EagleDecodingConfig"]["decoding_type"] == "Eagle"
    assert spec["extra"] == {
        "class": "StrictBaseModel",
        "extra": "forbid",
        "line": _line(t, "model_config"),
    }
    assert spec["from_dict"] is None
    assert spec["union"]["discriminator"] == "decoding_type"
    assert facts["update_llm_args_with_extra_dict"]["from_dict_calls"] == []
    assert "speculative_config" not in facts["update_llm_args_with_extra_dict"]["converts"]
    assert facts["llm_args"]["arguments"]["max_input_len"]["class"] == "TorchLlmArgs"


@pytest.mark.parametrize(
    ("text", "draft", "eagle"),
    [(FROM_DICT_SHAPE, "DraftTarget", "Eagle"), (DISCRIMINATED_SHAPE, "Draft_Target", "Eagle")],
)
def test_the_accepted_tag_follows_the_shape(text, draft, eagle):
    entry = reader.llm_args_facts(text)
    assert reader.accepted_tag(entry, "DraftTargetDecodingConfig") == draft
    assert reader.accepted_tag(entry, "EagleDecodingConfig") == eagle
    assert reader.accepted_tag(entry, "MedusaDecodingConfig") is None


def test_a_file_without_the_llm_api_classes_is_refused_by_name():
    with pytest.raises(SystemExit, match="declares no TorchLlmArgs"):
        reader.llm_args_facts(FROM_DICT_SHAPE.replace("class TorchLlmArgs", "class Other"))


def test_a_release_with_classvar_tags_and_no_from_dict_takes_no_dict():
    """The mixed shape (ClassVar tags, a union without discriminator, from_dict not applied): a dict holding
    decoding_type is an extra input for every member, so no tag is accepted."""
    text = FROM_DICT_SHAPE.replace("kind.from_dict(llm_args_dict[name])", "llm_args_dict[name]")
    assert reader.accepted_tag(reader.llm_args_facts(text), "DraftTargetDecodingConfig") is None


def _wheel(path, text: str) -> bytes:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("tensorrt_llm/padding.bin"), os.urandom(2_000_000))
        zf.writestr(reader.PATH, text, compress_type=zipfile.ZIP_DEFLATED)
    return path.read_bytes()


class _Ranges(http.server.BaseHTTPRequestHandler):
    """Serves one file with HTTP Range support (or, with ranges off, whole), counting the bytes it sent."""

    body, sent, ranges = b"", 0, True

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()

    def do_GET(self):
        start, end = 0, len(self.body) - 1
        spec = self.headers.get("Range")
        if spec and type(self).ranges:
            start, end = (int(p) for p in spec.removeprefix("bytes=").split("-"))
        part = self.body[start : end + 1]
        type(self).sent += len(
            part
        )  # before sending: the client's next step may come before this thread's
        self.send_response(206 if spec and type(self).ranges else 200)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        # the reader hangs up on a whole-file answer (ranges off) without reading it
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(part)

    def log_message(self, *args):
        pass


@pytest.fixture
def served(tmp_path):
    body = _wheel(tmp_path / "tensorrt_llm-9.9.9-cp312-cp312-linux_x86_64.whl", FROM_DICT_SHAPE)
    handler = type("Handler", (_Ranges,), {"body": body, "sent": 0, "ranges": True})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/tensorrt_llm-9.9.9-cp312-cp312-linux_x86_64.whl"
    yield url, body, handler
    server.shutdown()
    thread.join(5)


def test_a_wheel_url_is_read_by_ranges_not_whole(served):
    url, body, handler = served
    digest = hashlib.sha256(body).hexdigest()
    text, meta = reader.from_wheel(url, digest)
    assert text == FROM_DICT_SHAPE
    assert meta["wheel_sha256"] == digest and meta["wheel"].startswith("tensorrt_llm-9.9.9")
    assert 0 < handler.sent == meta["bytes_read"] < len(body) // 4
    with pytest.raises(SystemExit, match="needs --sha256"):
        reader.from_wheel(url, None)
    handler.ranges = False
    with pytest.raises(RuntimeError, match="ignores range requests"):
        reader.from_wheel(url, digest)


def test_a_local_wheel_is_pinned_by_its_sha256(tmp_path):
    path = tmp_path / "tensorrt_llm-9.9.9-py3-none-any.whl"
    digest = hashlib.sha256(_wheel(path, DISCRIMINATED_SHAPE)).hexdigest()
    text, meta = reader.from_wheel(str(path), None)
    assert text == DISCRIMINATED_SHAPE and meta["wheel_sha256"] == digest
    with pytest.raises(SystemExit, match="not the"):
        reader.from_wheel(str(path), "0" * 64)
    entry = reader.release_entry("9.9.9", "v9.9.9", text, meta)
    assert entry["source"]["wheel_sha256"] == digest and entry["source"]["version"] == "9.9.9"


def test_a_git_tag_is_read_and_written_as_a_release(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "tensorrt_llm" / "llmapi").mkdir(parents=True)
    (repo / reader.PATH).write_text(FROM_DICT_SHAPE)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"], ["tag", "v9.9.9"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    facts = tmp_path / "llm_args.json"
    facts.write_text(json.dumps({"releases": {}, "releases_unread": {"9.9.9": {}, "9.9.8": {}}}))
    monkeypatch.setattr(reader, "FACTS", facts)
    assert reader.main(["9.9.9", "--git", str(repo / ".git"), "--write"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["source"]["commit"] == commit and printed["source"]["tag"] == "v9.9.9"
    written = json.loads(facts.read_text())
    assert written["releases"]["9.9.9"] == printed
    assert list(written["releases_unread"]) == ["9.9.8"]


def test_the_reader_covers_the_arguments_the_builder_maps():
    from tritonbuild.backends.tensorrtllm.llmapi.keys import LLM_API_FIELDS

    assert set(LLM_API_FIELDS.values()) | {"scheduler_config", "speculative_config"} <= set(
        reader.LLM_API_ARGS
    )


LLM_ARGS = load("llm_args")
MODE_CLASSES = {"draft_target": "DraftTargetDecodingConfig", "eagle": "EagleDecodingConfig"}


def _llm_api_versions() -> dict[str, list[str]]:
    """TensorRT-LLM version → the trtllm image tags shipping it, for the images the LLM-API route serves (1.0 on:
    LLM is the PyTorch-backend _TorchLLM, llm_args.json default_llm)."""
    from tritonbuild.backends.llm.images import TRTLLM_IMAGES

    out: dict[str, list[str]] = {}
    for tag, (trtllm, *_) in sorted(TRTLLM_IMAGES.items()):
        if int(trtllm.split(".")[0]) >= 1:
            out.setdefault(trtllm, []).append(tag)
    return out


def test_every_release_an_llm_api_image_ships_is_read_or_says_why_not():
    """Each TensorRT-LLM the LLM-API images ship is in `releases` (read at its tag) or in `releases_unread` with
    the images that ship it, the tensorrtllm_backend tags pinning its commit, and the command that reads it."""
    versions = _llm_api_versions()
    read, unread = LLM_ARGS["releases"], LLM_ARGS["releases_unread"]
    assert not set(read) & set(unread)
    assert set(read) | set(unread) == set(versions)
    pins = {s["tag"]: s for s in LLM_ARGS["speculative_config"]["images_source"]}
    for version, entry in unread.items():
        assert entry["images"] == versions[version], version
        assert f"trtllm-llmapi {version} " in entry["read_with"]
        for pin in entry["pinned_by"]:
            assert pins[pin["tag"]]["tensorrt_llm_commit"] == pin["tensorrt_llm_commit"]
            assert pin["tag"].removeprefix("r") in versions[version], (version, pin["tag"])
        assert entry["pinned_by"] or entry["pinned_by_note"]
    assert LLM_ARGS["releases_tried"]


def _release_problems(version: str, entry: dict) -> list[str]:
    """What a recorded release entry lacks, and each mode whose model.yaml decoding_type that release refuses."""
    from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
    from tritonbuild.backends.tensorrtllm.speculative import speculative_config

    source, problems = entry["source"], []
    if not (source.get("tag") and source.get("path") == reader.PATH):
        problems.append("the source names no tag or another path")
    if not (source.get("commit") or source.get("wheel_sha256")):
        problems.append("the source names neither commit nor wheel sha256")
    image = _llm_api_versions()[version][-1]
    for mode, config_class in MODE_CLASSES.items():
        recipe = LLMRecipe(
            name="m", version=1, backend="tensorrtllm", runtime="pytorch",
            checkpoint={"path": "c"}, quantization="none",
            image={"triton_image": f"nvcr.io/nvidia/tritonserver:{image}-trtllm-python-py3",
                   "trtllm_version": version},
            speculative={"mode": mode, "max_draft_len": 3, "draft_checkpoint": "d"},
        )  # fmt: skip
        want, got = reader.accepted_tag(entry, config_class), speculative_config(recipe)
        if want != got["decoding_type"]:
            problems.append(
                f"{mode}: model.yaml says {got['decoding_type']!r}, {version} takes {want!r}"
            )
    return problems


@pytest.mark.parametrize("version", sorted(LLM_ARGS["releases"]))
def test_a_recorded_release_names_its_tag_and_takes_the_builders_tags(version):
    """A release read at its tag: the source pins it (tag + commit, or wheel sha256), and model.yaml's
    decoding_type for each mode is the one that release accepts (accepted_tag)."""
    assert _release_problems(version, LLM_ARGS["releases"][version]) == []


def test_the_release_check_catches_a_release_whose_tags_differ_from_the_builders():
    """Held to a 1.1.0 read in either shape: the from_dict shape takes the builder's DraftTarget; had 1.1.0 the
    discriminated union, the builder's tag would be refused and the check names the mode."""
    source = {"tag": "v1.1.0", "path": reader.PATH, "commit": "a" * 40}
    assert (
        _release_problems("1.1.0", {"source": source, **reader.llm_args_facts(FROM_DICT_SHAPE)})
        == []
    )
    problems = _release_problems(
        "1.1.0", {"source": {}, **reader.llm_args_facts(DISCRIMINATED_SHAPE)}
    )
    assert problems == [
        "the source names no tag or another path",
        "the source names neither commit nor wheel sha256",
        "draft_target: model.yaml says 'DraftTarget', 1.1.0 takes 'Draft_Target'",
    ]
