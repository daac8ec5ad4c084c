"""benchmarks/vllm/inductor_bits.py reads the configs Inductor kept where torch writes them: beside the kernel's
source, named by a hash (torch 2.13 torch/_inductor/runtime/autotune_cache.py 131-132, 155-166:
`os.path.join(os.path.dirname(filename), f"{hash}.best_config")`), not after the kernel. The first GPU run read
`<kernel>.best_config` and recorded null for every kernel."""

from __future__ import annotations

import json

from benchmarks.vllm import inductor_bits

KERNEL = "import triton\n@triton.jit\ndef k():\n    pass\nx = persistent_reduction(\n"


def test_the_kept_config_is_read_from_the_kernels_folder_under_torchs_hashed_name(tmp_path):
    tuned, untimed = tmp_path / "ab", tmp_path / "cd"
    tuned.mkdir()
    untimed.mkdir()
    (tuned / "cabc123.py").write_text(KERNEL)
    kept = {
        "XBLOCK": 1,
        "R0_BLOCK": 1024,
        "num_warps": 8,
        "num_stages": 1,
        "found_by_coordesc": True,
    }
    (tuned / "5f0e9d.best_config").write_text(json.dumps(kept))
    (untimed / "ccde456.py").write_text(KERNEL.replace("persistent_reduction", "reduction"))
    (tmp_path / "not_a_kernel.py").write_text("x = 1\n")
    rows = {row["kernel"]: row for row in inductor_bits.kernels(tmp_path)}
    assert set(rows) == {"cabc123", "ccde456"}
    assert rows["cabc123"]["kept_configs"] == [kept]
    assert rows["cabc123"]["heuristic"] == "persistent_reduction"
    assert rows["cabc123"]["kernels_in_folder"] == 1
    assert rows["ccde456"]["kept_configs"] == []
    assert rows["ccde456"]["heuristic"] == "reduction"
