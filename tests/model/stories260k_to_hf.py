#!/usr/bin/python3
"""Converts llama.cpp's stories260K.gguf (a real trained LLaMA-architecture model, see
../shared/testdata/README.md) into a Hugging Face model folder: a test-fixture generator. Tests
run it into a temporary folder at test time; its output is never committed.

    /usr/bin/python3 tests/model/stories260k_to_hf.py GGUF OUT_DIR [--check]

Writes OUT_DIR/config.json, model.safetensors (F32), tokenizer.model (a SentencePiece
ModelProto built from the GGUF's tokenizer.ggml.* metadata) and tokenizer_config.json.
Needs Debian's python3-torch, python3-numpy, python3-sentencepiece, python3-protobuf.

llama.cpp's llama tensors keep Meta's interleaved RoPE pairs (2i, 2i+1); HF's rotate-half needs
(i, i + d/2), so q_proj and k_proj rows are permuted per head with HF's own Meta->HF conversion
permutation (llama_reference.meta_to_hf; k with the KV head count). Always verified: the
reference forward on the raw GGUF weights with interleaved RoPE gives the same weights and
logits as on the converted weights with rotate-half, and sentencepiece loads tokenizer.model
and encodes "Once upon a time" as 403 407 261 378. --check also decodes 25 greedy tokens from
BOS and asserts llama.cpp's known continuation.
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402
from make_gpt2_fixtures import write_safetensors  # noqa: E402

EXPECTED_GREEDY = [403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                   338, 401, 396, 267, 337, 410, 408, 419, 292, 411]

# ---------------------------------------------------------------------------------------------
# A minimal GGUF (v2/v3) reader

SCALARS = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
           10: "<u8", 11: "<i8", 12: "<f8"}
GGML_TYPES = {0: ("F32", np.float32, 4), 1: ("F16", np.float16, 2)}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError("GGUF truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def scalar(self, fmt):
        v = np.frombuffer(self.take(np.dtype(fmt).itemsize), dtype=fmt)[0]
        return v.item()

    def string(self):
        return self.take(self.scalar("<u8")).decode("utf-8")

    def value(self, vtype):
        if vtype in SCALARS:
            v = self.scalar(SCALARS[vtype])
            return bool(v) if vtype == 7 else v
        if vtype == 8:
            return self.string()
        if vtype == 9:
            itype, count = self.scalar("<u4"), self.scalar("<u8")
            if itype in SCALARS:
                size = np.dtype(SCALARS[itype]).itemsize
                arr = np.frombuffer(self.take(size * count), dtype=SCALARS[itype])
                return arr.astype(bool).tolist() if itype == 7 else arr.tolist()
            return [self.value(itype) for _ in range(count)]
        raise ValueError(f"GGUF value type {vtype}")


def read_gguf(path):
    """Returns (metadata dict, {name: numpy array in row-major [rows, cols] order})."""
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if r.take(4) != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version = r.scalar("<u4")
    if version not in (2, 3):
        raise ValueError(f"{path}: GGUF version {version}")
    n_tensors, n_kv = r.scalar("<u8"), r.scalar("<u8")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.scalar("<u4"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.scalar("<u4")
        ne = [r.scalar("<u8") for _ in range(n_dims)]
        infos.append((name, ne, r.scalar("<u4"), r.scalar("<u8")))
    align = meta.get("general.alignment", 32)
    start = (r.pos + align - 1) // align * align
    tensors = {}
    for name, ne, ttype, offset in infos:
        if ttype not in GGML_TYPES:
            raise ValueError(f"{path}: tensor {name} has ggml type {ttype} (F32/F16 only here)")
        _, dtype, size = GGML_TYPES[ttype]
        count = int(np.prod(ne))
        raw = data[start + offset:start + offset + count * size]
        # ne[0] varies fastest: ne = [cols, rows, ...] is the numpy shape [..., rows, cols].
        arr = np.frombuffer(raw, dtype=dtype).reshape(list(reversed(ne)))
        tensors[name] = arr.astype(np.float32)
    return meta, tensors


# ---------------------------------------------------------------------------------------------
# Conversion

LAYER_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
               "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
               "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
               "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
TOP_NAMES = {"token_embd.weight": "model.embed_tokens.weight",
             "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}


def hf_name(name):
    if name in TOP_NAMES:
        return TOP_NAMES[name]
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}.{parts[3]}"
    raise ValueError(f"unexpected tensor {name}")


def make_config(meta, tensors):
    arch = meta["general.architecture"]
    if arch != "llama":
        raise ValueError(f"general.architecture {arch!r}, not llama")
    g = lambda k, default=None: meta.get(f"llama.{k}", default)  # noqa: E731
    heads = g("attention.head_count")
    tok = meta["tokenizer.ggml.tokens"]
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": g("embedding_length"), "intermediate_size": g("feed_forward_length"),
            "num_hidden_layers": g("block_count"), "num_attention_heads": heads,
            "num_key_value_heads": g("attention.head_count_kv", heads),
            # GGUF stores f32 (1e-5 reads 9.9999997e-06): the value as config.json would say it.
            "rms_norm_eps": float(f'{g("attention.layer_norm_rms_epsilon", 1e-5):.7g}'),
            "rope_theta": float(g("rope.freq_base", 10000.0)), "rope_scaling": None,
            "max_position_embeddings": g("context_length"), "vocab_size": len(tok),
            "tie_word_embeddings": "output.weight" not in tensors, "hidden_act": "silu",
            "attention_bias": False, "mlp_bias": False,
            "bos_token_id": meta.get("tokenizer.ggml.bos_token_id", 1),
            "eos_token_id": meta.get("tokenizer.ggml.eos_token_id", 2),
            "torch_dtype": "float32"}


def write_tokenizer(meta, out):
    from sentencepiece import sentencepiece_model_pb2 as sp_pb2
    if meta.get("tokenizer.ggml.model") != "llama":
        raise ValueError("tokenizer.ggml.model is not llama (SentencePiece)")
    tokens = meta["tokenizer.ggml.tokens"]
    scores = meta.get("tokenizer.ggml.scores", [0.0] * len(tokens))
    types = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
    m = sp_pb2.ModelProto()
    for piece, score, ttype in zip(tokens, scores, types):
        p = m.pieces.add()
        p.piece, p.score = piece, float(score)
        p.type = ttype       # GGUF's token types use SentencePiece's numbering (1 normal .. 6 byte)
    ts = m.trainer_spec
    ts.model_type = sp_pb2.TrainerSpec.BPE
    ts.vocab_size = len(tokens)
    ts.byte_fallback = True
    ts.unk_id = meta.get("tokenizer.ggml.unknown_token_id", 0)
    ts.bos_id = meta.get("tokenizer.ggml.bos_token_id", 1)
    ts.eos_id = meta.get("tokenizer.ggml.eos_token_id", 2)
    pad = meta.get("tokenizer.ggml.padding_token_id", -1)
    ts.pad_id = pad if 0 <= pad < len(tokens) else -1       # llama2c's GGUF stores u32 -1
    ns = m.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = True
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    with open(os.path.join(out, "tokenizer.model"), "wb") as f:
        f.write(m.SerializeToString())
    tok_cfg = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False,
               "bos_token": tokens[ts.bos_id], "eos_token": tokens[ts.eos_id],
               "unk_token": tokens[ts.unk_id], "model_max_length": 512, "legacy": True}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tok_cfg, f, indent=2)


def to_torch(tensors):
    return {k: torch.from_numpy(np.array(v)).to(torch.float64) for k, v in tensors.items()}


def convert(gguf, out, check=False):
    meta, tensors = read_gguf(gguf)
    cfg = make_config(meta, tensors)
    meta_w = {hf_name(k): torch.from_numpy(np.array(v)) for k, v in tensors.items()}
    hf_w = ref.permute_qk(meta_w, cfg, ref.meta_to_hf)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(out, "model.safetensors"),
                      [(k, hf_w[k], "F32") for k in sorted(hf_w)])
    write_tokenizer(meta, out)

    # Same model both ways: interleaved RoPE on GGUF's order, rotate-half on HF's.
    w64_meta = {k: v.to(torch.float64) for k, v in meta_w.items()}
    w64_hf = {k: v.to(torch.float64) for k, v in hf_w.items()}
    ids = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298]
    a1, z1 = ref.forward(cfg, w64_meta, ids, rope_convention="interleaved")
    a2, z2 = ref.forward(cfg, w64_hf, ids, rope_convention="half")
    assert torch.allclose(a1, a2, atol=1e-12) and torch.allclose(z1, z2, atol=1e-10)
    # ... and the permutation matters (the raw weights with rotate-half differ).
    _, z3 = ref.forward(cfg, w64_meta, ids, rope_convention="half")
    assert (z3 - z1).abs().max() > 1e-3

    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))
    got = sp.encode("Once upon a time")
    assert got == [403, 407, 261, 378], got
    assert sp.bos_id() == 1 and sp.eos_id() == 2 and sp.unk_id() == 0
    if check:
        gen = ref.greedy(cfg, w64_hf, [1], 25)
        assert gen == EXPECTED_GREEDY, gen
        print("greedy from BOS:", " ".join(map(str, gen)), repr(sp.decode(gen)))
    return cfg


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    if len(args) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    convert(args[0], args[1], check="--check" in sys.argv[1:])
    print("wrote", args[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
