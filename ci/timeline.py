"""Where the full run's time went, from TRITONBUILD_TEST_TIMELINE's lines (tests/conftest.py):

    TRITONBUILD_TEST_TIMELINE=/tmp/t.jsonl .ci/run; python3 ci/timeline.py /tmp/t.jsonl

prints the wall time of the test phase, each worker's busy seconds and when it ran out of work, the modules by
seconds (xdist's loadscope keeps a module on one worker, so the longest module is a floor under the run) and what
each worker ran last."""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def say(text: str) -> None:
    sys.stdout.write(text + "\n")


def main(path: str) -> None:
    with open(path) as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    t0 = min(r["start"] for r in rows)
    t1 = max(r["end"] for r in rows)
    cpu = sum(r.get("cpu", 0) for r in rows)
    say(
        f"tests: {len(rows)}, wall {t1 - t0:.0f} s, summed {sum(r['end'] - r['start'] for r in rows):.0f} s,"
        f" CPU {cpu:.0f} s (the tests and the processes they waited for)"
    )
    by_worker = defaultdict(list)
    for row in rows:
        by_worker[row["worker"]].append(row)
    for worker, runs in sorted(by_worker.items()):
        busy = sum(r["end"] - r["start"] for r in runs)
        last = max(runs, key=lambda r: r["end"])
        say(
            f"  {worker}: busy {busy:.0f} s, done at {last['end'] - t0:.0f} s, last {last['test']}"
            f" ({last['end'] - last['start']:.0f} s)"
        )
    modules = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        module = modules[row["test"].split("::")[0]]
        module[0] += row["end"] - row["start"]
        module[1] += row.get("cpu", 0)
    say("modules by CPU seconds (and wall):")
    for name, (seconds, used) in sorted(modules.items(), key=lambda kv: -kv[1][1])[:30]:
        say(f"  {used:7.0f} s CPU {seconds:7.0f} s wall  {name}")
    say("tests by CPU seconds:")
    for row in sorted(rows, key=lambda r: -r.get("cpu", 0))[:30]:
        say(
            f"  {row.get('cpu', 0):7.0f} s CPU {row['end'] - row['start']:7.0f} s wall  {row['test']}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
