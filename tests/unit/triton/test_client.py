"""triton/client.py's http_module: Ctrl-C while gevent's hub runs (tritonclient.http's event loop, geventhttpclient)
reaches the main greenlet as KeyboardInterrupt without the hub printing a traceback first. Against gevent itself: its
Hub.handle_error prints errors not in NOT_ERROR and throws SYSTEM_ERROR ones to the main greenlet."""

from __future__ import annotations

import io

import pytest


def test_a_ctrl_c_in_the_hub_is_thrown_to_the_main_greenlet_without_a_traceback(monkeypatch):
    gevent = pytest.importorskip("gevent")
    from gevent.hub import Hub

    # gevent's own NOT_ERROR, on the class and on this thread's hub where its resolver copied it (an earlier
    # http_module() in this process added KeyboardInterrupt to both); restored after the test
    hub = gevent.get_hub()  # this thread's hub (a second one would share, and break, its loop)
    for holder in (Hub, hub):
        plain = tuple(t for t in holder.NOT_ERROR if t is not KeyboardInterrupt)
        monkeypatch.setattr(holder, "NOT_ERROR", plain)
    stream, thrown = io.StringIO(), []
    monkeypatch.setattr(hub, "exception_stream", stream)
    monkeypatch.setattr(hub, "handle_system_error", lambda *exc: thrown.append(exc[0]))
    # gevent as it is: the hub prints a KeyboardInterrupt (traceback and its timestamp), then throws it
    hub.handle_error(None, KeyboardInterrupt, KeyboardInterrupt(), None)
    assert "KeyboardInterrupt" in stream.getvalue() and thrown == [KeyboardInterrupt]

    from tritonbuild.triton.client import http_module

    assert http_module().InferenceServerClient is not None
    http_module()  # once: KeyboardInterrupt is added to NOT_ERROR one time
    assert Hub.NOT_ERROR.count(KeyboardInterrupt) == hub.NOT_ERROR.count(KeyboardInterrupt) == 1
    stream.truncate(0), stream.seek(0), thrown.clear()
    hub.handle_error(None, KeyboardInterrupt, KeyboardInterrupt(), None)
    assert stream.getvalue() == "" and thrown == [KeyboardInterrupt]
    # a real error in the hub is still printed
    hub.handle_error("a callback", ValueError, ValueError("boom"), None)
    assert "ValueError: boom" in stream.getvalue()
