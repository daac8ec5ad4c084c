"""The environment-variables reference (docs/reference/environment.md, generated at `mkdocs build` time by
ci/docs_reference.py): which variables tritonbuild and its serving image read, found by scanning the code, each
with what it does.

The scan: in builder/**/*.py, a name read through `os.environ.get/pop(NAME)`, `os.getenv(NAME)`,
`os.environ[NAME]`, `NAME in os.environ` or click's `envvar=NAME`, where NAME is a string literal or a module
constant holding one; a tuple of names a function iterates while it reads os.environ (the numerics variables
recorded, tritonbuild's own secrets); the variables a store's driver declares (class attributes `triton_env`:
passed into a container, `secret_env`: redacted, `endpoint_env`: its endpoint; core/drivers.py); in the serving
image's shell
(ci/docker/entrypoint.sh, Dockerfile.triton), `$TRITONBUILD_*` and `$AWS_*`. Writes (environ[NAME] = ...,
setdefault for a child) are not reads. tests/docs/test_environment.py holds the page to the scan: a variable the
code reads and this table does not describe fails the build of the docs, and so does one described and no longer
read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHELL = ("ci/docker/entrypoint.sh", "Dockerfile.triton")

# What each variable read by name does. Keep the wording short: the how-to pages say how to use them.
DESCRIPTIONS = {
    # tritonbuild's own
    "TRITONBUILD_CACHE_DIR": "The local build cache (steps, input digests, downloads) when no `--cache-dir` is "
    "given; default `$XDG_CACHE_HOME/tritonbuild` (`~/.cache/tritonbuild`). Beats the project config file.",
    "TRITONBUILD_CACHE_URL": "The shared remote build cache (`--cache-url` of plan and build): s3://, gs://, "
    "az://, file://.",
    "TRITONBUILD_TRITON_IMAGE": "The NGC tritonserver image the repository is served by (`--triton-image`): "
    "the embedded server's Python side runs that image's Python.",
    "TRITONBUILD_TRITONSERVER": "A tritonserver binary to run instead of the embedded one (`--tritonserver`).",
    "TRITONBUILD_EMBEDDED_PYTHON": "The interpreter (3.10-3.12) the embedded tritonserver's Python side runs "
    "on; default: this one when it fits, else a python3.12/3.11/3.10 on PATH or under pyenv.",
    "TRITONBUILD_EMBEDDED_PACKAGES": "Extra packages (space-separated requirements) installed into the "
    "embedded server's environment; another set is another environment.",
    "TRITONBUILD_ENVS_DIR": "Where the embedded server's environments are made; default `<cache dir>/envs`.",
    "TRITONBUILD_STUB_PATH": "Internal: set by tritonbuild for the embedded server's Python stub (the "
    "directories its environment adds to sys.path). Do not set it.",
    "TRITONBUILD_REPORT_KEY": "The key verification reports are signed with and publish checks them with "
    "(a CI secret, the same where verify and publish run); default: this machine's key. Its value is "
    "redacted from every message.",
    "TRITONBUILD_NET_DEADLINE_S": "Seconds any one request to an object store may wait for an answer "
    "(default 30).",
    "TRITONBUILD_LOCK_LEASE_S": "Seconds a publish's lock at the target lasts without renewal before "
    "another publish may take it over (default 120).",
    "TRITONBUILD_SWITCH_SETTLE_S": "Seconds the version folders a publish wrote must be still before its first "
    "switch, so a polling server never loads a version before its last file is counted (default 2; 0: at once).",
    "TRITONBUILD_PRUNE_GRACE_S": "Seconds after a model's switch (a publish's, a rollback's) during which "
    "`publish --keep` prunes none of its versions: polling servers copy the whole model directory to load the "
    "new version (default 600; 0: at once). Above the servers' poll interval plus one copy's time.",
    "TRITONBUILD_NOTIFY_LOAD_TIMEOUT_S": "Seconds `publish --notify` waits for a server to answer a load request "
    "(default 300).",
    "TRITONBUILD_GRPC_URL": "The gRPC endpoint `tune --server` measures at (else the HTTP URL's host on "
    "port 8001; `--grpc` beats it).",
    "TRITONBUILD_NO_GPU_PROBE": "`1`: do not run nvidia-smi to fingerprint the GPU toolchain (a machine "
    "without GPUs, a sandbox).",
    "TRITONBUILD_QUANTIZE_THREADS": "Threads the build-time INT4 (w4a16) quantizer uses; default: the CPUs "
    "this process may use, at most 8.",
    "TRITONBUILD_TRTLLM_EXAMPLES": "TensorRT-LLM's `examples/` directory (its convert_checkpoint.py "
    "scripts); default: `/app/tensorrt_llm/examples` or `/app/examples`, whichever exists.",
    # the serving image (ci/docker/entrypoint.sh, Dockerfile.triton)
    "TRITONBUILD_TARGET": "Serving image: the publish target (`s3://bucket/prefix`) synced into "
    "`TRITONBUILD_MODELS` at start; unset: the repository baked into the image.",
    "TRITONBUILD_MODELS": "Serving image: the repository directory served and probed (default `/models`).",
    "TRITONBUILD_STRICT_READINESS": "Serving image: tritonserver's `--strict-readiness` (default `true`; "
    "deploy-snippets sets `false` and probes each model).",
    "TRITONBUILD_PIP": "Serving image: the pip that installs invariant models' plugin wheels at start (default "
    "`pip`).",
    # other programs' variables tritonbuild reads
    "AWS_ENDPOINT_URL": "The S3-compatible endpoint (MinIO, Ceph, R2...) for s3:// targets and caches "
    "(`--endpoint-url`); the serving image syncs from it too.",
    "AWS_ENDPOINT_URL_S3": "The same, for S3 only; it wins over `AWS_ENDPOINT_URL` (boto's rule).",
    "AZURE_STORAGE_ACCOUNT": "The storage account of az:// targets (with `AZURE_STORAGE_KEY`, or a "
    "connection string).",
    "AZURE_STORAGE_ACCOUNT_NAME": "The same, when `AZURE_STORAGE_ACCOUNT` is unset.",
    "XDG_CACHE_HOME": "The default build cache is `$XDG_CACHE_HOME/tritonbuild`.",
    "XDG_CONFIG_HOME": "This machine's report-signing key lives under `$XDG_CONFIG_HOME/tritonbuild`.",
    "PYENV_ROOT": "Where the embedded server's interpreters are looked for under pyenv (default `~/.pyenv`).",
    "CUDA_VERSION": "Recorded in the toolchain fingerprint (the NGC images set it).",
    "CUDA_VISIBLE_DEVICES": "Inside the server, an LLM-API model instance maps its GPU ids through it "
    "and sets it to the instance's GPUs before TensorRT-LLM starts.",
    "PYTHONDONTWRITEBYTECODE": "Read by the embedded server's Python stub (the `.pth` tritonbuild writes): "
    "no `__pycache__` beside model.py.",
    "TRITON_INTERPRET": "Triton's interpreter (`1`: kernels run on the CPU, as the unit tests run them): the "
    "invariant W4A16 plugin then dequantizes with Triton operations instead of its PTX (the same values).",
}
# Variables read as a group: a tuple of names in the code. Keyed by the tuple's name (a store driver's attribute).
GROUPS = {
    "secret_env": "Secrets: their values are redacted from every message, log and report (never printed).",
    "NUMERICS_VARS": "Numerics: recorded in the numerics fingerprint of verification reports (they change "
    "which kernels run, so a golden's machine class includes them).",
    "triton_env": "Passed into a container: when `--tritonserver` runs an image, these are handed "
    "to it when set (the store credentials tritonserver reads itself).",
}

# A tuple iterated under another name, read as that group
ALIASES = {"OWN_SECRET_ENV": "secret_env"}
# A store driver's class attributes naming variables it reads (core/drivers.py), and their group
DRIVER_ATTRIBUTES = {"triton_env": "triton_env", "secret_env": "secret_env", "endpoint_env": None}

_READERS = {"get", "pop", "getenv"}
_IN_CODE = r"environ\.get\(\s*['\"]([A-Z][A-Z0-9_]*)['\"]"


def _constants(tree: ast.Module) -> dict[str, str | tuple[str, ...]]:
    """Module-level NAME = "literal" and NAME = ("a", "b", ...)."""
    out: dict[str, str | tuple[str, ...]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not isinstance(target, ast.Name):
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out[target.id] = value.value
        elif isinstance(value, (ast.Tuple, ast.List)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
        ):
            out[target.id] = tuple(e.value for e in value.elts)
    return out


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _name_read(node: ast.AST) -> ast.AST | None:
    """The argument naming the variable when `node` reads one from the environment."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        func = node.func
        reads = func.attr in _READERS and (
            _is_environ(func.value) or (func.attr == "getenv" and isinstance(func.value, ast.Name))
        )
        if reads and node.args:
            return node.args[0]
    if isinstance(node, ast.Call):
        for keyword in node.keywords:
            if keyword.arg == "envvar":
                return keyword.value
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and _is_environ(node.value)
    ):
        return node.slice
    if (
        isinstance(node, ast.Compare)
        and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        and any(_is_environ(c) for c in node.comparators)
    ):
        return node.left
    return None


def _python_reads(path: Path) -> list[tuple[str, int, str | None]]:
    """(variable, line, group) for each read in one Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = _constants(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # code written for another interpreter (a .pth line)
            text = "".join(
                str(v.value)
                if isinstance(v, ast.Constant)
                else str(constants.get(getattr(v.value, "id", ""), ""))
                for v in node.values
            )
            found += [(n, node.lineno, None) for n in re.findall(_IN_CODE, text)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [(n, node.lineno, None) for n in re.findall(_IN_CODE, node.value)]
        arg = _name_read(node)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            found.append((arg.value, node.lineno, None))
        elif isinstance(arg, ast.Name) and isinstance(constants.get(arg.id), str):
            found.append((constants[arg.id], node.lineno, None))
    # a tuple of names iterated in a function that reads os.environ
    for scope in ast.walk(tree):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not any(_name_read(n) is not None for n in ast.walk(scope)):
            continue
        for node in ast.walk(scope):
            if isinstance(node, (ast.For, ast.comprehension)):
                for group in _iterated(node.iter):
                    names = constants.get(group)
                    if isinstance(names, tuple):
                        line = getattr(node, "lineno", getattr(node.iter, "lineno", 0))
                        found += [(name, line, ALIASES.get(group, group)) for name in names]
    return found + _driver_reads(tree)


def _iterated(node: ast.AST) -> list[str]:
    """The constants a loop iterates: NAME, or (*NAME, *OTHER)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple):
        return [
            e.value.id
            for e in node.elts
            if isinstance(e, ast.Starred) and isinstance(e.value, ast.Name)
        ]
    return []


def _driver_reads(tree: ast.Module) -> list[tuple[str, int, str | None]]:
    """The variables a store driver's class declares (DRIVER_ATTRIBUTES), read through the driver."""
    found = []
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        for node in cls.body:
            target = (
                node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            )
            if isinstance(node, ast.AnnAssign):
                target = node.target
            if not (isinstance(target, ast.Name) and target.id in DRIVER_ATTRIBUTES and node.value):
                continue
            if isinstance(node.value, ast.Tuple):
                group = DRIVER_ATTRIBUTES[target.id]
                found += [
                    (e.value, e.lineno, group)
                    for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
    return found


def _shell_reads(path: Path) -> list[tuple[str, int, str | None]]:
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("CMD") else line
        found += [
            (m, number, None) for m in re.findall(r"\$\{?((?:TRITONBUILD|AWS)_[A-Z0-9_]+)", code)
        ]
    return found


def variables_read() -> dict[str, dict]:
    """{variable: {"sites": ["builder/x.py:12", ...], "groups": {tuple names}}} over the code."""
    reads: dict[str, dict] = {}
    files = [(p, _python_reads) for p in sorted((ROOT / "builder").rglob("*.py"))]
    files += [(ROOT / name, _shell_reads) for name in SHELL]
    for path, scan in files:
        for name, line, group in scan(path):
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                continue
            entry = reads.setdefault(name, {"sites": [], "groups": set()})
            entry["sites"].append(f"{path.relative_to(ROOT).as_posix()}:{line}")
            if group:
                entry["groups"].add(group)
    return reads


def _row(name: str, entry: dict, what: str) -> str:
    sites = ", ".join(f"`{site}`" for site in sorted(set(entry["sites"]))[:4])
    return f"| `{name}` | {what} | {sites} |"


def environment_page(generated: str, cell) -> str:
    reads = variables_read()
    own = sorted(n for n in reads if n.startswith("TRITONBUILD_") and n in DESCRIPTIONS)
    other = sorted(n for n in reads if not n.startswith("TRITONBUILD_") and n in DESCRIPTIONS)
    lines = [
        generated,
        "# Environment variables\n",
        "Every environment variable tritonbuild and its serving image (`Dockerfile.triton`, "
        "`ci/docker/entrypoint.sh`) read, found by scanning the code (`ci/docs_environment.py`); "
        "*read at* names the places. A flag beats its variable, and a variable beats the "
        "[project config file](../howto/config.md).\n",
        "## tritonbuild's own\n",
        "| variable | what it does | read at |",
        "|---|---|---|",
        *(_row(n, reads[n], cell(DESCRIPTIONS[n])) for n in own),
        "",
        "## Other programs' variables tritonbuild reads\n",
        "| variable | what it does | read at |",
        "|---|---|---|",
        *(_row(n, reads[n], cell(DESCRIPTIONS[n])) for n in other),
        "",
    ]
    for group, what in GROUPS.items():
        members = sorted(n for n, e in reads.items() if group in e["groups"])
        lines += [f"## {what.split(':')[0]}\n", f"{what}\n", "| variable | read at |", "|---|---|"]
        lines += [
            f"| `{n}` | {', '.join(f'`{s}`' for s in sorted(set(reads[n]['sites']))[:2])} |"
            for n in members
        ]
        lines.append("")
    return "\n".join(lines)
