"""A new NGC image release is data only: its rows in the shipped facts (builder/facts/triton_images.json,
triton_image_pythons.json) and, to make it the default, DEFAULT_TAG. Counted two ways: no builder module
spells a recorded image tag as a value (but DEFAULT_TAG's line), and a release added to copies of the fact
files alone is known to every reader (the TensorRT-LLM, TensorRT, CUDA and vLLM it ships, its Python)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.conftest import ROOT
from tritonbuild.core import facts

IMAGE_FACTS = ("triton_images", "triton_image_pythons")


def _recorded_tags() -> set[str]:
    images, pythons = (facts.load(n) for n in IMAGE_FACTS)
    return {
        *images["images"],
        *images["vllm_images"],
        *pythons["py3"]["releases"],
        *pythons["vllm-python-py3"]["images"],
        *pythons["trtllm-python-py3"]["images"],
    }


def test_no_builder_module_spells_a_recorded_image_tag():
    tags = _recorded_tags()
    assert len(tags) > 20
    # a tag as a string of its own (a table's key or value), not an example inside a help text
    alternatives = "|".join(re.escape(t) for t in sorted(tags))
    spelt = re.compile(rf"""(["'])({alternatives})\1""")
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in sorted((ROOT / "builder").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if spelt.search(line) and not line.startswith("DEFAULT_TAG = ")
    ]
    assert not found, "a release's facts belong in builder/facts/*.json:\n" + "\n".join(found)


PROBE = """
import json, sys
from pathlib import Path
from tritonbuild.core import facts
facts._folder = lambda: Path(sys.argv[1])
from tritonbuild.backends.llm.images import TRTLLM_IMAGES, VLLM_IMAGES
from tritonbuild.backends.vllm.versions import image_vllm
from tritonbuild.triton.images import image_python
print(json.dumps({
    "trtllm": TRTLLM_IMAGES.get("99.01"),
    "vllm": image_vllm("nvcr.io/nvidia/tritonserver:99.01-vllm-python-py3"),
    "pythons": [image_python(f"99.01-{f}") for f in ("py3", "vllm-python-py3", "trtllm-python-py3")],
}))
"""


def test_a_release_added_to_the_facts_alone_is_known_everywhere(tmp_path):
    for path in (ROOT / "builder" / "facts").glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text())
    images, pythons = (facts.load(n) for n in IMAGE_FACTS)
    newest = max(images["images"])
    images = {
        **images,
        "images": {"99.01": {**images["images"][newest], "trtllm": "9.9.9"}, **images["images"]},
        "vllm_images": {"99.01": images["vllm_images"][newest], **images["vllm_images"]},
    }
    pythons = json.loads(json.dumps(pythons))
    pythons["py3"]["releases"]["99.01"] = {**pythons["py3"]["releases"][newest], "python": "3.13"}
    for flavour in ("vllm-python-py3", "trtllm-python-py3"):
        pythons[flavour]["images"]["99.01"] = {"line": 1, "python": "3.13.1"}
    (tmp_path / "triton_images.json").write_text(json.dumps(images))
    (tmp_path / "triton_image_pythons.json").write_text(json.dumps(pythons))
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    seen = json.loads(out.stdout)
    row = images["images"]["99.01"]
    assert seen["trtllm"] == [row["trtllm"], row["tensorrt"], row["cuda"]]
    assert seen["vllm"] == images["vllm_images"]["99.01"]["vllm"]
    assert [p[1] for p in seen["pythons"]] == ["3.13"] * 3
