"""On Python 3.13 the embedded server cannot exist (its stub needs numpy < 2: no cp313 wheel); the error says
so at the point of failure, with the way out."""
import importlib.util
import sys

import pytest

from tritonbuild.server import embedded


def test_missing_embedded_server_on_313_says_why_and_the_way_out(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 13, 0, "final", 0))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(embedded.ServerStartError) as e:
        embedded._check_numpy()  # the server check comes before numpy's: numpy 2 is expected on 3.13
    assert "Python 3.13" in e.value.message and "numpy < 2" in e.value.message
    assert "--server URL" in e.value.hint and "3.10-3.12" in e.value.hint


def test_missing_embedded_server_elsewhere_names_the_extra(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(embedded.ServerStartError) as e:
        embedded.pytriton_dir()
    assert "tritonbuild[embedded]" in e.value.hint
