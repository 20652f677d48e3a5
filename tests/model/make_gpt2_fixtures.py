#!/usr/bin/python3
"""Random-init GPT-2 checkpoints in the Hugging Face layout, and what a reference forward pass
written here with torch computes on them: the test fixtures of attnviz's model pass.

Run with Debian's python3 (python3-torch, python3-regex):
    /usr/bin/python3 tests/model/make_gpt2_fixtures.py tests/model/fixtures
    /usr/bin/python3 tests/model/make_gpt2_fixtures.py --gpt2-small DIR   # 12x12, d=768, 50257

Each fixture folder holds config.json, model.safetensors (written here: the Python safetensors
package is not in Debian), vocab.json, merges.txt and cases.json. Each case lists its ids (and
the text they came from), its interventions, and the .npy files of the expected per-layer
attention weights [L, H, T, T] and logits [T, V], computed in float64 from the stored weights.

The reference follows the published GPT-2 architecture (pre-LayerNorm blocks, Conv1D weights
stored [in, out], causal attention scaled by 1/sqrt(d_head), tied or separate lm_head), not
attnviz's code. Interventions: an ablated head's output is zeroed before c_proj; temperature
divides the scaled, masked scores; an extra sliding-window mask keeps the last W keys.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import regex
import torch

# ---------------------------------------------------------------------------------------------
# GPT-2's byte-level BPE (the algorithm of the GPT-2 paper's released encoder)

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_alphabet():
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    table, n = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


BYTES = byte_alphabet()


def bpe_encode(text, vocab, ranks):
    ids = []
    for piece in PATTERN.findall(text):
        word = [BYTES[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            pairs = [(ranks.get((a, b), math.inf), i) for i, (a, b) in enumerate(zip(word, word[1:]))]
            best = min(pairs)[0]
            if best == math.inf:
                break
            first, second = [(a, b) for a, b in ranks if ranks[(a, b)] == best][0]
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == first and word[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        ids.extend(vocab[w] for w in word)
    return ids


def toy_tokenizer(extra_merges):
    """256 byte tokens in GPT-2's order, then one token per merge, then <|endoftext|>."""
    vocab = {BYTES[b]: i for i, b in enumerate(sorted(BYTES, key=lambda b: ord(BYTES[b])))}
    merges = []
    for a, b in extra_merges:
        a = "".join(BYTES[x] for x in a.encode())
        b = "".join(BYTES[x] for x in b.encode())
        merges.append((a, b))
        vocab.setdefault(a + b, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    return vocab, merges


MERGES = [(" ", "t"), ("h", "e"), (" t", "he"), ("i", "n"), (" ", "a"), ("e", "r"), ("o", "n"),
          (" ", "s"), ("a", "t"), ("e", "n"), (" ", "c"), ("o", "r"), ("i", "s"), (" ", "w"),
          ("in", "g"), (" a", "t"), (" c", "at"), (" s", "at"), (" ", "o"), (" o", "n"),
          ("e", "d"), (" ", "m"), (" m", "at"), ("'", "s")]

# ---------------------------------------------------------------------------------------------
# safetensors, written by hand


DTYPES = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2)}


def tensor_bytes(t, dtype):
    t = t.to(DTYPES[dtype][0]).contiguous()
    if dtype == "BF16":
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors):
    """tensors: list of (name, torch tensor, dtype name)."""
    header, blobs, offset = {}, [], 0
    for name, t, dtype in tensors:
        data = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def stored(t, dtype):
    """The values as the file holds them (rounded to F16/BF16), as float64."""
    return t.to(DTYPES[dtype][0]).to(torch.float64)

# ---------------------------------------------------------------------------------------------
# The model


def random_weights(cfg, gen):
    d, L, V, P = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    inner = cfg["n_inner"] or 4 * d

    def rnd(*shape, std=1.0, mean=0.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std + mean

    w = {"wte.weight": rnd(V, d, std=0.5), "wpe.weight": rnd(P, d, std=0.3),
         "ln_f.weight": rnd(d, std=0.2, mean=1.0), "ln_f.bias": rnd(d, std=0.1)}
    for l in range(L):
        p = f"h.{l}."
        w[p + "ln_1.weight"] = rnd(d, std=0.2, mean=1.0)
        w[p + "ln_1.bias"] = rnd(d, std=0.1)
        # Large enough that the heads attend sharply, not uniformly.
        w[p + "attn.c_attn.weight"] = rnd(d, 3 * d, std=1.5 / math.sqrt(d))
        w[p + "attn.c_attn.bias"] = rnd(3 * d, std=0.2)
        w[p + "attn.c_proj.weight"] = rnd(d, d, std=1.0 / math.sqrt(d))
        w[p + "attn.c_proj.bias"] = rnd(d, std=0.1)
        w[p + "ln_2.weight"] = rnd(d, std=0.2, mean=1.0)
        w[p + "ln_2.bias"] = rnd(d, std=0.1)
        w[p + "mlp.c_fc.weight"] = rnd(d, inner, std=1.0 / math.sqrt(d))
        w[p + "mlp.c_fc.bias"] = rnd(inner, std=0.1)
        w[p + "mlp.c_proj.weight"] = rnd(inner, d, std=1.0 / math.sqrt(inner))
        w[p + "mlp.c_proj.bias"] = rnd(d, std=0.1)
    return w


def gelu(x, kind):
    if kind == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def forward(cfg, w, lm, ids, ablate=(), temperature=1.0, window=0):
    """float64 reference; returns (weights [L, H, T, T], logits [T, V])."""
    d, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    dh, T = d // H, len(ids)
    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    allowed = j <= i
    if window:
        allowed = allowed & (j > i - window)
    all_weights = []
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, n * d:(n + 1) * d].reshape(T, H, dh).transpose(0, 1) for n in range(3))
        scores = q @ k.transpose(1, 2) / math.sqrt(dh)
        scores = scores.masked_fill(~allowed, -math.inf) / temperature
        att = torch.softmax(scores, dim=-1)
        out = att @ v                                   # [H, T, dh]
        for (al, ah) in ablate:
            if al == l:
                out[ah] = 0.0
        merged = out.transpose(0, 1).reshape(T, d)
        x = x + merged @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], cfg["activation_function"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        all_weights.append(att)
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    return torch.stack(all_weights), x @ lm.T


# ---------------------------------------------------------------------------------------------
# Fixtures


def save_npy(path, t):
    np.save(path, t.numpy().astype(np.float32))


def make_checkpoint(out, shape, seed, dtype, prefix, tied, activation, n_inner, buffers,
                    vocab=None, merges=None):
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    if vocab is None:
        vocab, merges = toy_tokenizer(MERGES)
    L, H, d, P = shape
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
           "activation_function": activation, "n_layer": L, "n_head": H, "n_embd": d,
           "n_positions": P, "n_ctx": P, "n_inner": n_inner, "vocab_size": len(vocab),
           "layer_norm_epsilon": 1e-5, "bos_token_id": len(vocab) - 1,
           "eos_token_id": len(vocab) - 1}
    w = random_weights(cfg, gen)
    lm = None if tied else torch.randn(len(vocab), d, generator=gen, dtype=torch.float64) * 0.5
    tensors = []
    pre = "transformer." if prefix else ""
    for name, t in w.items():
        tensors.append((pre + name, t, dtype))
        if buffers and name.endswith("ln_1.weight"):
            # Hugging Face's saved causal-mask buffers: ignored by the loader.
            layer = name[: -len("ln_1.weight")]
            tensors.append((pre + layer + "attn.bias", torch.tril(torch.ones(1, 1, P, P)), "F32"))
            tensors.append((pre + layer + "attn.masked_bias", torch.tensor(-1e4), "F32"))
    if lm is not None:
        tensors.append(("lm_head.weight", lm, dtype))
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    ws = {k: stored(v, dtype) for k, v in w.items()}
    lm_ref = stored(lm, dtype) if lm is not None else ws["wte.weight"]
    return cfg, ws, lm_ref, vocab, merges


def make_fixture(out, shape, seed, dtype, prefix, tied, activation, n_inner, buffers, text,
                 ablate, temperature, window, all_cases):
    cfg, ws, lm, vocab, merges = make_checkpoint(out, shape, seed, dtype, prefix, tied,
                                                 activation, n_inner, buffers)
    ranks = {m: r for r, m in enumerate(merges)}
    ids = bpe_encode(text, vocab, ranks)
    cases = []
    variants = [("plain", [], 1.0, 0), ("ablate", ablate, 1.0, 0),
                ("temperature", [], temperature, 0), ("window", [], 1.0, window),
                ("combined", ablate, temperature, 0)]
    if not all_cases:
        variants = [variants[0], variants[-1]]
    for name, abl, tau, win in variants:
        att, logits = forward(cfg, ws, lm, ids, abl, tau, win)
        save_npy(os.path.join(out, f"{name}_weights.npy"), att)
        save_npy(os.path.join(out, f"{name}_logits.npy"), logits)
        cases.append({"name": name, "ablate": [f"{l}:{h}" for l, h in abl],
                      "temperature": tau, "window": win,
                      "weights": f"{name}_weights.npy", "logits": f"{name}_logits.npy"})
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"text": text, "ids": ids, "cases": cases}, f, indent=2, ensure_ascii=False)


FIXTURES = [
    # name, (L, H, d, P), seed, dtype, prefix, tied, activation, n_inner, buffers
    ("f32_prefix_tied_gelu_new", (2, 2, 16, 64), 1, "F32", True, True, "gelu_new", None, True),
    ("f16_untied_gelu", (3, 4, 32, 64), 2, "F16", False, False, "gelu", 48, False),
    ("bf16_prefix_untied_gelu_new", (2, 3, 24, 64), 3, "BF16", True, False, "gelu_new", 40, True),
    ("f32_untied_gelu_inner", (3, 4, 32, 64), 4, "F32", False, False, "gelu", 80, True),
]

TEXT = "The cat sat on the mat; the cat's hat is at 42 in the sitting room.\n\tthe end"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--gpt2-small":
        # GPT-2 small's shape, generated at test time (never committed): 12 layers x 12 heads,
        # d=768, 1024 positions, vocab 50257 = 256 bytes + 50000 two-byte merges + <|endoftext|>.
        alphabet = sorted(BYTES.values())
        pairs = [(a, b) for a in alphabet for b in alphabet][:50000]
        vocab = {c: i for i, c in enumerate(alphabet)}
        for a, b in pairs:
            vocab[a + b] = len(vocab)
        vocab["<|endoftext|>"] = len(vocab)
        cfg, ws, lm, vocab, merges = make_checkpoint(
            sys.argv[2], (12, 12, 768, 1024), 7, "F32", True, True, "gelu_new", None, True,
            vocab=vocab, merges=pairs)
        ranks = {m: r for r, m in enumerate(merges)}
        ids = bpe_encode(TEXT, vocab, ranks)
        cases = []
        for name, abl, tau in [("plain", [], 1.0), ("combined", [(5, 3), (0, 11)], 0.7)]:
            att, logits = forward(cfg, ws, lm, ids, abl, tau)
            save_npy(os.path.join(sys.argv[2], f"{name}_weights.npy"), att)
            save_npy(os.path.join(sys.argv[2], f"{name}_logits.npy"), logits)
            cases.append({"name": name, "ablate": [f"{l}:{h}" for l, h in abl],
                          "temperature": tau, "window": 0,
                          "weights": f"{name}_weights.npy", "logits": f"{name}_logits.npy"})
        with open(os.path.join(sys.argv[2], "cases.json"), "w", encoding="utf-8") as f:
            json.dump({"text": TEXT, "ids": ids, "cases": cases}, f, indent=2)
        return 0
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "fixtures")
    torch.set_num_threads(1)
    for name, shape, seed, dtype, prefix, tied, act, inner, buffers in FIXTURES:
        make_fixture(os.path.join(out, name), shape, seed, dtype, prefix, tied, act, inner,
                     buffers, TEXT, ablate=[(0, 1), (1, 0)], temperature=0.5, window=3,
                     all_cases=name == FIXTURES[0][0])
        print("wrote", os.path.join(out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
