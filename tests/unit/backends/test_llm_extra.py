"""tokenizers lives in the `llm` extra: without it, assembling an LLM group is a clear error naming the extra."""

import sys

import pytest

from tritonbuild.backends.tensorrtllm.group import special_ids
from tritonbuild.errors import BuildError


@pytest.mark.parametrize(
    "module, file", [("tokenizers", "tokenizer.json"), ("sentencepiece", "tokenizer.model")]
)
def test_missing_tokenizers_names_the_llm_extra(tmp_path, monkeypatch, module, file):
    (tmp_path / file).write_text("{}")
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(BuildError) as e:
        special_ids(tmp_path)
    assert "tritonbuild[llm]" in e.value.hint and module in str(e.value)
