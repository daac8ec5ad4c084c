"""A repository whose tritonbuild-manifest.json cannot be read as a build's: the error names the file (where), the
first problem and the fix, never pydantic's whole report; a publish target's manifest is named for what it is."""

from __future__ import annotations

import pytest

from tritonbuild.errors import VerifyError
from tritonbuild.repository.manifest import MANIFEST_NAME, read_repository


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"models": [], "bogus": 1', "document: Invalid JSON"),
        ('{"models": []}', "toolchain: Field required"),
    ],
)
def test_an_invalid_manifest_names_its_first_problem(tmp_path, text, why):
    (tmp_path / MANIFEST_NAME).write_text(text)
    with pytest.raises(VerifyError) as raised:
        read_repository(tmp_path, VerifyError)
    e = raised.value
    assert e.where == str(tmp_path / MANIFEST_NAME) and e.hint == "rebuild the repository"
    assert e.message.startswith(f"not a valid build manifest ({why}"), e.message
    assert "errors.pydantic.dev" not in e.message and "validation error" not in e.message


def test_a_publish_targets_manifest_is_named_for_what_it_is(tmp_path):
    (tmp_path / MANIFEST_NAME).write_text(
        '{"schema_version": 1, "models": {"m": {"live": 1, "config_sha256": "0", "versions": {}}}}'
    )
    with pytest.raises(VerifyError) as raised:
        read_repository(tmp_path, VerifyError)
    assert "holds a publish target's tritonbuild-manifest.json" in raised.value.message
    assert f"tritonbuild verify {tmp_path}" in raised.value.hint
