#!/usr/bin/python3
"""The float64 torch reference for the shipped BERT-layout model (assets/models/kjv-wp-bert), run
by shipped_bert_test.cpp at test time:

    /usr/bin/python3 tests/model/shipped_bert_reference.py OUT_DIR

It reads the shipped config.json, vocab.txt and model.safetensors (F32, widened to float64),
tokenizes with its own WordPiece (lower case, split at whitespace and punctuation,
longest-match-first "##" pieces, [CLS] A [SEP] B [SEP] with token types 0 then 1) and runs
encoder_reference.py's BERT forward pass (written from Devlin et al. 2018, not from attnviz's
code). OUT_DIR gets:
  pair.json, weights.npy, logits.npy   a held-out verse pair: {"a", "b", "ids", "types"} and
                                       the float32 weights [L, H, T, T] and logits [T, V]
  fill.json     texts with [MASK]: for each mask position the reference's top 5 ids and
                probabilities
  card.json     the model card's figures recomputed here from head_scores.json's texts and
                ids: the [SEP], next-token and after-the-row shares of the card's named heads
                (mean over its pairs), the presets' shares, fill top-1 / top-5 on its items
A few seconds on one core.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from encoder_reference import forward  # noqa: E402

MODEL = os.environ.get("SHIPPED_BERT_DIR",
                       os.path.join(HERE, "..", "..", "assets", "models", "kjv-wp-bert"))
# Hebrews 11:1 and 11:2 (held out).
PAIR = ("Now faith is the substance of things hoped for, the evidence of things not seen.",
        "For by it the elders obtained a good report.")
FILL = ["For God is [MASK].",
        "Grace be with you all. [MASK].",
        "Blessed is he that readeth, and they that hear the words of this [MASK].",
        "And the [MASK] of God be with you."]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32", name
        a, b = h["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype="<f4").reshape(h["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float64))
    return out


def params(t, layers):
    e, c = "bert.embeddings.", "cls.predictions."
    p = {"word": t[e + "word_embeddings.weight"], "pos": t[e + "position_embeddings.weight"],
         "types": t[e + "token_type_embeddings.weight"],
         "emb_ln_w": t[e + "LayerNorm.weight"], "emb_ln_b": t[e + "LayerNorm.bias"],
         "head_dense_w": t[c + "transform.dense.weight"],
         "head_dense_b": t[c + "transform.dense.bias"],
         "head_ln_w": t[c + "transform.LayerNorm.weight"],
         "head_ln_b": t[c + "transform.LayerNorm.bias"], "head_bias": t[c + "bias"],
         "layers": []}
    names = {"q": "attention.self.query", "k": "attention.self.key",
             "v": "attention.self.value", "o": "attention.output.dense",
             "ln1": "attention.output.LayerNorm", "up": "intermediate.dense",
             "down": "output.dense", "ln2": "output.LayerNorm"}
    for i in range(layers):
        L = {}
        for mine, hf in names.items():
            L[mine + "_w"] = t[f"bert.encoder.layer.{i}.{hf}.weight"]
            L[mine + "_b"] = t[f"bert.encoder.layer.{i}.{hf}.bias"]
        p["layers"].append(L)
    return p


class WordPiece:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.vocab = f.read().split("\n")[:-1]
        self.id = {p: i for i, p in enumerate(self.vocab)}

    def words(self, text):
        out = []
        for chunk in text.lower().split():
            cur = ""
            for ch in chunk:
                if not ch.isalnum():
                    if cur:
                        out.append(cur)
                    out.append(ch)
                    cur = ""
                else:
                    cur += ch
            if cur:
                out.append(cur)
        return out

    def encode(self, text):
        ids = []
        for k, part in enumerate(text.split("[MASK]")):
            if k:
                ids.append(self.id["[MASK]"])
            for w in self.words(part):
                start, pieces = 0, []
                while start < len(w):
                    end = len(w)
                    while end > start:
                        piece = w[start:end] if start == 0 else "##" + w[start:end]
                        if piece in self.id:
                            break
                        end -= 1
                    if end == start:
                        pieces = [self.id["[UNK]"]]
                        break
                    pieces.append(self.id[piece])
                    start = end
                ids.extend(pieces)
        return ids

    def single(self, a):
        return [self.id["[CLS]"]] + self.encode(a) + [self.id["[SEP]"]], None

    def pair(self, a, b):
        x, y = self.encode(a), self.encode(b)
        ids = [self.id["[CLS]"]] + x + [self.id["[SEP]"]] + y + [self.id["[SEP]"]]
        return ids, [0] * (len(x) + 2) + [1] * (len(y) + 1)


def main():
    out = sys.argv[1]
    with open(os.path.join(MODEL, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    heads, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    p = params(read_safetensors(os.path.join(MODEL, "model.safetensors")),
               cfg["num_hidden_layers"])
    tok = WordPiece(os.path.join(MODEL, "vocab.txt"))
    sep = tok.id["[SEP]"]

    def run(ids, types=None):
        types = types or [0] * len(ids)
        with torch.no_grad():
            return forward(p, ids, types, list(range(len(ids))), heads, eps)

    ids, types = tok.pair(*PAIR)
    w, _, z = run(ids, types)
    np.save(os.path.join(out, "weights.npy"), w.numpy().astype(np.float32))
    np.save(os.path.join(out, "logits.npy"), z.numpy().astype(np.float32))
    with open(os.path.join(out, "pair.json"), "w") as f:
        json.dump({"a": PAIR[0], "b": PAIR[1], "ids": ids, "types": types}, f)

    fills = []
    for text in FILL:
        ids, _ = tok.single(text)
        _, _, z = run(ids)
        pr = torch.softmax(z, dim=-1)
        masks = []
        for pos in [i for i, t in enumerate(ids) if t == tok.id["[MASK]"]]:
            top = torch.argsort(-z[pos], stable=True)[:5]
            masks.append({"position": pos, "ids": top.tolist(),
                          "probs": pr[pos, top].tolist(),
                          "margin": float(z[pos, top[3]] - z[pos, top[4]])})
        fills.append({"text": text, "ids": ids, "masks": masks})
    with open(os.path.join(out, "fill.json"), "w") as f:
        json.dump(fills, f)

    # the card's figures, from head_scores.json's texts and ids
    with open(os.path.join(MODEL, "head_scores.json"), encoding="utf-8") as f:
        s = json.load(f)

    def shares(w, ids):
        w = w.numpy()
        T = w.shape[-1]
        i = np.arange(T)
        seps = [j for j, t in enumerate(ids) if t == sep]
        return {"sep": w[..., seps].sum(-1).mean(-1),
                "next": w[..., i[:-1], i[:-1] + 1].mean(-1),
                "prev": w[..., i[1:], i[1:] - 1].mean(-1),
                "after": (w * np.triu(np.ones((T, T)), 1)).sum(-1).mean(-1)}

    acc = {}
    for pr_ in s["pairs"]["texts"]:
        ids, types = tok.pair(pr_["a"], pr_["b"])
        for k, v in shares(run(ids, types)[0], ids).items():
            acc.setdefault(k, []).append(v)
    card = {"pairs": {k: np.mean(v, axis=0).tolist() for k, v in acc.items()}, "presets": {}}
    for name, pre in s["presets"].items():
        ids, _ = tok.single(pre["text"])
        card["presets"][name] = {"ids": ids, **{k: v.tolist() for k, v in
                                                shares(run(ids)[0], ids).items()}}
    n = top1 = top5 = 0
    for it in s["fill"]["items"]:
        ids = list(it["ids"])
        for q in it["positions"]:
            ids[q] = tok.id["[MASK]"]
        z = run(ids)[2]
        for q in it["positions"]:
            top = torch.argsort(-z[q], stable=True)[:5].tolist()
            n += 1
            top1 += top[0] == it["ids"][q]
            top5 += it["ids"][q] in top
    card["fill"] = {"masked": n, "top1": top1 / n, "top5": top5 / n}
    with open(os.path.join(out, "card.json"), "w") as f:
        json.dump(card, f)


if __name__ == "__main__":
    main()
