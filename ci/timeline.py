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
    say(
        f"tests: {len(rows)}, wall {t1 - t0:.0f} s, summed {sum(r['end'] - r['start'] for r in rows):.0f} s"
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
    modules = defaultdict(float)
    for row in rows:
        modules[row["test"].split("::")[0]] += row["end"] - row["start"]
    say("modules by seconds:")
    for module, seconds in sorted(modules.items(), key=lambda kv: -kv[1])[:25]:
        say(f"  {seconds:7.0f} s  {module}")


if __name__ == "__main__":
    main(sys.argv[1])
