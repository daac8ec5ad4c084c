"""What the adopt tests of several backends share."""

from __future__ import annotations


def adopt_refused(cli, tmp_path, repo) -> str:
    """`adopt REPO` refused as a usage error (exit 2) with no traceback and nothing left in -o; its stderr."""
    out = tmp_path / "recipes"
    r = cli("adopt", repo, "-o", out, "--no-record")
    assert r.exit_code == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists() or not any(out.iterdir()), "a refusal leaves nothing behind"
    return r.stderr
