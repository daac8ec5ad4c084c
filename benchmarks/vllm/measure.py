"""The vLLM benchmark's measurements against a live tritonserver serving the built repository (h200.sh runs
them on the GPU machine; stdlib + numpy only, through Triton's generate endpoints like verify):

    measure.py determinism URL MODEL      same prompt 20x alone and 20x amid 64 concurrent other prompts
    measure.py throughput URL MODEL       output tokens/s at 1, 16 and 64 concurrent streams
    measure.py throughput-sampled URL MODEL [STREAMS]   the same with seeded top-p sampling (default 1,64)
    measure.py kv-log LOG                 vLLM's own KV figures from a server or engine log
    measure.py soak URL MODEL [SECONDS [STREAMS]]   STREAMS concurrent greedy streams for SECONDS (default 120, 64):
                                          every answer compared with its prompt's answer alone

Greedy decoding (temperature 0); token ids and log-probs come from the vLLM backend's `logprobs` output (the
chosen token's id and log-prob at each step, as vLLM computed them), compared bit for bit as JSON text.
Each prints one JSON object.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TARGET = "Paged KV cache blocks hold the keys and"
OTHERS = [
    "Triton serves",
    "The engine is built once and cached by content hash while the",
    "A golden",
    "INT4 weight-only quantization keeps activations in half precision so that",
    "tritonbuild turns recipes into",
    "Every sequence of the batch has its own",
]


# Seeded sampling as verify's seeded-sampling path sends it (builder/verify/traffic.py): what throughput-sampled uses
SAMPLED = {"temperature": 0.9, "top_p": 0.95}


def generate(url: str, model: str, prompt: str, max_tokens: int, seed: int | None = None) -> dict:
    """One request; greedy, or seeded sampling (SAMPLED with this seed) where seed is given."""
    params = {"temperature": 0, "max_tokens": max_tokens, "logprobs": 0, "ignore_eos": True}
    if seed is not None:
        params |= SAMPLED | {"seed": seed}
    body = {
        "text_input": prompt,
        "stream": False,
        "exclude_input_in_output": True,
        "sampling_parameters": json.dumps(params),
        "return_logprobs": True,
        "return_num_output_tokens": True,
    }
    req = urllib.request.Request(
        f"{url}/v2/models/{model}/generate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=300) as response:
        out = json.loads(response.read())
    steps = json.loads(out["logprobs"] if isinstance(out["logprobs"], str) else out["logprobs"][0])
    ids = [int(next(iter(step))) for step in steps]
    logprobs = [next(iter(step.values()))["logprob"] for step in steps]
    n = out["num_output_tokens"]
    return {
        "ids": ids,
        "logprobs": logprobs,
        "raw": json.dumps(steps),
        "tokens": n[0] if isinstance(n, list) else n,
    }


def determinism(
    url: str, model: str, repeats: int = 20, load: int = 64, max_tokens: int = 32
) -> dict:
    repeats, load = int(repeats), int(load)
    alone = [generate(url, model, TARGET, max_tokens) for _ in range(repeats)]
    ref = alone[0]
    under = []
    with ThreadPoolExecutor(max_workers=load + 1) as pool:
        for _ in range(repeats):
            noise = [
                pool.submit(
                    generate, url, model, OTHERS[i % len(OTHERS)] + f" {i}", max_tokens + i % 17
                )
                for i in range(load)
            ]
            time.sleep(0.005)  # NOTE: the target lands among requests already being scheduled
            target = pool.submit(generate, url, model, TARGET, max_tokens)
            under.append(target.result())
            for f in noise:
                f.result()

    def same(runs, key):
        return sum(r[key] == ref[key] for r in runs)

    diffs = (
        i
        for r in alone + under
        for i, (a, b) in enumerate(zip(r["ids"], ref["ids"], strict=False))
        if a != b
    )
    first_diff = next(diffs, None)
    return {
        "model": model,
        "prompt": TARGET,
        "max_tokens": max_tokens,
        "repeats": repeats,
        "concurrent_others": load,
        "alone_ids_identical": same(alone, "ids"),
        "alone_logprobs_identical": same(alone, "logprobs"),
        "under_load_ids_identical": same(under, "ids"),
        "under_load_logprobs_identical": same(under, "logprobs"),
        "first_differing_token": first_diff,
        "reference_ids": ref["ids"],
        "reference_logprobs": ref["logprobs"],
    }


def throughput(
    url: str,
    model: str,
    streams=(1, 16, 64),
    max_tokens: int = 128,
    per_stream: int = 4,
    sampled: bool = False,
) -> dict:
    """Output tokens/s at each stream count; greedy, or seeded top-p sampling (sampled: each request its own seed),
    which runs vLLM's top-k / top-p filter (in invariant mode the plugin's sort at every batch size)."""
    if isinstance(streams, str):  # from the command line: "1,64"
        streams = tuple(int(n) for n in streams.split(","))
    generate(url, model, OTHERS[0], 8)  # warm-up
    rows = []
    for n in streams:
        requests = max(per_stream, 2) if n > 1 else per_stream * 2
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=n) as pool:
            results = list(
                pool.map(
                    lambda i, k=requests: [
                        generate(
                            url,
                            model,
                            OTHERS[i % len(OTHERS)],
                            max_tokens,
                            seed=i * k + j if sampled else None,
                        )
                        for j in range(k)
                    ],
                    range(n),
                )
            )
        wall = time.perf_counter() - start
        tokens = sum(r["tokens"] for per in results for r in per)
        rows.append(
            {
                "streams": n,
                "requests": n * requests,
                "output_tokens": tokens,
                "seconds": round(wall, 3),
                "tokens_per_s": round(tokens / wall, 1),
            }
        )
    sampling = {"greedy": not sampled} | ({"sampling": SAMPLED} if sampled else {})
    return {"model": model, "max_tokens": max_tokens, **sampling, "rows": rows}


def throughput_sampled(url: str, model: str, streams="1,64") -> dict:
    return throughput(url, model, streams, sampled=True)


def soak(
    url: str, model: str, seconds: float = 120, streams: int = 64, max_tokens: int = 32
) -> dict:
    """STREAMS workers send prompts round robin for SECONDS; each answer's ids and log-probs are compared with the
    same prompt's answer alone (taken first, one request at a time): counts of answers and of differing ones."""
    seconds, streams = float(seconds), int(streams)
    prompts = [OTHERS[i % len(OTHERS)] + f" {i}" for i in range(streams)]
    alone = {p: generate(url, model, p, max_tokens) for p in prompts}
    deadline = time.monotonic() + seconds

    def worker(i: int) -> tuple[int, int, int, int | None]:
        answers = differing = ids_differing = 0
        first = None
        n = i
        while time.monotonic() < deadline:
            prompt = prompts[n % streams]
            n += 1
            got, ref = generate(url, model, prompt, max_tokens), alone[prompt]
            answers += 1
            if got["raw"] != ref["raw"]:
                differing += 1
                if got["ids"] != ref["ids"]:
                    ids_differing += 1
                    pos = next(
                        (
                            j
                            for j, (a, b) in enumerate(zip(got["ids"], ref["ids"], strict=False))
                            if a != b
                        ),
                        None,
                    )
                    first = pos if first is None or (pos is not None and pos < first) else first
        return answers, differing, ids_differing, first

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=streams) as pool:
        rows = list(pool.map(worker, range(streams)))
    firsts = [r[3] for r in rows if r[3] is not None]
    return {
        "model": model,
        "seconds": round(time.perf_counter() - start, 1),
        "streams": streams,
        "max_tokens": max_tokens,
        "answers": sum(r[0] for r in rows),
        "differing": sum(r[1] for r in rows),
        "ids_differing": sum(r[2] for r in rows),
        "first_differing_token": min(firsts) if firsts else None,
    }


KV_PATTERNS = {
    "kv_cache_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "model_weights_gib": r"[Mm]odel loading took ([\d.]+) GiB",
}


def kv_log(path: str) -> dict:
    """Every occurrence, in order (one per engine the log holds)."""
    text = Path(path).read_text(errors="replace")
    return {
        key: [float(m.replace(",", "")) for m in re.findall(pattern, text)]
        for key, pattern in KV_PATTERNS.items()
    }


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    commands = {
        "determinism": determinism,
        "throughput": throughput,
        "throughput-sampled": throughput_sampled,
        "kv-log": kv_log,
        "soak": soak,
    }
    result = commands[cmd](*args)
    print(json.dumps(result))
