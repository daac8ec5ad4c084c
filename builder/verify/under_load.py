"""A generative model's answers under load (no batch dimension: its runtime batches the requests in
flight): each golden request sent again amid others, compared bit for bit with its answer alone."""

from __future__ import annotations

from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.verify.goldens import mismatches, past_tolerance
from tritonbuild.verify.models import Mismatch

# a generative model's check under load: at most this many requests in flight by default
DEFAULT_CONCURRENCY = 64


def load_settings(model: ManifestModel) -> tuple[int, int]:
    """(others, repeats) of a generative model's check under load: verify.under_load, else its max
    concurrent sequences (vLLM's max_num_seqs) less one, at most DEFAULT_CONCURRENCY - 1, and 3
    rounds."""
    spec = model.verify.under_load
    engine = (model.llm or {}).get("engine_args") or {}
    others = (
        spec.others
        if spec is not None and spec.others is not None
        else min(int(engine.get("max_num_seqs") or DEFAULT_CONCURRENCY), DEFAULT_CONCURRENCY) - 1
    )
    return max(1, others), spec.repeats if spec is not None else 3


def answers_under_load(
    model: ManifestModel, runner, inputs, alone
) -> tuple[str, str, list[Mismatch], dict | None]:
    """Each input sent amid `others` concurrent requests, `repeats` times, its answer compared bit
    for bit with its answer alone; what differed is told per token (ids, or only log-probs; first
    position) where the answer carries log-probs."""
    if model.verify.batch_invariance == "skip":
        return "skipped", "batch_invariance: skip", [], None
    others, repeats = load_settings(model)
    found: list[Mismatch] = []
    summary = {
        "others": others,
        "repeats": repeats,
        "answers": 0,
        "differing": 0,
        "ids_differing": 0,
        "logprobs_only_differing": 0,
        "first_differing_position": None,
        "max_logprob_diff": 0.0,
    }
    for rep in range(repeats):
        for i, sample in enumerate(inputs):
            got = runner.infer_amid(sample, others)
            summary["answers"] += 1
            context = f"amid {others} concurrent requests, round {rep + 1}"
            here = _differences(model, alone[i], got, i, context)
            if here:
                found += here
                summary["differing"] += 1
                _count_tokens(summary, alone[i], got)
    where = f"amid {others} concurrent requests ({repeats} round(s) x {len(inputs)} request(s))"
    paths_found, paths_line = _paths(model, runner, inputs, others, summary)
    if not found and not paths_found:
        return "invariant", f"bit-identical alone and {where}{paths_line}", [], summary
    detail = _variant_detail(summary, found, where) if found else f"golden requests {where}: ok"
    return "variant", detail + paths_line, found + paths_found, summary


def _paths(model: ManifestModel, runner, inputs, others: int, summary: dict):
    """The traffic paths (verify/traffic.py) where the model takes a prompt and sampling
    parameters: into summary["paths"]; the required paths' mismatches, and a line for the detail."""
    from tritonbuild.verify import traffic

    template = next((s for s in inputs if "sampling_parameters" in s and "text_input" in s), None)
    if template is None or not hasattr(runner, "infer_concurrent"):
        return [], ""
    paths = traffic.Paths(
        model,
        runner,
        template,
        others,
        lambda alone, got, i, context: _differences(model, alone, got, i, context),
    ).run()
    summary["paths"] = [path.to_dict() for path in paths]
    found = [mismatch for path in paths if path.required for mismatch in path.mismatches]
    return found, f"; paths: {traffic.summary(paths)}"


def _differences(model: ManifestModel, alone: dict, got: dict, sample: int, context: str):
    """The outputs of one answer under load that differ from its answer alone (past tolerance)."""
    tolerance = model.verify.tolerance
    return past_tolerance(
        mismatches(alone, got, sample=sample, context=context, tolerance=tolerance)
    )


def _count_tokens(summary: dict, alone: dict, got: dict) -> None:
    """Into summary: whether token ids or only log-probs differ, the first position, the largest
    log-prob difference (answers that carry tokens)."""
    from tritonbuild.verify.generate import token_difference

    tokens = token_difference(alone, got)
    if tokens is None:
        return
    summary["ids_differing" if tokens["ids_differ"] else "logprobs_only_differing"] += 1
    first = [
        p for p in (summary["first_differing_position"], tokens["first_position"]) if p is not None
    ]
    summary["first_differing_position"] = min(first) if first else None
    summary["max_logprob_diff"] = max(summary["max_logprob_diff"], tokens["max_logprob_diff"])


def _variant_detail(summary: dict, found: list[Mismatch], where: str) -> str:
    what = (
        f"token ids differ in {summary['ids_differing']}, only log-probs in "
        f"{summary['logprobs_only_differing']}"
        if summary["ids_differing"] or summary["logprobs_only_differing"]
        else f"outputs {sorted({mismatch.output for mismatch in found})}"
    )
    first = summary["first_differing_position"]
    return (
        f"{summary['differing']} of {summary['answers']} answers {where} differ from the answer "
        f"alone: {what}"
        + (
            f"; first at generated token {first}, max |log-prob diff| "
            f"{summary['max_logprob_diff']:.3g}"
            if first is not None
            else ""
        )
    )
