"""Which Python each NGC tritonserver image runs (builder/triton/images.py) is what upstream says
(facts/triton_image_pythons.json: the Python backend QA's default per release branch, the
compatibility matrix's Python column), and the facts' reader reads what those files say."""

from __future__ import annotations

from tests.contracts.facts import load
from tests.contracts.image_pythons import matrix_pythons, qa_python
from tritonbuild.triton.images import PYTHONS, image_python

FACTS = load("triton_image_pythons")


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_the_table_is_the_recorded_facts_image_for_image():
    recorded = {
        "py3": {tag: row["python"] for tag, row in FACTS["py3"]["releases"].items()},
        **{
            flavour: {tag: _minor(row["python"]) for tag, row in FACTS[flavour]["images"].items()}
            for flavour in ("vllm-python-py3", "trtllm-python-py3")
        },
    }
    assert recorded == PYTHONS


def test_the_move_to_312_is_where_the_base_image_moved_to_ubuntu_2404():
    """24.10's build is on Ubuntu 22.04 (python3 3.10), 24.11's on 24.04 (python3 3.12): the QA's
    default changes at the same release."""
    base = FACTS["ubuntu_base"]
    assert (base["24.10"]["base_image"], base["24.11"]["base_image"]) == (
        "ubuntu:22.04",
        "ubuntu:24.04",
    )
    releases = FACTS["py3"]["releases"]
    assert (releases["24.10"]["python"], releases["24.11"]["python"]) == ("3.10", "3.12")


def test_an_image_reference_or_its_tag_names_the_same_python():
    for reference in (
        "nvcr.io/nvidia/tritonserver:24.08-py3",
        "tritonserver:24.08-py3",
        "24.08-py3",
        "24.08",
    ):
        assert image_python(reference) == ("nvcr.io/nvidia/tritonserver:24.08-py3", "3.10")
    assert image_python("25.01-vllm-python-py3")[1] == "3.12"
    # the TensorRT-LLM image moved a release later than the others
    assert image_python("24.11-trtllm-python-py3")[1] == "3.10"
    assert image_python("24.11-vllm-python-py3")[1] == "3.12"
    for unknown in ("myregistry/triton:1.0", "22.01-py3", "99.01-py3", "24.08-py3-sdk", "24.8"):
        assert image_python(unknown) is None, unknown


def test_the_reader_takes_the_qa_default_and_the_matrix_python_column():
    assert qa_python('x\nexport PYTHON_ENV_VERSION=${PYTHON_ENV_VERSION:="12"}\n') == (2, "3.12")
    assert qa_python("no default here\n") is None
    matrix = (
        "## Container Name: vllm-python-py3\n\n"
        "| Triton release version | NGC Tag | Python version | vLLM version |\n"
        "| --- | --- | --- | --- |\n"
        "| 24.10 | nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3 | Python 3.10.12 | 0.5.5 |\n"
    )
    assert matrix_pythons(matrix) == {
        "vllm-python-py3": {"24.10": {"line": 5, "python": "3.10.12"}}
    }


def test_each_release_is_re_derived_at_its_own_commit_and_the_matrix_at_its_own():
    """refresh --check reads each release's QA default at that release's commit only (upstream's newest
    release says 3.12 for every older tag), and the matrix columns at theirs and at the newest."""
    from tests.contracts.checks import all_checks

    checks = {c.fact: c for c in all_checks() if c.fact.startswith("triton_image_pythons.")}
    releases = FACTS["py3"]["releases"]
    for tag, row in releases.items():
        check = checks[f"triton_image_pythons.py3.{tag}"]
        assert check.one_release and check.commit == row["source"]["commit"]
        assert check.derive('PYTHON_ENV_VERSION:="10"') == "3.10"
    matrix = checks["triton_image_pythons.vllm-python-py3"]
    assert not matrix.one_release and matrix.recorded() == FACTS["vllm-python-py3"]["images"]
