"""tritonbuild's batch-invariant W4A16 linear for vLLM: a vLLM general plugin (entry point group
`vllm.general_plugins`) that, when vLLM runs in batch-invariant mode (VLLM_BATCH_INVARIANT=1), makes
the compressed-tensors INT4 weight-only layers compute every row the same way whatever else is in
the batch.

Why: in batch-invariant mode vLLM 0.22 keeps its unquantized linears, attention, norms and
log-softmax invariant, but a W4A16 layer still goes to the mixed-precision kernel vLLM picks
(Machete on Hopper), whose tiling and split-K depend on the number of rows: an INT4 model's answers
then change with the batch (docs/runs, FACTS round 4).

The kernel is w4a16.py's (tiles fixed per layer shape, the K loop and the split of K in one fixed
order): here it becomes a vLLM mixed-precision kernel, first among the CUDA W4A16 kernels, whose
weights are rearranged once at load (w4a16.planes_order) into the order the kernel reads. In that
mode vLLM's unquantized linears go to linear16.py's fp16/bf16 linear. The files go into the serving
environment as one package, this one its __init__ (wheel.py); none imports tritonbuild.
"""

import logging

from . import w4a16

PLUGIN_NAME = "tritonbuild_invariant_w4a16"
KERNEL_NAME = "TritonbuildInvariantW4A16Kernel"

# NOTE: a child of vLLM's "vllm" logger, the one vLLM configures (vllm 0.22.0 vllm/logger.py
# DEFAULT_LOGGING_CONFIG: a handler on "vllm" only); under this module's own name nothing is printed
_log = logging.getLogger("vllm.tritonbuild_invariant")


def _custom_op():
    """The kernel as a torch custom op: one opaque call to vLLM's torch.compile (fake: shapes)."""
    import torch

    @torch.library.custom_op("tritonbuild::w4a16_invariant", mutates_args=())
    def op(
        x: torch.Tensor, weight_packed: torch.Tensor, weight_scale: torch.Tensor, group: int
    ) -> torch.Tensor:
        return w4a16.w4a16_matmul(x, weight_packed, weight_scale, group)

    @op.register_fake
    def _(x, weight_packed, weight_scale, group):
        return x.new_empty((x.shape[0], weight_packed.shape[0]))

    return op


def _kernel_class():
    import torch
    from vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel import MPLinearKernel
    from vllm.model_executor.parameter import permute_param_layout_
    from vllm.scalar_type import scalar_types

    op = _custom_op()

    class TritonbuildInvariantW4A16Kernel(MPLinearKernel):
        @classmethod
        def get_min_capability(cls) -> int:
            return 80

        @classmethod
        def can_implement(cls, c) -> tuple[bool, str | None]:
            k, _n = c.partition_weight_shape
            group = c.group_size if c.group_size != -1 else k
            problems = [
                c.weight_type != scalar_types.uint4b8
                and f"weight type {c.weight_type} (needs symmetric uint4b8)",
                c.zero_points and "zero points (asymmetric)",
                c.has_g_idx and "activation reordering (g_idx)",
                c.act_type not in (torch.float16, torch.bfloat16) and f"activations {c.act_type}",
                w4a16.supported(k, group),
            ]
            problems = [p for p in problems if p]
            return (not problems, "; ".join(problems) or None)

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            # [N, K/8] words and [N, K/G] scales, then as the kernel reads them (prepare_weights)
            def as_read(param):
                words = param.dtype == torch.int32
                permute_param_layout_(
                    param, input_dim=1, output_dim=0, **({"packed_dim": 1} if words else {})
                )
                param.data = (
                    w4a16.planes_order(param.data) if words else param.data.t().contiguous()
                )
                return param

            self._transform_param(layer, self.w_q_name, as_read)
            self._transform_param(layer, self.w_s_name, as_read)

        def apply_weights(self, layer, x, bias=None):
            c = self.config
            k = c.partition_weight_shape[0]
            w_q, w_s, _, _ = self._get_weight_params(layer)
            y = op(x.reshape(-1, x.shape[-1]), w_q, w_s, c.group_size if c.group_size != -1 else k)
            y = y if bias is None else y + bias
            return y.reshape(*x.shape[:-1], c.partition_weight_shape[1])

    return TritonbuildInvariantW4A16Kernel


def register() -> None:
    """vLLM's general-plugin hook (every vLLM process calls it at start): in batch-invariant mode,
    linear16's linear, sampling's filter, this kernel first among the CUDA W4A16 kernels; else nothing."""
    import vllm.envs as envs

    if not envs.VLLM_BATCH_INVARIANT:  # vLLM's own parse of it: both agree on the mode
        return
    from . import linear16, sampling  # beside it in its package (the wheel's or tritonbuild's)

    linear16.install()
    sampling.install()
    from vllm.model_executor.kernels.linear import _POSSIBLE_KERNELS
    from vllm.platforms import PlatformEnum

    kernels = _POSSIBLE_KERNELS.setdefault(PlatformEnum.CUDA, [])
    if not any(k.__name__ == KERNEL_NAME for k in kernels):
        kernels.insert(0, _kernel_class())
        _log.info(
            "tritonbuild: %s first among the W4A16 kernels (VLLM_BATCH_INVARIANT)", KERNEL_NAME
        )
