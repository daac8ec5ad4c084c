"""What a published version's identity compares beyond its files (publish/identity.py, issue 43)."""

from __future__ import annotations

from tritonbuild.publish.identity import changed_steps, config_differences

CONFIG = b"""
name: "m"
backend: "python"
max_batch_size: 4
parameters { key: "factor" value { string_value: "2" } }
version_policy { latest { num_versions: 1 } }
"""


def test_the_same_config_written_otherwise_does_not_differ():
    """Another text rendering (field order, spacing, the version_policy, which is publish's switch) of the same
    config is the same config: no refusal from a protobuf upgrade alone."""
    other = b'backend:"python"\nparameters{key:"factor" value{string_value:"2"}}\nname:"m"\nmax_batch_size:4\n'
    assert config_differences(CONFIG, other) == []


def test_a_changed_parameter_and_field_are_named():
    changed = CONFIG.replace(b'"2"', b'"3"').replace(b"max_batch_size: 4", b"max_batch_size: 8")
    assert config_differences(CONFIG, changed) == ["parameters['factor']", "max_batch_size"]
    added = CONFIG + b'parameters { key: "new" value { string_value: "x" } }\n'
    assert config_differences(CONFIG, added) == ["parameters['new']"]


def test_steps_that_differ_are_named_and_old_records_compare_nothing():
    assert changed_steps({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == ["b", "c"]
    assert changed_steps(None, {"a": "1"}) == []
