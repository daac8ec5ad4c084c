"""One exit code per error class, in one table (errors.ERROR_CLASSES / errors.exit_codes()) that the docs
site's errors page and its generated exit-code page follow. TuneError and ServerStartError exited with verify's 6
before."""

from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import ROOT
from tritonbuild import errors

ERRORS_PAGE = (ROOT / "docs" / "explanation" / "errors.md").read_text()


def _all_error_classes() -> set[type]:
    for path in sorted((ROOT / "builder").rglob("*.py")):
        if path.parent.name != "models":
            parts = path.relative_to(ROOT / "builder").with_suffix("").parts
            importlib.import_module(
                ".".join(["tritonbuild", *(p for p in parts if p != "__init__")])
            )
    todo, seen = [errors.TritonBuildError], set()
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return seen


def test_each_error_class_has_its_own_code():
    codes = [cls.exit_code for cls in errors.ERROR_CLASSES]
    assert len(set(codes)) == len(codes)
    assert not {errors.OK, errors.INTERNAL, errors.INTERRUPTED} & set(codes)
    assert errors.TuneError.exit_code not in (
        errors.VerifyError.exit_code,
        errors.ServerStartError.exit_code,
    )
    assert issubclass(errors.TuneError, errors.VerifyError) and issubclass(
        errors.ServerStartError, errors.VerifyError
    )


def test_a_class_that_sets_a_code_is_in_the_table():
    own = {
        cls
        for cls in _all_error_classes()
        if "exit_code" in vars(cls) and cls is not errors.MultipleErrors
    }
    assert own == set(errors.ERROR_CLASSES)


@pytest.mark.parametrize("broken", ["drop", "duplicate"])
def test_the_table_check_fails_when_broken_on_purpose(monkeypatch, broken):
    classes = list(errors.ERROR_CLASSES)
    if broken == "drop":
        classes.remove(errors.TuneError)
    else:
        monkeypatch.setattr(errors.TuneError, "exit_code", errors.VerifyError.exit_code)
    monkeypatch.setattr(errors, "ERROR_CLASSES", tuple(classes))
    with pytest.raises(AssertionError):
        test_each_error_class_has_its_own_code()
        test_a_class_that_sets_a_code_is_in_the_table()


def test_the_docs_errors_table_lists_every_code():
    rows = {
        int(code): kind for code, kind in re.findall(r"^\| (\d+) \| ([\w-]+)", ERRORS_PAGE, re.M)
    }
    assert set(rows) == set(errors.exit_codes())
    assert all(rows[cls.exit_code] == cls.kind for cls in errors.ERROR_CLASSES)
