"""verify/triton_core.py without a server: which load failures of a model loaded as written are this machine's
(not loaded here) rather than the model's (a refusal), what a stand-in-checked model's row says, and which
servers of stand-ins start without the Python backend's auto-complete."""

from __future__ import annotations

from tests.contracts import repositories
from tests.contracts.facts import load
from tritonbuild.triton.standin import STANDIN_MODEL, declares_no_auto_complete
from tritonbuild.verify.triton_core import (
    NO_BACKEND_AUTOCOMPLETE,
    check_with_triton,
    not_here_cause,
    not_loaded_here,
)

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


def _repository(tmp_path):
    """Two models of another backend and an ensemble over them, each with its config.pbtxt."""
    root = tmp_path / "repo"
    for name in ("a", "b"):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.onnx").write_bytes(b"graph")
        (root / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
            'input [{name: "x", data_type: TYPE_FP32, dims: [4]}]\n'
            'output [{name: "y", data_type: TYPE_FP32, dims: [4]}]\n'
        )
    (root / "e" / "1").mkdir(parents=True)
    (root / "e" / "config.pbtxt").write_text(
        'name: "e"\nplatform: "ensemble"\nmax_batch_size: 8\n'
        'input [{name: "x", data_type: TYPE_FP32, dims: [4]}]\n'
        'output [{name: "y", data_type: TYPE_FP32, dims: [4]}]\n'
        'ensemble_scheduling {step [{model_name: "a", model_version: -1, input_map {key: "x", value: "x"}, '
        'output_map {key: "y", value: "y"}}]}\n'
    )
    return root


def _options_started(tmp_path, monkeypatch, root, as_is=frozenset()) -> list[list[str]]:
    """The options of each server check_with_triton starts (a stand-in for EmbeddedServer that loads
    everything)."""
    from tritonbuild.server import embedded, loading

    started = []

    class Server:
        http_url = "127.0.0.1:1"
        log_path = tmp_path / "tritonserver.log"

        def __init__(self, repository, *, launcher=None, options=None):
            started.append(list(options or []))

        def __enter__(self):
            self.log_path.write_text("")
            return self

        def __exit__(self, *exc):
            return False

        def describe(self):
            return "tritonserver (stand-in)"

    monkeypatch.setattr(embedded, "EmbeddedServer", Server)
    monkeypatch.setattr(loading, "load_model", lambda url, name, timeout=None: None)
    names = sorted(p.name for p in root.iterdir())
    refusals, _changes, _which = check_with_triton(root, names, as_is=as_is)
    assert refusals == dict.fromkeys(names)
    return started


def test_a_server_of_stand_ins_only_runs_without_the_python_backends_auto_complete(
    tmp_path, monkeypatch
):
    """A stand-in has no auto_complete_config: the backend's auto-complete stub would hand each config back
    unchanged (tests/contracts/facts/triton_autocomplete.json), one Python process per model for nothing."""
    root = _repository(tmp_path)
    assert _options_started(tmp_path, monkeypatch, root) == [[NO_BACKEND_AUTOCOMPLETE]]


def test_a_model_loaded_as_itself_or_without_config_keeps_the_auto_complete(tmp_path, monkeypatch):
    """A model loaded as itself may have its own auto_complete_config; one without config.pbtxt gets its
    config from auto-complete alone (Triton refuses it otherwise)."""
    root = _repository(tmp_path)
    assert _options_started(tmp_path, monkeypatch, root, as_is=frozenset({"b"})) == [[]]
    (root / "b" / "config.pbtxt").unlink()
    assert _options_started(tmp_path, monkeypatch, root) == [[]]


def _python_model(root, name, source, config_extra=""):
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text(source)
    (root / name / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n{config_extra}'
        'input [{name: "x", data_type: TYPE_FP32, dims: [4]}]\n'
        'output [{name: "y", data_type: TYPE_FP32, dims: [4]}]\n'
    )
    return root / name


def test_a_python_model_whose_class_has_no_auto_complete_config_loads_without_the_stub(
    tmp_path, monkeypatch
):
    """A hand-written Python model loaded as itself whose TritonPythonModel provably has no
    auto_complete_config gets its config back unchanged from the auto-complete stub (the facts'
    stub_returns): the server starts without it, one Python process per model fewer."""
    root = _repository(tmp_path)
    _python_model(root, "p", STANDIN_MODEL)
    assert _options_started(tmp_path, monkeypatch, root, as_is=frozenset({"p"})) == [
        [NO_BACKEND_AUTOCOMPLETE]
    ]
    _python_model(root, "q", "class TritonPythonModel:\n    @staticmethod\n"
                  "    def auto_complete_config(c):\n        return c\n")  # fmt: skip
    assert _options_started(tmp_path, monkeypatch, root, as_is=frozenset({"p", "q"})) == [[]]


PLAIN = "class TritonPythonModel(object):\n    def execute(self, requests):\n        return []\n"


def test_only_a_provably_plain_class_counts_as_without_auto_complete_config(tmp_path):
    """Whatever could give the class auto_complete_config (a base, a metaclass, a decorator, another
    binding of the name, a star import, run-time binding, the name in any Python file of the model,
    an unreadable file, another backend) keeps the stub."""
    assert declares_no_auto_complete(_python_model(tmp_path, "plain", PLAIN))
    assert declares_no_auto_complete(_python_model(tmp_path, "standin", STANDIN_MODEL))
    named = _python_model(tmp_path, "named", PLAIN, 'default_model_filename: "main.py"\n')
    assert not declares_no_auto_complete(named)  # no main.py
    (named / "1" / "main.py").write_text(PLAIN)
    assert declares_no_auto_complete(named)
    unproven = {
        "base": "import base\nclass TritonPythonModel(base.Model):\n    pass\n",
        "metaclass": "class TritonPythonModel(metaclass=M):\n    pass\n",
        "decorator": "@wrap\nclass TritonPythonModel:\n    pass\n",
        "rebound": PLAIN + "TritonPythonModel = make()\n",
        "imported": "from lib import TritonPythonModel\n",
        "nested": "if True:\n    class TritonPythonModel:\n        pass\n",
        "function": PLAIN + "def TritonPythonModel():\n    pass\n",
        "star": PLAIN + "from helpers import *\n",
        "setattr": PLAIN + "setattr(TritonPythonModel, 'x' + 'y', f)\n",
        "exec": PLAIN + "exec(code)\n",
        "syntax": "class TritonPythonModel(:\n",
        "absent": "x = 1\n",
    }
    for name, source in unproven.items():
        assert not declares_no_auto_complete(_python_model(tmp_path, name, source)), name
    helper = _python_model(tmp_path, "helper", PLAIN)
    (helper / "1" / "util.py").write_text(
        "import model\nmodel.TritonPythonModel.auto_complete_config = f\n"
    )
    assert not declares_no_auto_complete(helper)
    other = _python_model(tmp_path, "other", PLAIN)
    (other / "config.pbtxt").write_text(
        (other / "config.pbtxt").read_text().replace("python", "onnxruntime")
    )
    assert not declares_no_auto_complete(other)
    unversioned = _python_model(
        tmp_path, "unversioned", "class TritonPythonModel(Base):\n    pass\n"
    )
    (unversioned / "1" / "model.py").unlink()
    assert not declares_no_auto_complete(unversioned)  # a version without its file
    (unversioned / "1").rmdir()
    assert declares_no_auto_complete(unversioned)  # Triton's core refuses it before any backend


def test_the_option_is_tritonservers_global_auto_complete_setting_turned_off():
    """Upstream's words for it: a global --backend-config=<setting>=<value> (no backend name), the setting the
    backends read their auto-complete flag from, and its value false."""
    facts = load("triton_autocomplete")
    setting = facts["first_value_wins"]["setting"]
    assert NO_BACKEND_AUTOCOMPLETE == facts["option"] == f"--backend-config={setting}=false"
    assert "," not in NO_BACKEND_AUTOCOMPLETE  # '<backend name>,' would make it one backend's


def test_the_embedded_server_passes_the_options_it_is_given(tmp_path):
    from tritonbuild.server.embedded import EmbeddedServer

    class Launcher:
        bundled = False

        def command(self, repository, tmp, ports, options):
            return ["tritonserver", f"--model-repository={repository}", *options]

    server = EmbeddedServer(tmp_path, launcher=Launcher(), options=[NO_BACKEND_AUTOCOMPLETE])
    server._tmp = tmp_path
    assert server.argv().count(NO_BACKEND_AUTOCOMPLETE) == 1
    assert NO_BACKEND_AUTOCOMPLETE not in EmbeddedServer(tmp_path, launcher=Launcher()).argv()
