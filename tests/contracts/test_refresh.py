"""The refresh extractors (refresh.py) read what the facts claim: try-guarded vs unguarded parameter reads,
argparse option strings, class fields, template tensors."""

from __future__ import annotations

from tests.contracts.refresh import argparse_flags, class_fields, cpp_parameters, template_facts

CPP = '''
T f() {
    auto a = model_state_->GetParameter<std::string>("always");  // unguarded
    try
    {
        x = model_state_->GetParameter<int32_t>("guarded_one");
    }
    catch (std::exception const& e) { if (y) { z(); } }
    if (c) { q = model_state_->GetParameter<std::vector<int32_t>>("in_if"); }
}
'''


def test_cpp_parameters_split_by_enclosing_try():
    assert cpp_parameters(CPP) == {"unguarded": ["always", "in_if"], "guarded": ["guarded_one"]}


def test_argparse_flags_cover_groups_and_aliases():
    src = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--a', '-A')\n" \
          "g = p.add_argument_group('x')\ng.add_argument('--b-c', '--b_c', type=int)\np.add_argument('pos')\n"
    assert argparse_flags(src) == ["--a", "--b-c", "--b_c", "-A"]


def test_class_fields_follow_local_bases():
    src = "class A:\n    x: int = 1\n    _p: int = 0\nclass B(A):\n    y: str\n    z = 3\n"
    assert class_fields(src, "B") == ["x", "y"]


def test_template_facts_keep_placeholders_and_flags():
    text = '''name: "m"
# comment with input [ ]
input [
  { name: "a" data_type: TYPE_INT32 dims: [ 1 ] reshape: { shape: [ ] } optional: true },
  { name: "b" data_type: ${t} dims: [ -1, -1 ] allow_ragged_batch: true }
]
output [ { name: "o" data_type: TYPE_FP32 dims: [ -1 ] } ]
parameters: { key: "k" value: { string_value: "${k}" } }
'''
    facts = template_facts(text)
    assert facts["inputs"] == [{"name": "a", "data_type": "TYPE_INT32", "dims": [1], "optional": True, "reshape": []},
                               {"name": "b", "data_type": "${t}", "dims": [-1, -1], "allow_ragged_batch": True}]
    assert facts["outputs"] == [{"name": "o", "data_type": "TYPE_FP32", "dims": [-1]}]
    assert facts["parameters"] == ["k"]


def test_check_reports_same_drift_and_gone_against_a_git_history(tmp_path, monkeypatch):
    """--check reads upstream's files with git show at the recorded commit and at the newest tag."""
    import subprocess

    from tests.contracts import drift

    repo = tmp_path / "perf_analyzer"
    path = "genai-perf/genai_perf/inputs/converters/tensorrtllm_converter.py"
    (repo / path).parent.mkdir(parents=True)

    def commit(text: str, tag: str | None = None) -> str:
        (repo / path).write_text(text)
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
                       check=True)
        if tag:
            subprocess.run(["git", "-C", str(repo), "tag", tag], check=True)
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    same = commit('class TensorRTLLMConverter:\n    payload = {"text_input": [t], "max_tokens": [n], '
                  '"exclude_input_in_output": [True]}\n    payload["stream"] = [True]\n'
                  '    payload["min_length"] = [n]\n')
    commit('class TensorRTLLMConverter:\n    payload = {"text_input": [t], "max_tokens": [n], "top_k": [1]}\n',
           tag="v9.0.0")
    monkeypatch.setattr(drift, "file_checks", lambda: [
        ("clients.genai_perf", "triton-inference-server/perf_analyzer", path, same, drift._genai_perf_inputs,
         drift._recorded_genai_perf)])
    report = drift.check({"triton-inference-server/perf_analyzer": repo / ".git"})
    by_ref = {r.get("ref"): r for r in report if r["fact"] == "clients.genai_perf"}
    assert by_ref[same]["status"] == "same"
    assert by_ref["v9.0.0"]["status"] == "drift" and "'top_k'" in by_ref["v9.0.0"]["detail"]
    assert "'min_length'" in by_ref["v9.0.0"]["detail"]  # removed upstream
    assert {r["status"] for r in report if r["fact"].startswith("tensorrtllm_backend")} == {"unread"}
