"""EmbeddedServer's own logic that needs no running server."""

from __future__ import annotations

from tritonbuild.server.embedded import EmbeddedServer

# tritonserver 2.51's answer to an option it does not know: the reason, then 80-odd lines of usage
REFUSED = (
    "/opt/tritonserver/bin/tritonserver: unrecognized option '--bogus-flag'\nUsage: tritonserver [options]\n"
    + "".join(f"  --option-{i} <string>\n\tWhat it does.\n" for i in range(60))
)


def test_a_refused_command_line_shows_its_reason_not_the_usage_tail(tmp_path):
    server = object.__new__(EmbeddedServer)
    server._log_path = tmp_path / "tritonserver.log"
    server.log_path.write_text(REFUSED)
    tail = server.log_tail()
    assert tail.splitlines()[0].endswith("unrecognized option '--bogus-flag'")
    assert "--option-59" not in tail and "usage text" in tail
    server.log_path.write_text("".join(f"line {i}\n" for i in range(100)))
    assert server.log_tail().splitlines() == [f"line {i}" for i in range(70, 100)]
