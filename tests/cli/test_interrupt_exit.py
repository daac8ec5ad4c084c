"""Ctrl-C ends tritonbuild with exit 130 at every moment the CLI controls, also once Python is already exiting
(a SIGINT then showed a KeyboardInterrupt traceback or killed the process by signal 2)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

# The command runs and finishes; a non-daemon thread, which Python joins while exiting, sends SIGINT once the
# main thread has stopped (Python's shutdown marks it stopped before joining the others) -- not after a fixed
# sleep, which a loaded machine outran: the signal then came during the command.
LATE = textwrap.dedent("""
    import os, signal, sys, threading, time
    from tritonbuild.__main__ import run
    def late():
        while threading.main_thread().is_alive():
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=late).start()
    sys.argv = ["tritonbuild", *sys.argv[1:]]
    run()
""")


def sigint_default() -> None:
    """The child gets Ctrl-C's default action even when the tests run with SIGINT ignored (a background job of a
    non-interactive shell inherits SIG_IGN, and tritonbuild rightly leaves an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_while_python_is_exiting_is_exit_130():
    r = subprocess.run(
        [sys.executable, "-c", LATE, "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=sigint_default,
    )
    assert "tritonbuild, version" in r.stdout
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "KeyboardInterrupt" not in r.stderr, r.stderr


def test_sigint_after_a_failed_command_is_exit_130_too():
    r = subprocess.run(
        [sys.executable, "-c", LATE, "validate", "/nonexistent/r.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=sigint_default,
    )
    assert r.returncode == 130 and "Traceback" not in r.stderr, (r.returncode, r.stderr)


def test_exit_codes_are_kept_without_an_interrupt(tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "tritonbuild", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and "tritonbuild, version" in ok.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "tritonbuild", "publish"], capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    bad = tmp_path / "r.yaml"
    bad.write_text("name: [unclosed\n")
    recipe = subprocess.run(
        [sys.executable, "-m", "tritonbuild", "validate", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert recipe.returncode == 3, (recipe.returncode, recipe.stderr)


# Ctrl-C while a command imports numpy (verify imports it on first use): numpy's __init__ turns the interrupt into
# ImportError("Error importing numpy ...") raised from it, which the CLI showed as an internal error, exit 1, with a
# traceback (seen in a clean clone's run: test_verify_interrupt's SIGINT landed in that import).
DURING_IMPORT = textwrap.dedent("""
    import sys
    import click
    from tritonbuild.cli import main
    from tritonbuild.cli.common import Group
    @click.command(name="imports")
    def imports():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise ImportError("Error importing numpy: you should not try to import numpy from its source") from e
    main.add_command(imports)
    sys.argv = ["tritonbuild", "imports"]
    main()
""")


def test_ctrl_c_turned_into_another_error_by_an_import_is_exit_130():
    r = subprocess.run(
        [sys.executable, "-c", DURING_IMPORT], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert (
        "interrupted" in r.stderr
        and "internal error" not in r.stderr
        and "Traceback" not in r.stderr
    ), r.stderr


# Ctrl-C caught by a library that reports it as its own error with no exception chain: pydantic-core building a
# model's serializer at import raised SchemaError("... KeyboardInterrupt: ") and the CLI showed an internal error,
# exit 1 (seen in a clean clone's run: test_verify_interrupt's SIGINT at 10 % of verify).
UNCHAINED = textwrap.dedent("""
    import os, signal, sys, time
    import click
    from tritonbuild.cli import main
    @click.command(name="swallows")
    def swallows():
        hit = False
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)
        except KeyboardInterrupt:
            hit = True
        if hit:  # raised outside the except block: no __context__ to follow
            raise RuntimeError("Error building `literal` serializer: KeyboardInterrupt")
    main.add_command(swallows)
    sys.argv = ["tritonbuild", "swallows"]
    from tritonbuild.__main__ import run
    run()
""")


def test_ctrl_c_reported_as_another_error_with_no_chain_is_exit_130():
    r = subprocess.run(
        [sys.executable, "-c", UNCHAINED],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=sigint_default,
    )
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "interrupted" in r.stderr and "internal error" not in r.stderr, r.stderr


def test_a_real_bug_is_still_an_internal_error():
    bug = DURING_IMPORT.replace("raise KeyboardInterrupt", "raise ValueError('a bug')").replace(
        "except KeyboardInterrupt", "except ValueError"
    )
    r = subprocess.run([sys.executable, "-c", bug], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "internal error" in r.stderr, (r.returncode, r.stderr)


# A command that is busy when someone sends it SIGUSR1 (here: itself, from within the command)
BUSY = textwrap.dedent("""
    import os, signal, sys, time
    import tritonbuild.cli
    def busy_command():
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.5)
    tritonbuild.cli.main = busy_command
    from tritonbuild.__main__ import run
    run()
""")


def test_sigusr1_prints_every_threads_stack_and_the_command_goes_on():
    """`kill -USR1 PID` on a tritonbuild that hangs shows where (tests/serving.stop_serve uses it on a serve that
    did not stop); before, SIGUSR1's default action killed the process."""
    r = subprocess.run([sys.executable, "-c", BUSY], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert "most recent call first" in r.stderr and "in busy_command" in r.stderr, r.stderr


def test_a_ctrl_c_python_could_not_raise_is_raised_again_not_printed(capsys, monkeypatch):
    """A Ctrl-C landing in a weakref callback of an import's module lock: Python printed "Exception ignored ...
    Traceback ... KeyboardInterrupt" and went on, the command running to its end (CI, test_verify_interrupt).
    The CLI's unraisable hook prints nothing and sends SIGINT again, for the handler to raise where it can;
    any other unraisable error keeps Python's own report."""
    import gc

    from tritonbuild.__main__ import _unraisable

    class Raises:
        def __init__(self, error):
            self.error = error

        def __del__(self):
            raise self.error

    got = []
    monkeypatch.setattr(sys, "unraisablehook", _unraisable)
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        Raises(
            KeyboardInterrupt()
        )  # dropped at once: its __del__ raises where Python cannot propagate
        gc.collect()
        assert got == [signal.SIGINT]
        assert capsys.readouterr().err == ""
        Raises(ValueError("a __del__ failed"))
        gc.collect()
        assert got == [signal.SIGINT]
        assert "a __del__ failed" in capsys.readouterr().err
    finally:
        signal.signal(signal.SIGINT, previous)
