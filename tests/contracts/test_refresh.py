"""The refresh extractors (refresh.py) read what the facts claim: try-guarded vs unguarded parameter reads,
argparse option strings, class fields, template tensors."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import pytest

from tests.contracts.refresh import argparse_flags, class_fields, cpp_parameters, template_facts

CPP = """
T f() {
    auto a = model_state_->GetParameter<std::string>("always");  // unguarded
    try
    {
        x = model_state_->GetParameter<int32_t>("guarded_one");
    }
    catch (std::exception const& e) { if (y) { z(); } }
    if (c) { q = model_state_->GetParameter<std::vector<int32_t>>("in_if"); }
}
"""


def test_cpp_parameters_split_by_enclosing_try():
    assert cpp_parameters(CPP) == {"unguarded": ["always", "in_if"], "guarded": ["guarded_one"]}


def test_argparse_flags_cover_groups_and_aliases():
    src = (
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--a', '-A')\n"
        "g = p.add_argument_group('x')\ng.add_argument('--b-c', '--b_c', type=int)\np.add_argument('pos')\n"
    )
    assert argparse_flags(src) == ["--a", "--b-c", "--b_c", "-A"]


def test_class_fields_follow_local_bases():
    src = "class A:\n    x: int = 1\n    _p: int = 0\nclass B(A):\n    y: str\n    z = 3\n"
    assert class_fields(src, "B") == ["x", "y"]


def test_template_facts_keep_placeholders_and_flags():
    text = """name: "m"
# comment with input [ ]
input [
  { name: "a" data_type: TYPE_INT32 dims: [ 1 ] reshape: { shape: [ ] } optional: true },
  { name: "b" data_type: ${t} dims: [ -1, -1 ] allow_ragged_batch: true }
]
output [ { name: "o" data_type: TYPE_FP32 dims: [ -1 ] } ]
parameters: { key: "k" value: { string_value: "${k}" } }
"""
    facts = template_facts(text)
    assert facts["inputs"] == [
        {"name": "a", "data_type": "TYPE_INT32", "dims": [1], "optional": True, "reshape": []},
        {"name": "b", "data_type": "${t}", "dims": [-1, -1], "allow_ragged_batch": True},
    ]
    assert facts["outputs"] == [{"name": "o", "data_type": "TYPE_FP32", "dims": [-1]}]
    assert facts["parameters"] == ["k"]


_CLOCK = itertools.count(
    1_900_000_000, 60
)  # one commit a minute: release order by date is unambiguous


def _git(repo, *args) -> str:
    import os
    import subprocess

    env = {**os.environ, "GIT_COMMITTER_DATE": f"{next(_CLOCK)} +0000"}
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()


def _commit(
    repo, path: str, text: str | None, tag: str | None = None, branch: str | None = None
) -> str:
    if text is None:
        (repo / path).unlink()
    else:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "c")
    if tag:
        _git(repo, "tag", tag)
    if branch:
        _git(repo, "branch", branch)
    return _git(repo, "rev-parse", "HEAD")


def _rows(report: list[dict]) -> list[dict]:
    """The rows of the checks under test (check() also lists the recorded vLLM versions, unread without wheels)."""
    return [
        r
        for r in report
        if not r["fact"].startswith(
            ("vllm_engine_args", "vllm_quantization", "vllm_speculative", "vllm_lora")
        )
    ]


GENAI = "genai-perf/genai_perf/inputs/converters/tensorrtllm_converter.py"


def _genai_check(commit: str, moved: str | None = None):
    from tests.contracts import checks
    from tests.contracts.drift import Check

    return Check(
        "clients.genai_perf",
        "triton-inference-server/perf_analyzer",
        (GENAI,),
        commit,
        checks._genai_perf_inputs,
        checks._recorded_genai_perf,
        moved,
    )


def _wheel(path, files: dict):
    """A wheel (a zip) at path holding files (archive path: text)."""
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_check_reports_same_drift_and_gone_against_a_git_history(tmp_path, monkeypatch):
    """--check reads upstream's files with git show at the recorded commit and at the newest release: the newest
    v* tag or rYY.MM release branch by date (here the branch r99.01, newer than tag v9.0.0)."""
    from tests.contracts import checks, drift

    repo = tmp_path / "perf_analyzer"
    _git(tmp_path, "init", "-q", str(repo))
    same = _commit(
        repo,
        GENAI,
        'class TensorRTLLMConverter:\n    payload = {"text_input": [t], "max_tokens": [n], '
        '"exclude_input_in_output": [True]}\n    payload["stream"] = [True]\n'
        '    payload["min_length"] = [n]\n',
        tag="v9.0.0",
    )
    _commit(
        repo,
        GENAI,
        'class TensorRTLLMConverter:\n    payload = {"text_input": [t], "max_tokens": [n], '
        '"top_k": [1]}\n',
        branch="r99.01",
    )
    monkeypatch.setattr(checks, "all_checks", lambda: [_genai_check(same)])
    monkeypatch.setattr(
        checks, "cited_checks", lambda mirrors: []
    )  # the recorded facts' cited lines: below
    report = _rows(drift.check({"triton-inference-server/perf_analyzer": repo / ".git"}))
    by_ref = {r["ref"]: r for r in report}
    assert set(by_ref) == {same, "r99.01"} and by_ref[same]["status"] == "same"
    assert by_ref["r99.01"]["status"] == "drift" and "'top_k'" in by_ref["r99.01"]["detail"]
    assert "'min_length'" in by_ref["r99.01"]["detail"]  # removed upstream
    _commit(
        repo, GENAI, None, branch="r99.02"
    )  # deleted: gone, unless the fact records where it went
    assert [
        r["status"]
        for r in _rows(drift.check({"triton-inference-server/perf_analyzer": repo / ".git"}))
    ] == ["same", "gone"]
    monkeypatch.setattr(
        checks, "all_checks", lambda: [_genai_check(same, moved="moved to X; images A-B ship it")]
    )
    (_, newest) = _rows(drift.check({"triton-inference-server/perf_analyzer": repo / ".git"}))
    assert (newest["ref"], newest["status"], newest["detail"]) == (
        "r99.02",
        "moved",
        "moved to X; images A-B ship it",
    )
    assert drift.check({})[0]["status"] == "unread"


def test_check_reads_a_single_file_given_at_a_commit_and_checks_its_blob(tmp_path, monkeypatch):
    """--file OWNER/NAME@COMMIT:PATH=LOCAL: the file must be the blob the fact records; another commit given for the
    same path is compared too (a newer release read the same way)."""
    from tests.contracts import checks, drift, refresh

    pbtxt = 'input [ { name: "text_input" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
    (tmp_path / "a.pbtxt").write_text(pbtxt)
    (tmp_path / "b.pbtxt").write_text(pbtxt.replace("text_input", "prompt"))
    path, commit, newer = "triton_backend/x/config.pbtxt", "a" * 40, "b" * 40
    recorded = refresh.template_facts(pbtxt)
    check = drift.Check(
        "t",
        "NVIDIA/TensorRT-LLM",
        (path,),
        commit,
        refresh.template_facts,
        lambda: recorded,
        blobs=(drift.blob_id(pbtxt.encode()),),
    )
    monkeypatch.setattr(checks, "all_checks", lambda: [check])
    args = [
        "--file",
        f"NVIDIA/TensorRT-LLM@{commit}:{path}={tmp_path / 'a.pbtxt'}",
        "--file",
        f"NVIDIA/TensorRT-LLM@{newer}:{path}={tmp_path / 'b.pbtxt'}",
    ]
    report = _rows(drift.check(*drift.parse(args)))
    assert [(r["ref"], r["status"]) for r in report] == [(commit, "same"), (newer, "drift")]
    assert "upstream added ['prompt'], removed ['text_input']" in report[1]["detail"]
    wrong = _rows(
        drift.check(
            *drift.parse(["--file", f"NVIDIA/TensorRT-LLM@{commit}:{path}={tmp_path / 'b.pbtxt'}"])
        )
    )
    assert wrong[0]["status"] == "drift" and "not the recorded blobs" in wrong[0]["detail"]
    assert (
        drift.main(args) == 1 and drift.main(args[:2]) == 0
    )  # the vLLM wheels not given: unread, not stale


def test_check_re_derives_vllm_facts_from_the_recorded_wheel(tmp_path, monkeypatch):
    """--wheel: the recorded sha256 first, then AsyncEngineArgs, QuantizationMethods and the tensor-parallel heads
    message read out of the wheel's own files."""
    from tests.contracts import checks, drift, refresh

    src = (
        "class EngineArgs:\n    model: str = 'm'\n    enable_prefix_caching: bool | None = None\n\n\n"
        "class AsyncEngineArgs(EngineArgs):\n    enable_log_requests: bool = False\n"
    )
    quant = (
        'from typing import Literal\nQuantizationMethods = Literal[\n    "awq",\n    "fp8",\n]\n'
    )
    model = (
        "class ModelConfig:\n    def verify_with_parallel_config(self, p):\n        if h % tp:\n"
        '            raise ValueError(\n                f"Total number of attention heads ({h})"\n'
        '                " must be divisible by tensor parallel size "\n                f"({tp})."\n'
        "            )\n"
    )
    wheel = _wheel(
        tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl",
        {
            "vllm/engine/arg_utils.py": src,
            "vllm/model_executor/layers/quantization/__init__.py": quant,
            "vllm/config/model.py": model,
        },
    )
    facts = refresh.engine_args(src)
    assert facts == {
        "AsyncEngineArgs": ["enable_log_requests", "enable_prefix_caching", "model"],
        "lines": {"EngineArgs": 1, "AsyncEngineArgs": 6},
        "enable_prefix_caching": "None",
    }
    recorded = {
        "source": {
            "path": "vllm/engine/arg_utils.py",
            "wheel": wheel.name,
            "lines": facts["lines"],
            "wheel_sha256": drift.sha256_file(wheel),
        },
        "AsyncEngineArgs": ["enable_log_requests", "model"],
        "enable_prefix_caching": "None",
        "quantization_methods": {
            "path": "vllm/model_executor/layers/quantization/__init__.py",
            "lines": "2-5",
            "values": ["awq", "fp8"],
        },
        "tp_heads": {
            "path": "vllm/config/model.py",
            "lines": "2-7",
            "message": "Total number of attention heads ({heads}) must be divisible by tensor "
            "parallel size ({tp}).",
        },
    }
    monkeypatch.setattr(checks, "vllm_versions", lambda: {"9.9.9": recorded, "1.0.0": recorded})
    by = {r["ref"]: r for r in checks.wheel_checks([wheel])}
    assert by["9.9.9"]["status"] == "drift" and "enable_prefix_caching" in by["9.9.9"]["detail"]
    assert by["1.0.0"]["status"] == "unread"
    recorded["AsyncEngineArgs"] = facts["AsyncEngineArgs"]
    assert checks.wheel_checks([wheel])[0]["status"] == "same"
    recorded["quantization_methods"]["values"] = ["awq", "fp8", "gptq"]
    assert "removed ['gptq']" in checks.wheel_checks([wheel])[0]["detail"]
    recorded["source"]["wheel_sha256"] = "0" * 64
    assert "not the recorded wheel" in checks.wheel_checks([wheel])[0]["detail"]


def test_cited_lines_are_checked_at_the_newest_release(tmp_path):
    """A hand-read fact cites lines: still there (whitespace aside) → same; rewritten → drift, naming the range;
    a fact that says it is pinned to its commit → pinned; a 'where' entry (path:lines) is read under the fact's
    source."""
    import json

    from tests.contracts.checks import cited_checks

    repo = tmp_path / "server"
    _git(tmp_path, "init", "-q", str(repo))
    first = _commit(
        repo, "a.py", "def f():\n    return 1\n\n\ndef g():\n    return 2\n", tag="v1.0.0"
    )
    _commit(repo, "a.py", "def f():  return 1\n\n\ndef g():\n    return 3\n", branch="r99.01")
    facts = tmp_path / "facts"
    facts.mkdir()
    src = {"repository": "o/server", "commit": first, "path": "a.py"}
    (facts / "x.json").write_text(
        json.dumps(
            {
                "f": {"source": {**src, "lines": "1-2 (f)"}},
                "g": {"source": {**src, "lines": "5-6 (g)"}},
                "g_pinned": {"source": {**src, "lines": "5-6"}, "pinned": "kept as it was"},
                "h": {
                    "source": {"repository": "o/server", "commit": first},
                    "rule": {"where": "a.py:5-6 (g)"},
                },
            }
        )
    )
    rows = {r["fact"].split()[0]: r for r in cited_checks({"o/server": repo / ".git"}, facts)}
    assert rows["x.f"]["status"] == "same" and rows["x.f"]["ref"] == "r99.01"
    assert rows["x.g"]["status"] == "drift" and "5-6" in rows["x.g"]["detail"]
    assert (rows["x.g_pinned"]["status"], rows["x.g_pinned"]["detail"]) == (
        "pinned",
        "kept as it was",
    )
    assert rows["x.h.rule.where"]["status"] == "drift"


# upstream git mirrors (DIR/OWNER+NAME/repo, the fetch tool's layout), where a machine has them
MIRRORS = Path(os.environ.get("TRITONBUILD_UPSTREAM_MIRRORS") or "no-mirrors-given")


@pytest.mark.skipif(
    not (MIRRORS / "triton-inference-server+tensorrtllm_backend/repo").is_dir(),
    reason="no upstream git mirrors here (TRITONBUILD_UPSTREAM_MIRRORS=DIR names them)",
)
def test_recorded_facts_are_what_upstream_says_at_their_recorded_commits():
    """The --check itself, on the recorded facts, against the upstream mirrors on this machine: every fact with an
    extractor reads the same at the commit it records (what upstream's newest release says is reported, not
    asserted: upstream moves on its own)."""
    from tests.contracts import drift
    from tests.contracts.checks import all_checks

    mirrors = drift.mirrors_in(MIRRORS)
    assert (
        "triton-inference-server/server" in mirrors
        and drift.parse(["--mirrors", str(MIRRORS)])[0] == mirrors
    )
    recorded = {c.commit for c in all_checks()}
    full = drift.check(mirrors)
    cited = [
        r for r in full if " " in r["fact"]
    ]  # a hand-read fact's cited lines exist at the commit it names
    assert cited and not [
        r for r in cited if r["ref"] in recorded or r.get("detail") == "not at the recorded commit"
    ]
    report = [
        r for r in full if r.get("ref") in recorded and r["repository"] != "NVIDIA/TensorRT-LLM"
    ]
    assert report and all(r["status"] == "same" for r in report), [
        r for r in report if r["status"] != "same"
    ]


def test_every_check_names_its_source_commit_and_every_moved_fact_says_which_images_ship_it():
    from tests.contracts.checks import all_checks

    for c in all_checks():
        assert (
            re.fullmatch(r"[0-9a-f]{40}", c.commit) and c.paths and c.repository.count("/") == 1
        ), c.fact
        if c.moved:
            assert "images that still ship" in c.moved.lower() or "still ship" in c.moved, c.fact


def test_check_re_derives_the_marlin_overrides_from_each_wheel(tmp_path, monkeypatch):
    """--wheel: what a vLLM's AWQ / GPTQ override_quantization_method accepts, and its lines, read from the wheel."""
    from tests.contracts import checks, drift

    awq = (
        "class AutoAWQConfig:\n    @classmethod\n    def override_quantization_method(cls, cfg, user_quant):\n"
        '        is_valid_user_quant = user_quant is None or user_quant in ("awq", "auto_awq")\n'
        '        return "auto_awq" if is_valid_user_quant else None\n\n    def get_name(cls):\n'
        '        return "auto_awq"\n'
    )
    gptq = awq.replace("awq", "gptq").replace("AWQ", "GPTQ")
    wheel = _wheel(
        tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl",
        {"vllm/q/auto_awq.py": awq, "vllm/q/auto_gptq.py": gptq},
    )
    one = {"wheel": wheel.name, "wheel_sha256": drift.sha256_file(wheel)}
    recorded = {
        "source": [
            {**one, "path": "vllm/q/auto_awq.py", "lines": "3-5 (AutoAWQConfig)"},
            {**one, "path": "vllm/q/auto_gptq.py", "lines": "3-5"},
        ],
        "accepted": {"awq": ["auto_awq", "awq"], "gptq": ["auto_gptq", "gptq"]},
    }
    facts = {"marlin_override": {"by_version": {"9.9.9": recorded, "1.0.0": recorded}}}
    monkeypatch.setattr(checks, "load", lambda name: facts)
    by = {r["ref"]: r for r in checks.marlin_checks({"9.9.9": wheel})}
    assert by["9.9.9"]["status"] == "same" and by["1.0.0"]["status"] == "unread"
    recorded["accepted"]["awq"] = ["auto_awq", "awq", "awq_marlin"]
    assert "awq_marlin" in checks.marlin_checks({"9.9.9": wheel})[0]["detail"]
    recorded["accepted"]["awq"], recorded["source"][1]["lines"] = ["auto_awq", "awq"], "4-5"
    assert "4-5" in checks.marlin_checks({"9.9.9": wheel})[0]["detail"]
    recorded["source"][0]["wheel_sha256"] = "0" * 64
    assert "not the recorded wheel" in checks.marlin_checks({"9.9.9": wheel})[0]["detail"]


def test_a_wheel_is_derived_whole_in_either_source_layout(tmp_path):
    """vllm-wheel: AsyncEngineArgs, the quantization methods (QuantizationMethods, or the older QUANTIZATION_METHODS
    dict), the heads message (vllm/config/model.py, or vllm/config.py before the split) and the AWQ / GPTQ
    overrides (auto_*.py, or *_marlin.py before the rename), with the wheel's sha256 and _version.py commit."""
    import zipfile

    from tests.contracts import drift
    from tests.contracts.vllm_wheels import derive

    args = (
        "class EngineArgs:\n    model: str = 'm'\n    enable_prefix_caching: bool = False\n\n\n"
        "class AsyncEngineArgs(EngineArgs):\n    disable_log_requests: bool = False\n"
    )
    old_quant = 'QUANTIZATION_METHODS: Dict[str, Type[QuantizationConfig]] = {\n    "awq": A,\n    "marlin": M,\n}\n'
    model = (
        "class ModelConfig:\n    def verify_with_parallel_config(self, p):\n        if h % tp:\n"
        '            raise ValueError(\n                f"Total number of attention heads ({h})"\n'
        '                " must be divisible by tensor parallel size "\n                f"({tp})."\n'
        "            )\n"
    )
    marlin = (
        "class AWQMarlinConfig:\n    @classmethod\n    def override_quantization_method(cls, cfg, user_quant):\n"
        '        is_valid_user_quant = (user_quant is None or user_quant == "marlin"\n'
        '                               or user_quant == "awq_marlin")\n        return None\n'
    )
    q = "vllm/model_executor/layers/quantization/"
    wheel = _wheel(
        tmp_path / "vllm-0.5.5-cp38-abi3-manylinux1_x86_64.whl",
        {
            "vllm/_version.py": "__commit_id__ = commit_id = 'g09c7792'\n",
            "vllm/engine/arg_utils.py": args,
            q + "__init__.py": old_quant,
            "vllm/config.py": model,
            q + "awq_marlin.py": marlin,
            q + "gptq_marlin.py": marlin.replace("awq", "gptq").replace("AWQ", "GPTQ"),
        },
    )
    entry, overrides = derive(wheel, ["24.12"])
    assert (
        entry["source"]["wheel_sha256"] == drift.sha256_file(wheel)
        and entry["source"]["commit"] == "09c7792"
    )
    assert entry["AsyncEngineArgs"] == ["disable_log_requests", "enable_prefix_caching", "model"]
    assert entry["enable_prefix_caching"] == "False" and entry["images"] == ["24.12"]
    assert entry["quantization_methods"] == {
        "path": q + "__init__.py",
        "lines": "1-4",
        "values": ["awq", "marlin"],
    }
    assert entry["tp_heads"]["path"] == "vllm/config.py" and entry["tp_heads"]["lines"] == "2-7"
    assert overrides["accepted"] == {
        "awq": ["awq", "awq_marlin", "marlin"],
        "gptq": ["gptq", "gptq_marlin", "marlin"],
    }
    assert overrides["source"][0]["lines"] == "3-6 (AWQMarlinConfig.override_quantization_method)"
    with zipfile.ZipFile(wheel, "a") as z:  # the newer file wins where both are there
        z.writestr(
            q + "auto_gptq.py",
            marlin.replace("awq_marlin", "auto_gptq").replace("AWQMarlin", "AutoGPTQ"),
        )
    assert derive(wheel, [])[1]["accepted"]["gptq"] == ["auto_gptq", "gptq", "marlin"]


def test_a_wheels_speculative_config_is_derived_in_each_layout(tmp_path):
    """vllm-wheel: speculative_config absent from AsyncEngineArgs; SpeculativeConfig.method as a Literal through
    aliases (vllm/config/speculative.py) or a plain str set in the class (vllm/config.py); draft_model refused by
    EngineArgs' NotImplementedError, run by the V1 DraftModelProposer, or neither (not known)."""
    from tests.contracts import drift
    from tests.contracts.vllm_spec_wheel import derive

    args = "class EngineArgs:\n    model: str = 'm'\n\n\nclass AsyncEngineArgs(EngineArgs):\n    x: bool = False\n"
    spec_args = args.replace(
        "    model: str = 'm'\n", "    model: str = 'm'\n    speculative_config: dict = None\n"
    )
    refuse = spec_args + (
        "    def f(self):\n        if method == 'draft_model':\n"
        "            raise NotImplementedError(\n"
        '                "Draft model speculative decoding is not supported yet. ")\n'
    )
    literal = (
        'A = Literal["m1", "m2"]\nEagle = Literal["eagle", "eagle3", A]\nSpeculativeMethod = Literal['
        '"ngram", "draft_model", Eagle]\n\n\nclass SpeculativeConfig:\n    num_speculative_tokens: int = 1\n'
        "    model: str | None = None\n    method: SpeculativeMethod | None = None\n"
    )
    plain = (
        "class SpeculativeConfig:\n    num_speculative_tokens: int = 1\n    model: Optional[str] = None\n"
        '    method: Optional[str] = None\n\n    def __post_init__(self):\n        self.method = "medusa"\n'
        '        if x:\n            self.method = "draft_model"\n'
    )

    def wheel(name: str, files: dict):
        return _wheel(tmp_path / f"vllm-{name}-cp38-abi3-manylinux1_x86_64.whl", files)

    old = derive(wheel("0.5.5", {"vllm/engine/arg_utils.py": args}), ["24.12"])
    assert old["speculative_config"] is False and old["source"]["lines"] == "5 (AsyncEngineArgs)"
    assert old["source"]["wheel_sha256"] == drift.sha256_file(
        tmp_path / "vllm-0.5.5-cp38-abi3-manylinux1_x86_64.whl"
    )
    new = derive(
        wheel("9.9.9", {"vllm/engine/arg_utils.py": refuse, "vllm/config/speculative.py": literal}),
        [],
    )
    assert new["methods"] == ["draft_model", "eagle", "eagle3", "m1", "m2", "ngram"]
    assert (
        new["fields"] == ["method", "model", "num_speculative_tokens"]
        and new["methods_from"] == "Literal"
    )
    assert (
        new["source"]["lines"]
        == "6 (SpeculativeConfig), 3 (SpeculativeMethod), 2 (Eagle), 1 (A), 9 (method), "
        "8 (model), 7 (num_speculative_tokens)"
    )
    assert new["draft_model"]["runs"] is False and new["draft_model"]["source"]["lines"] == "10"
    runs = derive(
        wheel(
            "9.9.10",
            {
                "vllm/engine/arg_utils.py": spec_args,
                "vllm/config/speculative.py": literal,
                "vllm/v1/spec_decode/draft_model.py": "\n\nclass DraftModelProposer(B):\n",
            },
        ),
        [],
    )
    assert runs["draft_model"]["runs"] is True and runs["draft_model"]["source"]["lines"] == "3"
    v0 = derive(
        wheel("0.8.4", {"vllm/engine/arg_utils.py": spec_args, "vllm/config.py": plain}), []
    )
    assert v0["methods"] == ["draft_model", "medusa"] and v0["methods_from"].startswith(
        "method: Optional[str]"
    )
    assert v0["draft_model"]["runs"] is None and v0["source"]["path"] == "vllm/config.py"


def test_check_re_derives_the_speculative_facts_from_each_wheel(tmp_path, monkeypatch):
    """--wheel: a vLLM's speculative entry re-derived whole from the recorded wheel (fields, methods, draft_model
    and lines); another wheel, or a changed method, is drift; a version not given is unread."""
    from tests.contracts import checks
    from tests.contracts.vllm_spec_wheel import derive

    args = (
        "class EngineArgs:\n    speculative_config: dict = None\n\n\nclass AsyncEngineArgs(EngineArgs):\n"
        "    x: bool = False\n"
    )
    config = (
        'SpeculativeMethod = Literal["ngram", "eagle"]\n\n\nclass SpeculativeConfig:\n'
        "    num_speculative_tokens: int = 1\n    model: str | None = None\n"
        "    method: SpeculativeMethod | None = None\n"
    )
    wheel = _wheel(
        tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl",
        {"vllm/engine/arg_utils.py": args, "vllm/config/speculative.py": config},
    )
    recorded = derive(wheel, ["99.01"])
    assert recorded["methods"] == ["eagle", "ngram"] and recorded["draft_model"]["runs"] is None
    facts = {"versions": {"9.9.9": recorded, "1.0.0": recorded}}
    monkeypatch.setattr(checks, "load", lambda name: facts)
    by = {r["ref"]: r for r in checks.speculative_checks({"9.9.9": wheel})}
    assert by["9.9.9"]["status"] == "same" and by["1.0.0"]["status"] == "unread"
    recorded["methods"] = ["eagle", "eagle3", "ngram"]
    assert "eagle3" in checks.speculative_checks({"9.9.9": wheel})[0]["detail"]
    recorded["source"]["wheel_sha256"] = "0" * 64
    assert "not the recorded wheel" in checks.speculative_checks({"9.9.9": wheel})[0]["detail"]
