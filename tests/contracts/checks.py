"""What `--check` (drift.py) re-derives: one Check per recorded fact that has an extractor, built from the fact's own
source (repository, commit, path), and the vLLM wheels' AsyncEngineArgs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.contracts import refresh, vllm_lora_wheel, vllm_spec_wheel, vllm_wheels
from tests.contracts.drift import Check, read_wheel, sha256_file
from tests.contracts.facts import load, vllm_versions
from tests.contracts.image_pythons import matrix_pythons, qa_python

IBL = "all_models/inflight_batcher_llm"


def _strip_lines(rows: dict) -> dict:
    return {t: {k: v for k, v in r.items() if k != "line"} for t, r in rows.items()}


def _images(text: str) -> dict:
    table, oldest = refresh.compatibility(text), min(load("triton_images")["images"])
    return {
        "images": _strip_lines(
            {t: r for t, r in table["trtllm-python-py3"].items() if t >= oldest}
        ),
        "vllm_images": _strip_lines(
            {t: r for t, r in table["vllm-python-py3"].items() if t >= oldest}
        ),
    }


def _recorded_images() -> dict:
    facts = load("triton_images")
    return {
        "images": _strip_lines(facts["images"]),
        "vllm_images": _strip_lines(facts["vllm_images"]),
    }


def _genai_perf_inputs(text: str) -> list[str]:
    body = text[text.index("class TensorRTLLMConverter") :]
    return sorted(
        set(re.findall(r'payload\["(\w+)"\]', body))
        | set(re.findall(r'"(\w+)": \[', body)) - {"data"}
    )


def _recorded_genai_perf() -> list[str]:
    g = load("clients")["genai_perf"]
    return sorted({n for kind in ("default", "streaming", "deterministic") for n in g[kind]})


def _openai_trtllm_inputs(text: str) -> list[str]:
    body = text[text.index("def _create_trtllm_generate_request") :]
    body = body[: body.index("\ndef ", 1)]
    names = set(re.findall(r'inputs\["(\w+)"\]', body))
    return sorted(
        names | ({"exclude_input_in_output"} if "inputs[echo_tensor_name]" in body else set())
    )


def _recorded_openai() -> list[str]:
    o = load("clients")["openai_frontend"]
    return sorted(set(o["always"]) | set(o["optional"]))


def _openai_vllm_inputs(text: str) -> list[str]:
    body = text[text.index("def _create_vllm_generate_request") :]
    body = body[: body.index("\ndef ", 1)]
    names = set(re.findall(r'inputs\["(\w+)"\]', body))
    return sorted(
        names | ({"exclude_input_in_output"} if "inputs[echo_tensor_name]" in body else set())
    )


def _usage(text: str) -> dict:
    """The outputs the OpenAI frontend counts usage from, and the dtypes it reads them as."""
    body = text[text.index("def _get_usage_from_response") :]
    body = body[: body.index("\ndef ", 1)]
    return {
        "outputs": sorted(set(re.findall(r'"(\w+)" in response\.outputs', body))),
        "dtypes": sorted({f"TYPE_{t}" for t in re.findall(r"tritonserver\.DataType\.(\w+)", body)}),
    }


def _echo_names(text: str) -> list[str]:
    """The model inputs the OpenAI frontend sends echo to (the first of them the model declares)."""
    body = text[text.index("echo_tensor_name = None") :]
    names = re.search(r"in \[([^\]]*)\]", body[: body.index("break")])
    return re.findall(r'"(\w+)"', names.group(1)) if names else []


def _vllm_lora(text: str) -> dict:
    """What vllm_backend reads to turn LoRA on: the model.json key, and the table's file name beside it."""
    table = re.search(r'^_MULTI_LORA_ARGS_FILENAME = "([^"]+)"', text, re.M)
    key = re.search(r'str\(self\.vllm_engine_config\["(\w+)"\]\)\.lower\(\) == "true"', text)
    return {"enable_key": key.group(1) if key else None, "table": table.group(1) if table else None}


def _cpp_unguarded(*texts: str) -> dict:
    return {"unguarded": sorted({k for t in texts for k in refresh.cpp_parameters(t)["unguarded"]})}


def _template_checks() -> list[Check]:
    t = load("tensorrtllm_backend")["templates"]
    src, moved = t["source"], t["moved"]["note"]
    paths = {m: f"{IBL}/{m}/config.pbtxt" for m in t["models"] if m != "llmapi"}
    paths["llmapi"] = "all_models/llmapi/tensorrt_llm/config.pbtxt"
    out = [
        Check(
            f"tensorrtllm_backend.templates.{m}",
            src["repository"],
            (path,),
            src["commit"],
            refresh.template_facts,
            lambda m=m: t["models"][m],
            moved,
        )
        for m, path in paths.items()
    ]
    for commit, v in t["llmapi_versions"].items():
        s = v["source"]
        out.append(
            Check(
                f"tensorrtllm_backend.templates.llmapi@{commit[:8]}",
                s["repository"],
                (s["path"],),
                commit,
                refresh.template_facts,
                lambda v=v: {k: x for k, x in v.items() if k != "source"},
                blobs=(s["blob"],),
            )
        )
    return out


def _vllm_checks() -> list[Check]:
    f, v = load("vllm_backend"), load("clients")["openai_frontend_vllm"]
    s, lora, o = f["source"], f["lora"]["source"][0], v["source"]
    return [
        Check(
            "vllm_backend.inputs_outputs",
            s["repository"],
            ("src/model.py",),
            s["commit"],
            lambda text: refresh.python_io(text, "_auto_complete_inputs_and_outputs"),
            lambda: {"inputs": f["inputs"], "outputs": f["outputs"]},
        ),
        Check(
            "vllm_backend.lora",
            lora["repository"],
            (lora["path"],),
            lora["commit"],
            _vllm_lora,
            lambda: {k: f["lora"][k] for k in ("enable_key", "table")},
        ),
        Check(
            "clients.openai_frontend_vllm",
            o["repository"],
            (o["path"],),
            o["commit"],
            _openai_vllm_inputs,
            lambda: sorted(v["always"]),
        ),
    ]


def all_checks() -> list[Check]:
    images, clients, be = load("triton_images"), load("clients"), load("tensorrtllm_backend")
    g, o = clients["genai_perf"]["source"], clients["openai_frontend"]["source"]
    u, e = (
        clients["openai_frontend"]["usage"]["source"],
        clients["openai_frontend"]["echo"]["source"],
    )
    cpp = be["cpp_parameters"]
    return [
        Check(
            "triton_images",
            images["source"]["repository"],
            (images["source"]["path"],),
            images["source"]["commit"],
            _images,
            _recorded_images,
        ),
        Check(
            "clients.genai_perf",
            g["repository"],
            (g["path"],),
            g["commit"],
            _genai_perf_inputs,
            _recorded_genai_perf,
        ),
        Check(
            "clients.openai_frontend",
            o["repository"],
            (o["path"],),
            o["commit"],
            _openai_trtllm_inputs,
            _recorded_openai,
        ),
        Check(
            "clients.openai_frontend.usage",
            o["repository"],
            (u["path"],),
            u["commit"],
            _usage,
            lambda: {
                k: sorted(clients["openai_frontend"]["usage"][k]) for k in ("outputs", "dtypes")
            },
        ),
        Check(
            "clients.openai_frontend.echo",
            e["repository"],
            (e["path"],),
            e["commit"],
            _echo_names,
            lambda: clients["openai_frontend"]["echo"]["input_names"],
        ),
        Check(
            "tensorrtllm_backend.cpp_parameters",
            cpp["source"][0]["repository"],
            tuple(s["path"] for s in cpp["source"]),
            cpp["source"][0]["commit"],
            _cpp_unguarded,
            lambda: {"unguarded": sorted(cpp["unguarded"])},
            be["templates"]["moved"]["note"],
        ),
        *_template_checks(),
        *_vllm_checks(),
        *_release_checks(),
        *_image_python_checks(),
    ]


def _image_python_checks() -> list[Check]:
    """Each image line's Python: the QA default at each recorded release branch, the matrix's column."""
    facts = load("triton_image_pythons")
    out = [
        Check(
            f"triton_image_pythons.py3.{tag}",
            row["source"]["repository"],
            (row["source"]["path"],),
            row["source"]["commit"],
            lambda text: (qa_python(text) or (None, None))[1],
            lambda row=row: row["python"],
            one_release=True,
        )
        for tag, row in facts["py3"]["releases"].items()
    ]
    for container in ("trtllm-python-py3", "vllm-python-py3"):
        src = facts[container]["source"]
        out.append(
            Check(
                f"triton_image_pythons.{container}",
                src["repository"],
                (src["path"],),
                src["commit"],
                lambda text, container=container: matrix_pythons(text).get(container),
                lambda container=container: facts[container]["images"],
            )
        )
    return out


def _release_checks() -> list[Check]:
    """Each recorded tensorrtllm_backend release: its unguarded reads and its five templates, at its commit."""
    out, moved = [], load("tensorrtllm_backend")["templates"]["moved"]["note"]
    for tag, r in load("tensorrtllm_releases")["releases"].items():
        src = (
            "inflight_batcher_llm/src/model_instance_state.cc",
            "inflight_batcher_llm/src/model_state.cc",
        )
        out.append(
            Check(
                f"tensorrtllm_releases.{tag}.unguarded",
                r["repository"],
                src,
                r["commit"],
                _cpp_unguarded,
                lambda r=r: {"unguarded": sorted(r["unguarded"])},
                moved,
            )
        )
        out += [
            Check(
                f"tensorrtllm_releases.{tag}.templates.{m}",
                r["repository"],
                (t["path"],),
                r["commit"],
                refresh.template_structure,
                lambda t=t: {k: v for k, v in t.items() if k != "path"},
                moved,
            )
            for m, t in r["templates"].items()
        ]
    return out


def _wheel_facts(wheel: Path, v: dict) -> dict:
    """What the recorded vLLM facts say, re-derived from the wheel's own files."""
    args = refresh.engine_args(read_wheel(wheel, v["source"]["path"]))
    quant = vllm_wheels.quantization_methods(read_wheel(wheel, v["quantization_methods"]["path"]))
    return {
        **args,
        "quantization_methods": quant,
        "tp_heads": vllm_wheels.tp_heads(read_wheel(wheel, v["tp_heads"]["path"])),
    }


def _recorded_wheel_facts(v: dict) -> dict:
    return {
        "AsyncEngineArgs": v["AsyncEngineArgs"],
        "lines": v["source"]["lines"],
        "enable_prefix_caching": v["enable_prefix_caching"],
        "quantization_methods": {k: v["quantization_methods"][k] for k in ("values", "lines")},
        "tp_heads": {k: v["tp_heads"][k] for k in ("lines", "message")},
    }


def wheel_checks(wheels: list[Path]) -> list[dict]:
    """Each recorded vLLM version against its wheel: the wheel's sha256, then AsyncEngineArgs, the quantization
    methods and the tensor-parallel heads message re-derived."""
    from tests.contracts.drift import _diff

    given = {p.name.split("-")[1]: p for p in wheels if p.name.startswith("vllm-")}
    out = []
    for version, v in vllm_versions().items():
        row = {
            "fact": f"vllm_engine_args.versions.{version}",
            "repository": "vllm-project/vllm",
            "ref": version,
        }
        wheel = given.get(version)
        if wheel is None:
            out.append(
                {**row, "status": "unread", "detail": f"give --wheel {v['source']['wheel']}"}
            )
            continue
        if sha256_file(wheel) != v["source"]["wheel_sha256"]:
            out.append(
                {**row, "status": "drift", "detail": f"{wheel.name} is not the recorded wheel"}
            )
            continue
        derived, recorded = _wheel_facts(wheel, v), _recorded_wheel_facts(v)
        out.append(
            {**row, "status": "same"}
            if derived == recorded
            else {**row, "status": "drift", "detail": _diff(recorded, derived)}
        )
    out += marlin_checks(given) + speculative_checks(given) + lora_checks(given)
    for version in sorted(set(given) - set(vllm_versions())):
        out.append(
            {
                "fact": "vllm_engine_args.versions",
                "repository": "vllm-project/vllm",
                "ref": version,
                "status": "unread",
                "detail": f"vLLM {version} is not recorded (no image in the table needs it?)",
            }
        )
    return out


def marlin_checks(given: dict) -> list[dict]:
    """vllm_quantization.json by_version against each given wheel: the sha256, then what each AWQ / GPTQ
    override_quantization_method accepts, and its lines."""
    from tests.contracts.drift import _diff

    out = []
    for version, v in load("vllm_quantization")["marlin_override"]["by_version"].items():
        row = {
            "fact": f"vllm_quantization.marlin_override.by_version.{version}",
            "repository": "vllm-project/vllm",
            "ref": version,
        }
        wheel = given.get(version)
        if wheel is None or sha256_file(wheel) != v["source"][0]["wheel_sha256"]:
            out.append(
                {
                    **row,
                    "status": "unread" if wheel is None else "drift",
                    "detail": f"give --wheel {v['source'][0]['wheel']}"
                    if wheel is None
                    else f"{wheel.name} is not the recorded wheel",
                }
            )
            continue
        pairs = list(zip(("awq", "gptq"), v["source"], strict=True))
        recorded = {
            m: {"lines": src["lines"].split()[0], "accepted": v["accepted"][m]} for m, src in pairs
        }
        derived = {m: vllm_wheels.override(read_wheel(wheel, src["path"]), m) for m, src in pairs}
        out.append(
            {**row, "status": "same"}
            if derived == recorded
            else {**row, "status": "drift", "detail": _diff(recorded, derived)}
        )
    return out


def _wheel_fact_checks(given: dict, fact: str, derive) -> list[dict]:
    """Each version of a wheel-derived fact against its given wheel: the sha256, then the whole entry
    re-derived by derive(wheel, entry)."""
    from tests.contracts.drift import _diff

    out = []
    for version, v in load(fact)["versions"].items():
        row = {
            "fact": f"{fact}.versions.{version}",
            "repository": "vllm-project/vllm",
            "ref": version,
        }
        wheel = given.get(version)
        if wheel is None or sha256_file(wheel) != v["source"]["wheel_sha256"]:
            detail = (
                f"give --wheel {v['source']['wheel']}"
                if wheel is None
                else f"{wheel.name} is not the recorded wheel"
            )
            out.append({**row, "status": "unread" if wheel is None else "drift", "detail": detail})
            continue
        derived = derive(wheel, v)
        out.append(
            {**row, "status": "same"}
            if derived == v
            else {**row, "status": "drift", "detail": _diff(v, derived)}
        )
    return out


def speculative_checks(given: dict) -> list[dict]:
    """vllm_speculative.json against each given wheel: the sha256, then the whole entry re-derived (whether
    AsyncEngineArgs has speculative_config, SpeculativeConfig's fields and methods, draft_model, and their lines)."""
    return _wheel_fact_checks(
        given, "vllm_speculative", lambda wheel, v: vllm_spec_wheel.derive(wheel, v["images"])
    )


def lora_checks(given: dict) -> list[dict]:
    """vllm_lora.json against each given wheel: the sha256, then the whole entry re-derived (the ranks, the
    default, the max_cpu_loras rule, EngineArgs' field, the adapter rank check, and their lines)."""
    return _wheel_fact_checks(given, "vllm_lora", lambda wheel, _v: vllm_lora_wheel.derive(wheel))


RANGE = re.compile(r"(?<![\w.])(\d+)(?:-(\d+))?(?![\w.])")
WHERE = re.compile(r"([\w./-]+\.(?:cc|h|py|md|pbtxt|json)):([\d ,\-]+)")


def cited_lines(node, source=None, at: str = "", inherited=None):
    """(fact, repository, commit, path, [(first, last)], note) for every line range a fact cites: a source's path
    and lines, and the 'where' entries (path:lines) read under the fact's source. note: the fact's own word that
    the file moved or that it stays pinned to its commit: ('moved' | 'pinned' | 'on_main', text) or None."""
    if isinstance(node, dict):
        src = node.get("source") if isinstance(node.get("source"), dict) else source
        own = next(((k, node[k]) for k in ("pinned", "moved", "on_main") if k in node), None)
        note = (
            (own[0], str(own[1].get("note", own[1]) if isinstance(own[1], dict) else own[1]))
            if own
            else inherited
        )
        sources = (
            node.get("source") if isinstance(node.get("source"), list) else [node.get("source")]
        )
        for one in sources:
            if isinstance(one, dict) and {"repository", "commit", "path", "lines"} <= set(one):
                path = one["path"].split(" (")[0]
                ranges = [
                    (int(a), int(b or a)) for a, b in RANGE.findall(str(one["lines"]).split("(")[0])
                ]
                if ranges and "*" not in path and "," not in path:
                    yield at, one["repository"], one["commit"], path, ranges, note
        for key, value in node.items():
            if key == "where" and isinstance(value, str) and src and "commit" in src:
                for m in WHERE.finditer(value):
                    ranges = [(int(a), int(b or a)) for a, b in RANGE.findall(m.group(2))]
                    yield f"{at}.where", src["repository"], src["commit"], m.group(1), ranges, note
            elif key != "source":
                yield from cited_lines(value, src, f"{at}.{key}", note)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from cited_lines(item, source, f"{at}[{i}]", inherited)


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def cited_checks(mirrors: dict, facts_dir: Path | None = None) -> list[dict]:
    """Hand-read facts cite line ranges: each range's text at the recorded commit must still be in the file at the
    newest release (whitespace aside), else the fact needs reading again, unless it says it moved or is pinned."""
    from tests.contracts.drift import Mirror
    from tests.contracts.facts import paths

    out, opened = [], {}
    for path in sorted(facts_dir.glob("*.json")) if facts_dir else paths():
        for at, repo, commit, file, ranges, note in cited_lines(
            json.loads(path.read_text()), None, path.stem
        ):
            if repo not in mirrors:
                continue
            m = opened.setdefault(repo, Mirror(mirrors[repo]))
            file = m.resolve(commit, file)
            old, ref = m.show(commit, file), m.newest()[0]
            new = m.show(ref, file)
            row = {
                "fact": f"{at} {file}:{','.join(f'{a}-{b}' for a, b in ranges)}",
                "repository": repo,
                "ref": ref,
            }
            if old is None:
                out.append(
                    {**row, "ref": commit, "status": "gone", "detail": "not at the recorded commit"}
                )
                continue
            lines = old.splitlines()
            changed = [
                f"{a}-{b}"
                for a, b in ranges
                if new is None or _squash("\n".join(lines[a - 1 : b])) not in _squash(new)
            ]
            status = "same" if not changed else "gone" if new is None else "drift"
            if status != "same" and note:
                status = "pinned" if note[0] == "pinned" else "moved"
            detail = note[1] if note else f"lines {changed} changed"
            out.append(
                {**row, "status": status, **({"detail": detail} if status != "same" else {})}
            )
    return out
