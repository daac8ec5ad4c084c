"""Triton's metrics text read with prometheus_client's parser (issue 43, item 7: a maintained library where it does
the job as well): the per-model counters summed over versions, as the hand-written regex read them — and a model
whose name holds a quote or a backslash, which Prometheus escapes in the label and the regex cut short (it read
'a\\' for the model 'a"b')."""

from __future__ import annotations

from tritonbuild.server.status import counters_by_model

TEXT = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="adder",version="1"} 12
nv_inference_request_success{model="adder",version="2"} 3
nv_inference_request_success{model="a\\"b",version="1"} 2
nv_inference_request_success{model="c\\\\d",version="1"} 1
# HELP nv_inference_count Number of inferences performed (does not include cached requests)
# TYPE nv_inference_count counter
nv_inference_count{model="adder",version="1"} 40
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-1"} 0.5
"""


def test_counters_sum_over_versions_and_skip_other_metrics():
    got = counters_by_model(TEXT)
    assert got["adder"] == {"nv_inference_request_success": 15.0, "nv_inference_count": 40.0}
    assert "GPU-1" not in str(got)


def test_an_escaped_model_name_is_read_whole():
    got = counters_by_model(TEXT)
    assert got['a"b'] == {"nv_inference_request_success": 2.0}
    assert got["c\\d"] == {"nv_inference_request_success": 1.0}
