"""A new vLLM release is one refresh command and the data it writes: `vllm-wheel WHEEL... --write` derives the LoRA
facts (vllm_lora_wheel.py: the ranks max_lora_rank takes, its default, the max_cpu_loras rule) and which drafters'
attention layers get KV (vllm_spec_wheel.drafter_kv) beside the engine-args, quantization and speculative facts, in
each source layout vLLM has had; run over the recorded wheels (where they are on disk) it reproduces what is
recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.contracts import checks, vllm_lora_wheel, vllm_spec_wheel
from tests.contracts.drift import sha256_file
from tests.contracts.facts import load

WHEELS = Path(os.environ.get("WHEEL_CACHE", Path.home() / ".cache" / "tritonbuild-gpu-wheels"))

LORA_NEW = """from typing import Literal

MaxLoRARanks = Literal[1, 8, 16]


class LoRAConfig:
    max_lora_rank: MaxLoRARanks = 16
    max_loras: int = 1

    def _validate_lora_config(self):
        if self.max_cpu_loras is None:
            self.max_cpu_loras = self.max_loras
        elif self.max_cpu_loras < self.max_loras:
            raise ValueError(
                f"max_cpu_loras ({self.max_cpu_loras}) must be >= "
                f"max_loras ({self.max_loras})."
            )
"""
LORA_OLD = """class ModelConfig:
    pass


class LoRAConfig:
    max_lora_rank: int
    max_loras: int

    def __post_init__(self):
        possible_max_ranks = (8, 16, 32)
        if self.max_cpu_loras is None:
            self.max_cpu_loras = self.max_loras
        elif self.max_cpu_loras < self.max_loras:
            raise ValueError(
                f"max_cpu_loras ({self.max_cpu_loras}) must be >= "
                f"max_loras ({self.max_loras})")
"""
PEFT = """class PEFTHelper:
    def validate_legal(self, lora_config):
        error_msg = []
        if self.r > lora_config.max_lora_rank:
            error_msg.append(
                f"LoRA rank {self.r} is greater than max_lora_rank"
                f" {lora_config.max_lora_rank}."
            )
        if error_msg:
            raise ValueError(" ".join(error_msg))
"""


def _wheel(path: Path, files: dict) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def _args(default: str) -> str:
    return f"class EngineArgs:\n    model: str = 'm'\n    max_lora_rank: {default}\n"


def test_the_lora_facts_are_derived_from_lora_config_in_either_layout(tmp_path):
    """vllm/config/lora.py with MaxLoRARanks and LoRAConfig's default (EngineArgs takes LoRAConfig's), and
    PEFTHelper's rank check; vllm/config.py before the split with possible_max_ranks, no default in LoRAConfig
    (EngineArgs' literal is the engine's) and no peft_helper.py."""
    new = vllm_lora_wheel.derive(
        _wheel(
            tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl",
            {
                "vllm/_version.py": "__commit_id__ = commit_id = 'g0b3ba88f1'\n",
                "vllm/config/lora.py": LORA_NEW,
                "vllm/engine/arg_utils.py": _args("MaxLoRARanks = LoRAConfig.max_lora_rank"),
                "vllm/lora/peft_helper.py": PEFT,
                "vllm/lora/worker_manager.py": "\n\n    peft_helper.validate_legal(self.lora_config)\n",
            },
        )
    )
    assert new["source"]["commit"] == "0b3ba88f1" and new["source"]["path"] == "vllm/config/lora.py"
    assert new["source"]["lines"] == "3 (MaxLoRARanks), 7 (LoRAConfig.max_lora_rank)"
    assert new["source"]["wheel_sha256"] == sha256_file(
        tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    )
    assert new["max_lora_ranks"] == [1, 8, 16] and new["default_max_lora_rank"] == 16
    assert new["default_where"] == "vllm/config/lora.py:7"
    assert new["max_cpu_loras_rule"]["where"] == "vllm/config/lora.py:13-16"
    assert (
        new["max_cpu_loras_rule"]["text"] == 'f"max_cpu_loras ({self.max_cpu_loras}) must be >= "'
    )
    assert new["engine_args_type"] == {
        "where": "vllm/engine/arg_utils.py:3",
        "text": "max_lora_rank: MaxLoRARanks = LoRAConfig.max_lora_rank",
    }
    assert new["rank_check"] == {
        "where": "vllm/lora/peft_helper.py:4-8 (PEFTHelper.validate_legal)",
        "message": "LoRA rank {r} is greater than max_lora_rank {max_lora_rank}.",
        "raises": "ValueError",
        "called_from": "vllm/lora/worker_manager.py:3 (on loading an adapter a request names)",
    }
    old = vllm_lora_wheel.derive(
        _wheel(
            tmp_path / "vllm-0.5.5-cp38-abi3-manylinux1_x86_64.whl",
            {
                "vllm/commit_id.py": f"__commit__ = '{'09c7792610' * 4}'\n",
                "vllm/config.py": LORA_OLD,
                "vllm/engine/arg_utils.py": _args("int = 16"),
            },
        )
    )
    assert old["source"]["lines"] == "10 (possible_max_ranks), 6 (LoRAConfig.max_lora_rank)"
    assert old["source"]["commit"] == "09c7792610" * 4 and old["max_lora_ranks"] == [8, 16, 32]
    assert (
        old["default_max_lora_rank"] == 16 and old["default_where"] == "vllm/engine/arg_utils.py:3"
    )
    assert old["max_cpu_loras_rule"]["where"] == "vllm/config.py:13-16" and "rank_check" not in old
    no_rule = LORA_OLD.replace("max_cpu_loras < self.max_loras", "max_cpu_loras is False")
    assert (
        vllm_lora_wheel.derive(
            _wheel(
                tmp_path / "vllm-0.5.4-x.whl",
                {"vllm/config.py": no_rule, "vllm/engine/arg_utils.py": _args("int = 16")},
            )
        )["max_cpu_loras_rule"]
        is None
    )
    with pytest.raises(ValueError, match="no literal default"):
        vllm_lora_wheel.derive(
            _wheel(
                tmp_path / "vllm-0.5.6-x.whl",
                {"vllm/config.py": LORA_OLD, "vllm/engine/arg_utils.py": _args("int")},
            )
        )
    with pytest.raises(ValueError, match="no LoRAConfig"):
        vllm_lora_wheel.derive(
            _wheel(tmp_path / "vllm-0.5.7-x.whl", {"vllm/engine/arg_utils.py": _args("int = 16")})
        )


def test_the_refresh_writes_a_versions_lora_facts_and_takes_it_out_of_unrecorded(
    tmp_path, monkeypatch
):
    doc = {
        "_about": "a",
        "versions": {"0.10.2": {"x": 1}},
        "unrecorded": {"0.5.5": "no", "0.8.4": "no"},
    }
    (tmp_path / "vllm_lora.json").write_text(json.dumps(doc))
    monkeypatch.setattr(vllm_lora_wheel, "fact_path", lambda name: tmp_path / f"{name}.json")
    vllm_lora_wheel.write({"0.5.5": {"y": 2}}, {"0.9.2": "its wheel has no LoRAConfig"})
    got = json.loads((tmp_path / "vllm_lora.json").read_text())
    assert list(got["versions"]) == ["0.5.5", "0.10.2"] and got["versions"]["0.5.5"] == {"y": 2}
    assert got["unrecorded"] == {"0.8.4": "no", "0.9.2": "its wheel has no LoRAConfig"}
    assert got["_about"] == "a"


def test_check_re_derives_the_lora_facts_from_each_wheel(tmp_path, monkeypatch):
    """--wheel: a vLLM's LoRA entry re-derived whole from the recorded wheel; a changed rank is drift, another
    wheel is drift, a version not given is unread."""
    wheel = _wheel(
        tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl",
        {"vllm/config/lora.py": LORA_NEW, "vllm/engine/arg_utils.py": _args("int = 16")},
    )
    recorded = vllm_lora_wheel.derive(wheel)
    monkeypatch.setattr(
        checks, "load", lambda name: {"versions": {"9.9.9": recorded, "1.0.0": recorded}}
    )
    by = {r["ref"]: r for r in checks.lora_checks({"9.9.9": wheel})}
    assert by["9.9.9"]["status"] == "same" and by["1.0.0"]["status"] == "unread"
    recorded["max_lora_ranks"] = [1, 8, 16, 32]
    assert "32" in checks.lora_checks({"9.9.9": wheel})[0]["detail"]
    recorded["source"]["wheel_sha256"] = "0" * 64
    assert "not the recorded wheel" in checks.lora_checks({"9.9.9": wheel})[0]["detail"]


RUNNER = """class GPUModelRunner:
    def __init__(self):
        if self.speculative_config.method == "ngram":
            self.drafter = NgramProposer(self.vllm_config)
        elif self.speculative_config.uses_draft_model():
            self.drafter = DraftModelProposer(vllm_config=self.vllm_config)
        elif self.speculative_config.use_gemma4_mtp():
            self.drafter = Gemma4Proposer(self.vllm_config)
        elif self.speculative_config.use_eagle():
            self.drafter = EagleProposer(self.vllm_config)
        elif self.speculative_config.method == "medusa":
            self.drafter = MedusaProposer(self.vllm_config)
"""
SPEC = """class SpeculativeConfig:
    method: str | None = None

    def use_gemma4_mtp(self):
        return self.method == "mtp" and self.model_type == "gemma4_mtp"

    def use_eagle(self):
        return self.method in ("eagle", "eagle3", "mtp")

    def uses_draft_model(self):
        return self.method == "draft_model"
"""
BASE = """class SpecDecodeBaseProposer:
    def load_model(self, target):
        self._draft_attn_layer_names = {
            name for name in layers
        }
"""


def test_which_drafters_get_kv_is_derived_from_the_runner_and_the_proposers():
    """Each branch of the V1 runner's self.drafter chain takes its methods (through SpeculativeConfig's helpers;
    a branch that also tests something else does not claim the method: mtp reaches EAGLE too); a proposer whose
    class or base collects the drafter's attention layers gets KV; without a V1 runner, nothing is derived."""
    files = {
        "vllm/v1/worker/gpu_model_runner.py": RUNNER,
        "vllm/config/speculative.py": SPEC,
        "vllm/v1/spec_decode/llm_base_proposer.py": BASE,
        "vllm/v1/spec_decode/draft_model.py": "class DraftModelProposer(SpecDecodeBaseProposer):\n    pass\n",
        "vllm/v1/spec_decode/eagle.py": "class EagleProposer(SpecDecodeBaseProposer):\n    pass\n",
        "vllm/v1/spec_decode/gemma4.py": "class Gemma4Proposer(SpecDecodeBaseProposer):\n    pass\n",
        "vllm/v1/spec_decode/medusa.py": "class MedusaProposer:\n    def load_model(self, t):\n        self.m = t\n",
    }
    src = {"package": "vllm", "version": "9.9.9"}
    kv = vllm_spec_wheel.drafter_kv(files.get, sorted(files), "vllm/config/speculative.py", src)
    assert kv["methods"] == ["draft_model", "eagle", "eagle3", "mtp"]
    layers = "vllm/v1/spec_decode/llm_base_proposer.py:3-5"
    assert kv["proposers"] == {
        "NgramProposer": {"methods": ["ngram"], "layers": None},
        "DraftModelProposer": {"methods": ["draft_model"], "layers": layers},
        "Gemma4Proposer": {"methods": ["mtp"], "layers": layers},
        "EagleProposer": {"methods": ["eagle", "eagle3", "mtp"], "layers": layers},
        "MedusaProposer": {"methods": ["medusa"], "layers": None},
    }
    assert kv["source"] == {
        **src,
        "path": "vllm/v1/worker/gpu_model_runner.py",
        "lines": "4-12 (self.drafter = ...)",
    }
    files.pop("vllm/v1/worker/gpu_model_runner.py")
    assert (
        vllm_spec_wheel.drafter_kv(files.get, sorted(files), "vllm/config/speculative.py", src)
        is None
    )


def _recorded_wheels() -> dict[str, Path]:
    names = {v: f["source"]["wheel"] for v, f in load("vllm_engine_args")["versions"].items()}
    return {v: WHEELS / name for v, name in names.items()}


@pytest.mark.parametrize("version", sorted(load("vllm_lora")["versions"]))
def test_the_refresh_over_a_recorded_wheel_reproduces_every_vllm_fact_recorded_of_it(version):
    """--check --wheel over the recorded wheel (WHEEL_CACHE; `pip download vllm==X --no-deps --only-binary :all:`):
    its engine args, quantization overrides, speculative facts (with drafter_kv) and LoRA facts re-derived are
    what the package ships."""
    wheel = _recorded_wheels()[version]
    if not wheel.is_file():
        pytest.skip(
            f"the vLLM {version} wheel is not at {wheel} (set WHEEL_CACHE to the folder holding it)"
        )
    rows = [r for r in checks.wheel_checks([wheel]) if r["ref"] == version]
    assert {r["fact"].split(".")[0] for r in rows} == {
        "vllm_engine_args",
        "vllm_quantization",
        "vllm_speculative",
        "vllm_lora",
    }
    assert all(r["status"] == "same" for r in rows), [r for r in rows if r["status"] != "same"]


def test_one_refresh_command_records_a_new_vllm_release_in_every_generated_file(
    tmp_path, monkeypatch
):
    """`vllm-wheel WHEEL --write` on a new release's wheel writes its entry into each of the four generated files
    the builder reads (engine args, quantization overrides, speculative with drafter_kv, LoRA): nothing else is
    edited by hand. A wheel whose LoRA facts cannot be read puts the version under vllm_lora.json's unrecorded."""
    import shutil

    from tests.contracts import vllm_wheels
    from tests.contracts.facts import PACKAGE_FACTS

    names = ("engine_args", "quantization", "speculative", "lora")
    for name in names:
        shutil.copy(PACKAGE_FACTS / f"vllm_{name}.json", tmp_path)
    for module in (vllm_wheels, vllm_lora_wheel):
        monkeypatch.setattr(module, "fact_path", lambda name: tmp_path / f"{name}.json")
    q = "vllm/model_executor/layers/quantization/"
    override = (
        "class AWQMarlinConfig:\n    @classmethod\n    def override_quantization_method(cls, c, user_quant):\n"
        '        is_valid_user_quant = user_quant is None or user_quant == "awq_marlin"\n        return None\n'
    )
    files = {
        "vllm/_version.py": "__commit_id__ = commit_id = 'g1234567ab'\n",
        "vllm/engine/arg_utils.py": _args("MaxLoRARanks = LoRAConfig.max_lora_rank")
        + "    speculative_config: dict | None = None\n\n\nclass AsyncEngineArgs(EngineArgs):\n"
        "    enable_log_requests: bool = False\n",
        q + "__init__.py": 'QuantizationMethods = Literal["awq", "fp8"]\n',
        "vllm/config/model.py": (
            "class ModelConfig:\n    def verify_with_parallel_config(self, p):\n        if h % tp:\n"
            '            raise ValueError(\n                f"Total number of attention heads ({h})"\n'
            '                " must be divisible by tensor parallel size "\n                f"({tp})."\n'
            "            )\n"
        ),
        q + "awq_marlin.py": override,
        q + "gptq_marlin.py": override.replace("awq", "gptq").replace("AWQ", "GPTQ"),
        "vllm/v1/worker/gpu_model_runner.py": RUNNER,
        "vllm/v1/spec_decode/llm_base_proposer.py": BASE,
        "vllm/v1/spec_decode/eagle.py": "class EagleProposer(SpecDecodeBaseProposer):\n    pass\n",
        "vllm/v1/spec_decode/draft_model.py": "class DraftModelProposer(SpecDecodeBaseProposer):\n    pass\n",
        "vllm/config/lora.py": LORA_NEW,
    }
    files["vllm/config/speculative.py"] = (
        'SpeculativeMethod = Literal["draft_model", "eagle", "eagle3", "medusa", "mtp", "ngram"]\n\n\n'
        + SPEC.replace(
            "    method: str | None = None\n",
            "    num_speculative_tokens: int = 1\n    model: str | None = None\n"
            "    method: SpeculativeMethod | None = None\n",
        )
    )
    new = _wheel(tmp_path / "vllm-99.0.0-cp38-abi3-manylinux_2_28_x86_64.whl", files)
    del files["vllm/config/lora.py"]
    no_lora = _wheel(tmp_path / "vllm-99.0.1-cp38-abi3-manylinux_2_28_x86_64.whl", files)
    assert vllm_wheels.main([str(new), str(no_lora), "--write"]) == 0
    got = {n: json.loads((tmp_path / f"vllm_{n}.json").read_text()) for n in names}
    assert got["engine_args"]["versions"]["99.0.0"]["source"]["commit"] == "1234567ab"
    assert got["quantization"]["marlin_override"]["by_version"]["99.0.0"]["accepted"]["awq"] == [
        "awq",
        "awq_marlin",
    ]
    spec = got["speculative"]["versions"]["99.0.0"]
    assert spec["draft_model"]["runs"] is True and spec["drafter_kv"]["methods"] == [
        "draft_model",
        "eagle",
        "eagle3",
        "mtp",
    ]
    lora = got["lora"]["versions"]["99.0.0"]
    assert lora["max_lora_ranks"] == [1, 8, 16] and lora["default_max_lora_rank"] == 16
    assert (
        list(got["lora"]["versions"])[-1] == "99.0.0" and "99.0.0" not in got["lora"]["unrecorded"]
    )
    assert "99.0.1" in got["engine_args"]["versions"] and "99.0.1" not in got["lora"]["versions"]
    assert "no LoRAConfig" in got["lora"]["unrecorded"]["99.0.1"]
