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
