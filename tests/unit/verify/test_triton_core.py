"""verify/triton_core.py without a server: which load failures of a model loaded as written are this machine's
(not loaded here) rather than the model's (a refusal), and what a stand-in-checked model's row says."""

from __future__ import annotations

from tests.contracts import repositories
from tritonbuild.verify.triton_core import not_here_cause, not_loaded_here

MISSING = (
    "version 1 is at UNAVAILABLE state: Internal: Exception: No such file or directory (os error 2)"
)


def test_a_missing_file_named_by_an_absent_absolute_parameter_is_this_machines(tmp_path):
    """The README's tokenizer_dir (/app/...) is the serving machine's."""
    d = repositories.write_trtllm_group(tmp_path, "r25.04") / "preprocessing"
    why = not_here_cause(
        d, f"{MISSING}\n\nAt:\n  {d}/1/model.py(18): initialize\n"
    )  # the stub's traceback
    assert why is not None and "tokenizer_dir '/app/tensorrt_llm/examples/gpt/gpt2'" in why


def test_a_missing_file_of_the_models_own_or_another_error_is_a_refusal(tmp_path):
    d = repositories.write_trtllm_group(tmp_path, "r25.04") / "preprocessing"
    assert not_here_cause(d, f"FileNotFoundError: {d / '1' / 'weights.bin'}") is None
    assert not_here_cause(d, "KeyError: 'tokenizer_dir'") is None
    assert "imports 'transformers'" in not_here_cause(
        d, "ModuleNotFoundError: No module named 'transformers'"
    )


def test_only_a_model_whose_backend_the_server_lacks_says_not_checked_here(tmp_path):
    root = repositories.write_trtllm_group(tmp_path, "r24.10")
    assert "not checked here (needs GPU/TRT-LLM)" in not_loaded_here(root / "tensorrt_llm")
    assert not_loaded_here(root / "ensemble") is None
    assert (
        not_loaded_here(root / "preprocessing") is None
    )  # the python backend is there (stand-in: a GPU kind)


def test_an_initialize_that_cannot_reach_the_network_is_this_machines(tmp_path):
    """Model code that fetches weights at initialize() fails here (no network) and not on the fleet."""
    d = repositories.write_trtllm_group(tmp_path, "r25.04") / "preprocessing"
    hub = (
        "version 1 is at UNAVAILABLE state: Internal: ConnectionError: HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Max retries exceeded with url: /gpt2/resolve/main/config.json (Caused by NameResolutionError("
        "\"Failed to resolve 'huggingface.co' ([Errno -3] Temporary failure in name resolution)\"))\n\nAt:\n"
        f"  {d}/1/model.py(12): initialize\n"
    )
    why = not_here_cause(d, hub)
    assert why is not None and why.startswith("needs network") and "(huggingface.co)" in why
    # the same words outside initialize() (a config refusal quoting a URL) stay a refusal
    assert not_here_cause(d, "unexpected platform type 'x' (see https://example.com)") is None
