#!/usr/bin/python3
"""The float64 torch reference for the shipped encoder-decoder (assets/models/kjv-t5-align).

Usage: shipped_t5_reference.py OUTDIR

Reads the folder's model.safetensors with its own parser (numpy, no attnviz), casts every tensor
to float64 and runs seq2seq_reference.py's t5_forward (T5 v1.1 from the published architecture)
on the first clauses the card lists (card.json). Writes, for clause c: cross_c.npy (the cross
weights [L_dec, H, T_tgt, T_src] with the target given as decoder_start + its pieces without
EOS) and cases.json: the source and target texts, their ids (python3-sentencepiece on
spiece.model, EOS appended) and the greedy ids, each step the argmax of the last row's logits
(pad never picked) until EOS.
"""
import json
import os
import struct
import sys

import numpy as np
import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import seq2seq_reference as ref  # noqa: E402

MODEL = os.path.join(HERE, "..", "..", "assets", "models", "kjv-t5-align")
CLAUSES = 6


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", name
        b, end = e["data_offsets"]
        out[name] = torch.from_numpy(
            np.frombuffer(data[b:end], dtype="<f4").reshape(e["shape"]).astype(np.float64))
    return out


def params(t, cfg):
    """HF T5 names -> t5_forward's names (the inverse of seq2seq_reference.t5_tensors)."""
    p = {"shared": t["shared.weight"], "lm_head": t["lm_head.weight"],
         "enc.final": t["encoder.final_layer_norm.weight"],
         "dec.final": t["decoder.final_layer_norm.weight"],
         "enc.rel": t["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"],
         "dec.rel": t["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]}
    for stack, hf, n in (("enc", "encoder", cfg["num_layers"]),
                         ("dec", "decoder", cfg["num_decoder_layers"])):
        for l in range(n):
            src, dst = "%s.%d." % (stack, l), "%s.block.%d.layer." % (hf, l)
            subs = [("self.", "SelfAttention")] + ([("cross.", "EncDecAttention")]
                                                   if stack == "dec" else [])
            for k, (site, name) in enumerate(subs):
                p[src + site + "ln"] = t[dst + "%d.layer_norm.weight" % k]
                for m in "qkvo":
                    p[src + site + m] = t[dst + "%d.%s.%s.weight" % (k, name, m)]
            k = len(subs)
            p[src + "ff.ln"] = t[dst + "%d.layer_norm.weight" % k]
            for w in ("wi_0", "wi_1", "wo"):
                p[src + "ff." + w] = t[dst + "%d.DenseReluDense.%s.weight" % (k, w)]
    return p


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(MODEL, "card.json")) as f:
        card = json.load(f)
    p = params(read_safetensors(os.path.join(MODEL, "model.safetensors")), cfg)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(MODEL, "spiece.model"))
    eos, pad = cfg["eos_token_id"], cfg["pad_token_id"]
    cases = []
    for c, (source, target) in enumerate(zip(card["clauses"][:CLAUSES],
                                             card["targets"][:CLAUSES])):
        src, tgt = sp.encode(source) + [eos], sp.encode(target) + [eos]
        dec = [cfg["decoder_start_token_id"]] + tgt[:-1]
        _, _, cross, _, _ = ref.t5_forward(p, cfg, src, dec)
        np.save(os.path.join(out, "cross_%d.npy" % c), cross.numpy())
        g = [cfg["decoder_start_token_id"]]
        margin = float("inf")
        for _ in range(24):
            z = ref.t5_forward(p, cfg, src, g)[3][-1].clone()
            z[pad] = float("-inf")
            top = torch.topk(z, 2)
            margin = min(margin, float(top.values[0] - top.values[1]))
            g.append(int(top.indices[0]))
            if g[-1] == eos:
                break
        cases.append({"source": source, "target": target, "source_ids": src, "target_ids": tgt,
                      "greedy": g[1:], "min_margin": margin})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    # Every clause of the card: its ids and the word of each piece (a piece that starts with
    # U+2581 starts a word; the source's EOS is -1), for the test's own AER count.
    words = []
    for source, target in zip(card["clauses"], card["targets"]):
        src, tgt = sp.encode(source, out_type=str), sp.encode(target, out_type=str)

        def word(pieces):
            w, out = -1, []
            for q in pieces:
                w += q.startswith("\u2581") or w < 0
                out.append(w)
            return out
        words.append({"source": source, "target": target,
                      "target_ids": sp.encode(target) + [eos],
                      "source_words": word(src) + [-1], "target_words": word(tgt)})
    with open(os.path.join(out, "words.json"), "w") as f:
        json.dump(words, f)


if __name__ == "__main__":
    main()
