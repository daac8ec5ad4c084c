"""Where the full run's time went, from TRITONBUILD_TEST_TIMELINE's lines (tests/conftest.py):

    TRITONBUILD_TEST_TIMELINE=/tmp/t.jsonl .ci/run; python3 ci/timeline.py /tmp/t.jsonl

prints the wall time of the test phase, each worker's busy seconds and when it ran out of work, the modules by
seconds (xdist's loadscope keeps a module on one worker, so the longest module is a floor under the run) and what
each worker ran last. With BSD process accounting (GNU acct's accton and dump-acct, root):

    touch /tmp/pacct && accton /tmp/pacct; TRITONBUILD_TEST_TIMELINE=/tmp/t.jsonl .ci/run; accton off
    python3 ci/timeline.py /tmp/t.jsonl --acct /tmp/pacct

it also charges every process a test started (a worker's child, with all its descendants: tritonserver and its
stubs, a CLI run, an interpreter reading a fingerprint) to that test, by command: what a test's own CPU figure
misses when a process outlives the test or is never waited for, and which kind of process costs the most.

    python3 ci/timeline.py /tmp/t.jsonl --weights tests/scope_weights.json

writes each xdist scope's busy seconds (a module, or a class for its methods: what --dist loadscope hands a worker
at a time) of at least MIN_WEIGHT_S, which tests/conftest.py reads to start the heaviest scopes first."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime

MIN_WEIGHT_S = 10


def scope(test: str) -> str:
    """xdist loadscope's unit for a test id: its module, or module::Class for a method."""
    parts = test.split("::")
    return "::".join(parts[:2]) if len(parts) > 2 else parts[0]


def weights(rows: list[dict], source: str) -> dict:
    busy = Counter()
    for row in rows:
        busy[scope(row["test"])] += row["end"] - row["start"]
    return {
        "measured": source,
        "seconds": {k: round(v) for k, v in sorted(busy.items()) if v >= MIN_WEIGHT_S},
    }


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


def processes(path: str) -> list[dict]:
    """Every process accounting recorded: command, CPU seconds, pid, parent pid, start and end (epoch seconds), from
    dump-acct's lines (fields: command, version, user and system time and elapsed time in centiseconds, uid, gid,
    memory, io, pid, ppid, ..., start in whole seconds)."""
    text = subprocess.run(["dump-acct", path], capture_output=True, text=True, check=True).stdout
    found = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) < 12:
            continue
        started = datetime.strptime(fields[-1], "%a %b %d %H:%M:%S %Y").timestamp()
        found.append(
            {
                "comm": fields[0],
                "cpu": (float(fields[2]) + float(fields[3])) / 100,
                "pid": int(fields[9]),
                "ppid": int(fields[10]),
                "start": started,
                "end": started + 1 + float(fields[4]) / 100,
            }
        )
    return found


def _children(procs: list[dict]) -> dict[int, list[int]]:
    """Each record's children, by index: a pid is reused within a run, so a child's parent is the record of its
    parent pid that was alive when the child started."""
    by_pid = defaultdict(list)
    for index, proc in enumerate(procs):
        by_pid[proc["pid"]].append(index)
    kids = defaultdict(list)
    for index, proc in enumerate(procs):
        alive = [
            i
            for i in by_pid.get(proc["ppid"], [])
            if procs[i]["start"] <= proc["start"] <= procs[i]["end"]
        ]
        if alive:
            kids[max(alive, key=lambda i: procs[i]["start"])].append(index)
    return kids


def charge(rows: list[dict], procs: list[dict]) -> None:
    """Each worker's child process (and its descendants) charged to the test that ran when it started."""
    kids = _children(procs)

    def tree_cpu(index: int) -> float:
        return procs[index]["cpu"] + sum(tree_cpu(kid) for kid in kids.get(index, []))

    by_worker = defaultdict(list)
    for row in rows:
        by_worker[row.get("pid")].append(row)
    workers = {
        pid: index for index, proc in enumerate(procs) for pid in by_worker if proc["pid"] == pid
    }
    tests, commands = defaultdict(Counter), Counter()
    for worker, runs in by_worker.items():
        for kid in kids.get(workers.get(worker, -1), []):
            at = procs[kid]["start"]  # whole seconds: started in [at, at + 1)
            row = max(
                (r for r in runs if r["start"] - 1 < at), key=lambda r: r["start"], default=None
            )
            name = row["test"] if row and at <= row["end"] else "(between tests)"
            tests[name][procs[kid]["comm"]] += tree_cpu(kid)
            commands[procs[kid]["comm"]] += tree_cpu(kid)
    say(f"processes the tests started: {sum(commands.values()):.0f} CPU seconds, by command:")
    for comm, used in commands.most_common(12):
        say(f"  {used:7.0f} s  {comm}")
    say("tests by the CPU of the processes they started:")
    for name, used in sorted(tests.items(), key=lambda kv: -sum(kv[1].values()))[:30]:
        parts = ", ".join(f"{comm} {cpu:.0f}" for comm, cpu in used.most_common(3))
        say(f"  {sum(used.values()):7.0f} s  {name}  ({parts})")


if __name__ == "__main__":
    if "--weights" in sys.argv:
        with open(sys.argv[1]) as lines:
            timeline = [json.loads(line) for line in lines if line.strip()]
        out = sys.argv[sys.argv.index("--weights") + 1]
        with open(out, "w") as f:
            json.dump(weights(timeline, sys.argv[1]), f, indent=1)
            f.write("\n")
        sys.exit(0)
    main(sys.argv[1])
    if "--acct" in sys.argv:
        with open(sys.argv[1]) as lines:
            timeline = [json.loads(line) for line in lines if line.strip()]
        charge(timeline, processes(sys.argv[sys.argv.index("--acct") + 1]))
