"""The store seam (docs/ARCHITECTURE.md, "A new object store"): everything tritonbuild knows per scheme is on
the store's driver (core/drivers.py, core/cloud_drivers.py), registered in core/stores.py; the launcher, the
redactor, deploy-snippets and the CLI's help iterate over the registered drivers. Re-counted two ways: no module
outside the store modules tests for "://" or names a store's scheme or credentials, and a store defined here, in
the test, reaches every one of them with no source edit."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.contracts.facts import load
from tritonbuild.core import secrets, stores
from tritonbuild.core.drivers import Driver

SOURCE = ROOT / "builder"
# The store module (split_url: the one test of "is this a URL") and the drivers it registers
STORE_MODULES = {"core/stores.py", "core/drivers.py", "core/cloud_drivers.py"}
# What iterates over the drivers instead of naming stores
CONSUMERS = (
    "server/launcher.py",
    "core/secrets.py",
    "publish/k8s.py",
    "publish/k8s_pod.py",
    "publish/k8s_fleet.py",
    *sorted(str(p.relative_to(SOURCE)) for p in (SOURCE / "cli").glob("*.py")),
)


def _sources() -> dict[str, str]:
    return {str(p.relative_to(SOURCE)): p.read_text() for p in sorted(SOURCE.rglob("*.py"))}


BARE_URL_TEST = re.compile(r"""(["'])://\1""")


def bare_url_tests(sources: dict[str, str]) -> list[str]:
    """Modules outside the store module holding a "://" literal (a URL tested by hand)."""
    return sorted(
        path
        for path, text in sources.items()
        if path not in STORE_MODULES and BARE_URL_TEST.search(text)
    )


def test_only_the_store_module_tests_whether_text_is_a_url():
    sources = _sources()
    assert bare_url_tests(sources) == []
    # broken on purpose: each spelling is seen
    sources["tune/built.py"] += 'local = "://" not in target\n'
    sources["verify/infer.py"] += "host = url.split('://', 1)[1]\n"
    assert bare_url_tests(sources) == ["tune/built.py", "verify/infer.py"]


def _store_words() -> set[str]:
    """What names one store: its schemes (and their URLs' prefixes), tritonserver's scheme, its credentials."""
    words = set()
    for driver in stores.drivers():
        words |= {*driver.schemes, *driver.triton_env, *driver.secret_env}
        words |= {f"{scheme}://" for scheme in driver.schemes}
        if driver.triton_scheme:
            words |= {driver.triton_scheme, f"{driver.triton_scheme}://"}
    return words


def named_stores(sources: dict[str, str]) -> dict[str, list[str]]:
    """Per consumer module, the string literals (docstrings and help texts too) that name a registered store."""
    words = _store_words()
    pattern = re.compile("|".join(sorted(map(re.escape, words), key=len, reverse=True)))
    found = {}
    for path in CONSUMERS:
        hits = set()
        for node in ast.walk(ast.parse(sources[path])):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value in words:
                    hits.add(node.value)
                hits |= {m for m in pattern.findall(node.value) if m.endswith("://")}
                hits |= {m for m in re.findall(r"\b[A-Z][A-Z0-9_]+\b", node.value) if m in words}
        if hits:
            found[path] = sorted(hits)
    return found


def test_no_consumer_names_a_store():
    sources = _sources()
    assert named_stores(sources) == {}
    # broken on purpose: a scheme compared, a credential passed by name, a help text listing schemes
    sources["publish/k8s.py"] += 'if scheme == "gs":\n    pass\n'
    sources["server/launcher.py"] += '_PASSED = ("AWS_ACCESS_KEY_ID",)\n'
    sources["cli/deploy.py"] += 'HELP = "Publish target (s3://, gs://)"\n'
    assert named_stores(sources) == {
        "cli/deploy.py": ["gs://", "s3://"],
        "publish/k8s.py": ["gs"],
        "server/launcher.py": ["AWS_ACCESS_KEY_ID"],
    }


def test_each_store_tritonserver_reads_carries_upstreams_scheme_and_credentials():
    """tritonserver's repository prefix and the variables it reads credentials from (server
    docs/user_guide/model_repository.md: tests/contracts/facts/kubernetes.json store_credentials), on the
    driver; the stores it cannot read (a directory on this host) are refused by deploy-snippets."""
    facts = load("kubernetes")["store_credentials"]
    readable = {driver.schemes[0]: driver for driver in stores.drivers() if driver.triton_scheme}
    assert set(readable) == set(facts["repository_prefix"])
    for scheme, driver in readable.items():
        assert f"{driver.triton_scheme}://" == facts["repository_prefix"][scheme]
        assert set(facts[scheme]) <= set(driver.triton_env), scheme
        # what the pods' Secret must hold names what tritonserver reads (or the file one of them points at)
        assert all(name in driver.secret_keys for name in facts[scheme])
    assert facts["az_url_form"].startswith(f"{readable['az'].triton_scheme}://account/")
    assert stores.DRIVERS["file"].triton_scheme is None


@pytest.mark.parametrize("entry", ["tritonbuild.cli", "tritonbuild.api"])
def test_every_entry_point_registers_the_stores_before_it_prints(entry):
    """The redactor sits below the stores (core/secrets.py): it learns their secret variables as
    core/stores.py registers them, which the CLI and the api import."""
    code = (
        f"import {entry}; from tritonbuild.core.secrets import redact; "
        "print(redact('denied for s3cr3t-value-1 and s3cr3t-value-2'))"
    )
    env = {"AWS_SECRET_ACCESS_KEY": "s3cr3t-value-1", "AZURE_STORAGE_KEY": "s3cr3t-value-2"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )
    assert done.stdout.strip() == "denied for *** and ***"


class MemDriver(Driver):
    """A store defined outside builder/: what a new store's driver declares, and nothing else."""

    name = "in-memory store"
    schemes = ("mem", "memory")
    triton_scheme = "tmem"
    triton_env = ("MEM_ACCESS_TOKEN", "MEM_REGION")
    secret_env = ("MEM_ACCESS_TOKEN",)
    secret_keys = "MEM_ACCESS_TOKEN, MEM_REGION"
    secret_files = (("MEM_KEY_FILE", "mem.key"),)
    secret_folder = "/var/run/secrets/tritonbuild-mem"


@pytest.fixture
def mem_store(monkeypatch):
    """MemDriver registered for this test only (as its one line in core/stores.py would)."""
    monkeypatch.setattr(stores, "DRIVERS", dict(stores.DRIVERS))
    monkeypatch.setattr(secrets, "STORE_SECRET_ENV", list(secrets.STORE_SECRET_ENV))
    monkeypatch.delenv("MEM_ACCESS_TOKEN", raising=False)

    def register():
        stores.register(MemDriver())

    return register


def test_a_new_store_is_passed_to_a_container_and_redacted(mem_store, tmp_path, monkeypatch):
    from tritonbuild.server.launcher import ContainerLauncher

    monkeypatch.setenv("MEM_ACCESS_TOKEN", "memtoken-s3cr3t")

    def argv():
        return ContainerLauncher("docker", "img").command(
            "tmem://bucket/repo", tmp_path, (1, 2, 3), [], gpus=False
        )

    # unregistered, nothing knows it: the broken seam this test would see
    assert "MEM_ACCESS_TOKEN" not in argv()
    assert "memtoken-s3cr3t" in secrets.redact("denied for memtoken-s3cr3t")
    mem_store()
    assert "MEM_ACCESS_TOKEN" in argv() and "memtoken-s3cr3t" not in " ".join(argv())
    assert secrets.redact("denied for memtoken-s3cr3t") == "denied for ***"
    assert stores.parse_location("memory://bucket/models").url == "memory://bucket/models"


def test_a_new_store_gets_its_secret_and_mount_in_deploy_snippets(
    cli, tmp_path, in_root, mem_store
):
    out = tmp_path / "deploy"
    args = ("deploy-snippets", "model_repository", "-o", out, "--json")
    r = cli(*args, "--target", "mem://bucket/models")
    assert r.exit_code == 2 and "unsupported target scheme 'mem'" in r.stdout
    mem_store()
    r = cli(*args, "--target", "mem://bucket/models")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["secret_keys"] == MemDriver.secret_keys
    deploy = {
        doc["kind"]: doc for doc in yaml.safe_load_all((out / "tritonserver.yaml").read_text())
    }["Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--model-repository=tmem://bucket/models" in container["args"]
    assert {
        "name": "MEM_KEY_FILE",
        "value": "/var/run/secrets/tritonbuild-mem/mem.key",
    } in container["env"]
    assert {
        "name": "store-credentials",
        "mountPath": MemDriver.secret_folder,
        "readOnly": True,
    } in container["volumeMounts"]
    assert {"name": "store-credentials", "secret": {"secretName": "tritonserver-store"}} in pod[
        "volumes"
    ]


# Registered before the CLI is imported, as core/stores.py registers its drivers
HELP = """
import json, sys
from click.testing import CliRunner
from tests.unit.core.test_store_seam import MemDriver
from tritonbuild.core import stores
if sys.argv[1] == "mem":
    stores.register(MemDriver())
from tritonbuild.cli import main
from tritonbuild.cli.config import KEYS
helps = {
    command: CliRunner().invoke(main, [command, "--help"], terminal_width=400).output
    for command in ("publish", "verify", "deploy-snippets", "build")
}
print(json.dumps({**helps, "config": KEYS["target"]}))
"""


def test_a_new_store_is_in_the_clis_help():
    def helps(registered: str) -> dict[str, str]:
        done = subprocess.run(
            [sys.executable, "-c", HELP, registered], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    before, after = helps("none"), helps("mem")
    # publish's and verify's TARGET, build's --cache-url, the config file's target: the stores tritonbuild
    # reads and writes; deploy-snippets --target: the ones tritonserver reads itself
    for command, text in before.items():
        assert "mem://" not in text, command
        assert "s3://" in text and "gs://" in text and "az://" in text, command
        assert "mem://" in after[command], command
