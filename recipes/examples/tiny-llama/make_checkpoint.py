"""Regenerate this tiny Llama-architecture checkpoint (seeded random weights, a BPE tokenizer trained on a
few lines). Deterministic: `python make_checkpoint.py` rewrites identical bytes.

It exists so that the LLM recipe example and the tests have a real Hugging Face checkpoint layout
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json) without downloading anything.
"""

import json
import struct
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2,
    "vocab_size": 384, "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "torch_dtype": "float16", "bos_token_id": 1, "eos_token_id": 2,
}
CORPUS = [
    "Triton serves models from a versioned repository.",
    "tritonbuild turns recipes into a verified model repository.",
    "The engine is built once and cached by content hash.",
    "Paged KV cache blocks hold the keys and values of every sequence.",
    "INT4 weight-only quantization keeps activations in half precision.",
    "A golden inference is compared bit for bit.",
]


def tensors(cfg: dict) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    h, i, v, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd

    def w(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float16)

    out = {"model.embed_tokens.weight": w(v, h), "model.norm.weight": np.ones(h, np.float16), "lm_head.weight": w(v, h)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out.update({p + "self_attn.q_proj.weight": w(q, h), p + "self_attn.k_proj.weight": w(kv, h),
                    p + "self_attn.v_proj.weight": w(kv, h), p + "self_attn.o_proj.weight": w(h, q),
                    p + "mlp.gate_proj.weight": w(i, h), p + "mlp.up_proj.weight": w(i, h),
                    p + "mlp.down_proj.weight": w(h, i), p + "input_layernorm.weight": np.ones(h, np.float16),
                    p + "post_attention_layernorm.weight": np.ones(h, np.float16)})
    return out


def write_safetensors(path: Path, arrays: dict[str, np.ndarray]) -> None:
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name in sorted(arrays):
        data = np.ascontiguousarray(arrays[name]).tobytes()
        header[name] = {"dtype": "F16", "shape": list(arrays[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def train_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    return tok


def main() -> None:
    (HERE / "config.json").write_text(json.dumps(CONFIG, indent=2, sort_keys=True) + "\n")
    write_safetensors(HERE / "model.safetensors", tensors(CONFIG))
    tok = train_tokenizer(CONFIG["vocab_size"])
    (HERE / "tokenizer.json").write_text(tok.to_str(pretty=True) + "\n")
    (HERE / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "model_max_length": 512,
         "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
