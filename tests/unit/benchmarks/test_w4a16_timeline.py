"""benchmarks/vllm/w4a16_timeline.py and its kernel variant (variants/timeline.patch): the patch applies to the
committed kernel, the variant computes the committed kernel's bits with its timeline off (Triton's interpreter,
which runs no PTX: the timer reads are GPU-only), and a call's programs' timestamps read as the durations the
script reports. The GPU run itself: benchmarks/vllm/variants/README.md."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from benchmarks.vllm import w4a16_timeline as timeline
from tests.conftest import ROOT

KERNEL = ROOT / "builder" / "backends" / "vllm" / "invariant" / "w4a16.py"
PATCH = ROOT / "benchmarks" / "vllm" / "variants" / "timeline.patch"

SAME_BITS = """
import sys, torch
sys.path.insert(0, sys.argv[2])
from benchmarks.vllm import w4a16_bench as bench
from pathlib import Path
committed = bench.load_plugin(bench.PLUGIN, "committed")
variant = bench.load_plugin(Path(sys.argv[1]), "variant")
assert variant.TIMES["buf"] is None
gen = torch.Generator().manual_seed(0)
n, k, group = 96, 256, 128
words = torch.randint(-(2**31), 2**31 - 1, (n, k // 8), generator=gen, dtype=torch.int32)
scale = (torch.rand((n, k // group), generator=gen) * 0.01).half()
for m in (1, 5):
    x = torch.randn((m, k), generator=gen).half()
    a = committed.w4a16_matmul(x, *committed.prepare_weights(words, scale, group), group)
    b = variant.w4a16_matmul(x, *variant.prepare_weights(words, scale, group), group)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16)), m
print("same bits")
"""


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    if shutil.which("patch") is None:
        pytest.skip("no patch command here")
    path = tmp_path_factory.mktemp("timeline") / "variant.py"
    shutil.copy(KERNEL, path)
    done = subprocess.run(["patch", "-s", str(path), str(PATCH)], capture_output=True, text=True)
    assert done.returncode == 0, f"timeline.patch no longer applies: {done.stdout}{done.stderr}"
    return path


def test_the_variant_with_its_timeline_off_computes_the_committed_kernels_bits(variant):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SAME_BITS, str(variant), str(ROOT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "same bits" in done.stdout, done.stderr[-3000:]


def _program(sched, start, loop, end, sm):
    return [sched, start, loop, end, sm]


def test_a_calls_timestamps_become_its_durations_and_the_split_tiles_last_finish():
    # two output tiles, split 2: programs (tile 0: 0, 1), (tile 1: 2, 3); ns
    values = [
        *_program(1000, 1500, 4500, 5000, 0),
        *_program(1100, 1600, 4600, 6000, 1),  # tile 0's last: finish 1,400 ns
        *_program(1200, 1700, 4700, 5200, 0),
        *_program(1300, 1800, 4800, 7000, 2),  # tile 1's last: finish 2,200 ns
    ]
    call = timeline.per_call(values, 4, 2)
    assert call["span_us"] == pytest.approx(6.0)  # 1,000 .. 7,000
    assert call["wait_us"] == pytest.approx(0.5)
    assert call["loop_us"] == pytest.approx(3.0) and call["loop_max_us"] == pytest.approx(3.0)
    assert call["finish_tile_last_us"] == pytest.approx(1.8)  # median of 1.4 and 2.2
    assert call["start_spread_us"] == pytest.approx(0.3)
    assert (call["sms_used"], call["max_programs_per_sm"]) == (3, 2)
    assert call["tick_ns"] == 100


def test_the_gap_to_the_next_call_is_taken_within_a_replay_only():
    def call(first, last):
        return {
            "first_sched": first,
            "last_end": last,
            "span_us": (last - first) / 1e3,
            "programs": 4,
        }

    replays = [
        [
            call(0, 5000),
            call(4000, 9000),
        ],  # the next call scheduled 1 µs before this one ended (PDL)
        [
            call(100000, 105000),
            call(106000, 110000),
        ],  # 1 µs after; the 91 µs between replays is no gap
    ]
    got = timeline.summarize(replays)
    assert got["gap_to_next_us"] == pytest.approx(0.0)  # median of -1 and +1
    assert got["replays"] == 2 and got["span_us"] == pytest.approx(5.0)
