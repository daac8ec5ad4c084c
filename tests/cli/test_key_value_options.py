"""KEY=VALUE options are parsed in one place (cli/common.key_values): each refuses an item without a key, an
'=' or a value, as a usage error (exit 2) naming the option and the form it expects."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("args", "option", "form"),
    [
        (["build", "{recipe}", "-o", "{out}", "--engine", "=dir"], "--engine", "MODEL=DIR"),
        (["infer", "{out}", "m", "--input", "x"], "--input", "NAME=FILE.npy"),
        (["verify", "{out}", "--backend", "vllm="], "--backend", "NAME=DIR"),
        (
            [
                "export",
                "model-analyzer",
                "{recipe}",
                "-o",
                "{out}/ma.yaml",
                "-m",
                "{out}",
                "--input-data",
                "a=b",
                "--input-data",
                "c",
            ],
            "--input-data",
            "MODEL=FILE",
        ),
    ],
)
def test_a_malformed_pair_is_a_usage_error(cli, py_recipe, tmp_path, args, option, form):
    out = tmp_path / "OUT"
    out.mkdir()
    r = cli(*(a.format(recipe=py_recipe, out=out) for a in args))
    assert r.exit_code == 2, r.output
    assert option in r.output and f"expected {form}" in r.output


def test_key_values_keeps_the_value_after_the_first_equals_sign():
    from tritonbuild.cli.common import key_values

    assert key_values(("a=b=c", "d=e"), "--x", "K=V") == {"a": "b=c", "d": "e"}
