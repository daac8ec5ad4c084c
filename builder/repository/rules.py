"""Triton's load rules, checked offline on a model directory (core/src/model_config_utils.cc and friends)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format

from builder.repository.config import parse

# backend → (platform allowed with it, default model filename)
DEFAULTS = {"python": ("", "model.py"), "onnxruntime": ("onnxruntime_onnx", "model.onnx"),
            "pytorch": ("pytorch_libtorch", "model.pt"), "tensorrt": ("tensorrt_plan", "model.plan"),
            "vllm": ("", "model.json")}
VERSION_RE = re.compile(r"^[1-9][0-9]*$")


@dataclass(frozen=True)
class Finding:
    model: str
    check: str
    ok: bool
    detail: str

    def to_dict(self) -> dict:
        return {"model": self.model, "check": self.check, "ok": self.ok, "detail": self.detail}


def check_model_dir(model_dir: Path) -> list[Finding]:
    name = model_dir.name
    out: list[Finding] = []

    def add(check: str, problems: list[str], ok_detail: str) -> None:
        out.append(Finding(name, check, not problems, "; ".join(problems) if problems else ok_detail))

    cfg_path = model_dir / "config.pbtxt"
    try:
        mc = parse(cfg_path.read_bytes())
    except FileNotFoundError:
        add("config.parse", ["config.pbtxt is missing"], "")
        return out
    except (text_format.ParseError, UnicodeDecodeError) as e:
        add("config.parse", [f"config.pbtxt:{e} (not a valid inference.ModelConfig)"], "")
        return out
    add("config.parse", [], "config.pbtxt parses as inference.ModelConfig")

    add("name", [f"config name {mc.name!r} != directory name {name!r}"] if mc.name and mc.name != name else
        ([f"{name!r} contains '/' or is '..'"] if "/" in name or name in (".", "..") else []),
        f"directory name = model name = {name!r}")

    versions, bad = [], []
    for child in sorted(model_dir.iterdir()):
        if child.is_dir():
            if VERSION_RE.match(child.name):
                versions.append(int(child.name))
            elif child.name[:1].isdigit():
                bad.append(f"version directory {child.name!r} is not a plain number (Triton ignores a leading 0 "
                           f"and reads '2_old' as 2)")
    if not versions:
        bad.append("no numeric version directory: Triton reports 'no version is available'")
    pol = mc.version_policy
    if pol.WhichOneof("policy_choice") == "specific":
        missing = sorted(set(pol.specific.versions) - set(versions))
        if missing:
            bad.append(f"version_policy.specific names versions {missing} that are not present")
    add("versions", bad, f"versions {versions}")

    problems = []
    backend = mc.backend
    if backend not in DEFAULTS and not mc.platform:
        problems.append(f"unknown backend {backend!r} and no platform")
    elif backend in DEFAULTS:
        plat, default = DEFAULTS[backend]
        if mc.platform and mc.platform != plat:
            problems.append(f"platform {mc.platform!r} does not go with backend {backend!r}")
        filename = mc.default_model_filename or default
        for v in versions:
            if not (model_dir / str(v) / filename).exists():
                problems.append(f"{v}/{filename} is missing (the {backend} backend loads that file)")
    add("model_file", problems, f"{mc.default_model_filename or DEFAULTS.get(backend, ('', '?'))[1]} present "
        f"in every version")

    add("batching", _batching_problems(mc), "dynamic batching consistent with max_batch_size")
    add("io", _io_problems(mc), f"{len(mc.input)} inputs, {len(mc.output)} outputs well-formed")
    add("instances", _instance_problems(mc), "instance groups well-formed")
    return out


def _batching_problems(mc) -> list[str]:
    p = []
    if mc.max_batch_size < 0:
        p.append("max_batch_size must be >= 0")
    if mc.WhichOneof("scheduling_choice") == "dynamic_batching":
        db = mc.dynamic_batching
        if mc.max_batch_size == 0:
            p.append("dynamic_batching with max_batch_size 0")
        for s in db.preferred_batch_size:
            if s <= 0 or s > mc.max_batch_size:
                p.append(f"preferred_batch_size {s} not in [1, max_batch_size={mc.max_batch_size}]")
        if db.priority_levels and not 1 <= db.default_priority_level <= db.priority_levels:
            p.append("default_priority_level outside [1, priority_levels]")
        if db.preserve_ordering and db.priority_levels > 1:
            p.append("preserve_ordering with more than one priority level")
    return p


def _io_problems(mc) -> list[str]:
    p = []
    for kind, tensors in (("input", mc.input), ("output", mc.output)):
        names = [t.name for t in tensors]
        if len(set(names)) != len(names):
            p.append(f"duplicate {kind} names {names}")
        for t in tensors:
            if not t.name:
                p.append(f"an {kind} has no name")
            if t.data_type == 0:
                p.append(f"{kind} {t.name!r} has no data_type")
            if any(d == 0 or d < -1 for d in t.dims):
                p.append(f"{kind} {t.name!r} dims {list(t.dims)}: each must be >= 1 or -1")
            if mc.max_batch_size > 0 and not t.dims and not t.reshape.shape:
                p.append(f"{kind} {t.name!r} has empty dims with max_batch_size > 0")
    return p


def _instance_problems(mc) -> list[str]:
    p = []
    for i, g in enumerate(mc.instance_group):
        kind = type(g).Kind.Name(g.kind)
        if g.count < 1:
            p.append(f"instance_group[{i}] count {g.count} < 1")
        if kind in ("KIND_CPU", "KIND_MODEL") and len(g.gpus):
            p.append(f"instance_group[{i}] {kind} lists gpus {list(g.gpus)}")
        if g.profile and mc.platform != "tensorrt_plan":
            p.append(f"instance_group[{i}] profile is only allowed for tensorrt_plan")
    return p
