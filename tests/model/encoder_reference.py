#!/usr/bin/python3
"""Random-init encoder folders (BERT, RoBERTa, DistilBERT, ModernBERT) and their float64
reference.

Usage: encoder_reference.py OUTDIR

Writes, under OUTDIR, Hugging Face style folders (config.json, model.safetensors in F32, a
tokenizer: a hand-made WordPiece vocab.txt, or RoBERTa's vocab.json + merges.txt) and .npy
references computed here in float64 from the published architectures (BERT: Devlin et al. 2018,
post-norm Transformer encoder with learned absolute positions, token type embeddings, an
embedding LayerNorm, exact GELU, and the masked-LM head dense -> GELU -> LayerNorm -> tied
decoder + bias; ModernBERT: Warner et al. 2024, pre-norm with bias-free LayerNorms, no norm
before the first layer's attention, fused Wqkv, rotate-half RoPE with a global and a local base,
local layers that see keys within local_attention / 2, GeGLU; with attention_bias, mlp_bias,
norm_bias and classifier_bias true, HF's ModernBERT adds biases to Wqkv and Wo, to the MLP's Wi
and Wo, to every LayerNorm (the embedding norm, each layer's attn_norm and mlp_norm, the final
norm, the head's norm) and to the head's dense layer). cases.json lists what each
reference is for. Nothing here reads attnviz.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

torch.manual_seed(1234)
DTYPE = torch.float64

# A tiny WordPiece vocabulary: the specials, whole words, and a few ## continuations.
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "park", "and", "it", "was",
         "happy", "sun", "is", "bright", "play", "##ing", "##s", "##ed", "in", "house", ".", ","]
VOCAB = SPECIALS + WORDS
# RoBERTa's test vocabulary: single bytes as byte-level BPE writes them (U+0120 is the space).
ROBERTA_CHARS = list("abcdefghijklmnopqrstuvwxyz.,") + ["\u0120"]
RID = {t: 4 + i for i, t in enumerate(ROBERTA_CHARS)}
RID["<mask>"] = 4 + len(ROBERTA_CHARS)


def roberta_bytes(text):
    """Every byte its own token (no merges); "<mask>" the mask token."""
    ids = []
    for part in text.split("<mask>"):
        ids.extend(RID["\u0120" if ch == " " else ch] for ch in part)
        ids.append(RID["<mask>"])
    return ids[:-1]
V = len(VOCAB)
ID = {t: i for i, t in enumerate(VOCAB)}


def wordpiece(text):
    """Lower case, split at spaces and punctuation, longest-match-first pieces."""
    words = []
    for w in text.lower().split():
        cur = ""
        for ch in w:
            if ch in ".,":
                if cur:
                    words.append(cur)
                words.append(ch)
                cur = ""
            else:
                cur += ch
        if cur:
            words.append(cur)
    ids = []
    for w in words:
        if w == "[mask]":
            ids.append(ID["[MASK]"])
            continue
        start, pieces = 0, []
        while start < len(w):
            end = len(w)
            found = None
            while end > start:
                piece = w[start:end] if start == 0 else "##" + w[start:end]
                if piece in ID:
                    found = piece
                    break
                end -= 1
            if found is None:
                pieces = [ID["[UNK]"]]
                break
            pieces.append(ID[found])
            start = end
        ids.extend(pieces)
    return ids


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def rand(*shape, std=0.2):
    return torch.randn(*shape, dtype=DTYPE) * std


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def make_params(d, inner, layers, vocab, positions, types):
    """One encoder's parameters in neutral names."""
    p = {"word": rand(vocab, d, std=0.5), "pos": rand(positions, d),
         "emb_ln_w": 1 + rand(d, std=0.1), "emb_ln_b": rand(d, std=0.1),
         "head_dense_w": rand(d, d, std=0.3), "head_dense_b": rand(d, std=0.1),
         "head_ln_w": 1 + rand(d, std=0.1), "head_ln_b": rand(d, std=0.1),
         "head_bias": rand(vocab, std=0.5), "layers": []}
    if types:
        p["types"] = rand(types, d)
    for _ in range(layers):
        p["layers"].append({
            "q_w": rand(d, d), "q_b": rand(d, std=0.1), "k_w": rand(d, d), "k_b": rand(d, std=0.1),
            "v_w": rand(d, d), "v_b": rand(d, std=0.1), "o_w": rand(d, d), "o_b": rand(d, std=0.1),
            "ln1_w": 1 + rand(d, std=0.1), "ln1_b": rand(d, std=0.1),
            "up_w": rand(inner, d), "up_b": rand(inner, std=0.1),
            "down_w": rand(d, inner), "down_b": rand(d, std=0.1),
            "ln2_w": 1 + rand(d, std=0.1), "ln2_b": rand(d, std=0.1)})
    return p


def forward(p, ids, type_ids, position_ids, heads, eps):
    """The encoder in float64: attention weights [L, H, T, T], hidden [T, d], MLM logits [T, V]."""
    ids = torch.tensor(ids)
    x = p["word"][ids] + p["pos"][torch.tensor(position_ids)]
    if "types" in p:
        x = x + p["types"][torch.tensor(type_ids)]
    x = layer_norm(x, p["emb_ln_w"], p["emb_ln_b"], eps)
    T, d = x.shape
    dh = d // heads
    weights = []
    for L in p["layers"]:
        def split(m):
            return m.view(T, heads, dh).transpose(0, 1)  # [H, T, dh]
        q = split(x @ L["q_w"].T + L["q_b"])
        k = split(x @ L["k_w"].T + L["k_b"])
        v = split(x @ L["v_w"].T + L["v_b"])
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), dim=-1)  # every position sees all
        weights.append(a)
        ctx = (a @ v).transpose(0, 1).reshape(T, d)
        x = layer_norm(ctx @ L["o_w"].T + L["o_b"] + x, L["ln1_w"], L["ln1_b"], eps)
        h = gelu(x @ L["up_w"].T + L["up_b"])
        x = layer_norm(h @ L["down_w"].T + L["down_b"] + x, L["ln2_w"], L["ln2_b"], eps)
    h = layer_norm(gelu(x @ p["head_dense_w"].T + p["head_dense_b"]), p["head_ln_w"],
                   p["head_ln_b"], eps)
    logits = h @ p["word"].T + p["head_bias"]
    return torch.stack(weights), x, logits


def rope(x, theta):
    """Rotate-half RoPE of x [H, T, dh] at positions 0..T-1."""
    dh = x.shape[-1]
    inv = theta ** (-torch.arange(0, dh, 2, dtype=DTYPE) / dh)
    ang = torch.arange(x.shape[1], dtype=DTYPE)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    rot = torch.cat([-x[..., dh // 2:], x[..., :dh // 2]], -1)
    return x * cos + rot * sin


def modernbert_params(d, inner, layers, vocab, biases=False):
    """biases: every bias HF's ModernBERT has when attention_bias, mlp_bias, norm_bias and
    classifier_bias are true (the keys ending in "_b")."""
    p = {"word": rand(vocab, d, std=0.5), "emb_norm": 1 + rand(d, std=0.1),
         "final_norm": 1 + rand(d, std=0.1), "head_dense": rand(d, d, std=0.3),
         "head_norm": 1 + rand(d, std=0.1), "head_bias": rand(vocab, std=0.5), "layers": []}
    if biases:
        p.update(emb_norm_b=rand(d, std=0.3), final_norm_b=rand(d, std=0.3),
                 head_dense_b=rand(d, std=0.3), head_norm_b=rand(d, std=0.3))
    for _ in range(layers):
        L = {"attn_norm": 1 + rand(d, std=0.1), "Wqkv": rand(3 * d, d), "Wo": rand(d, d),
             "mlp_norm": 1 + rand(d, std=0.1), "Wi": rand(2 * inner, d), "Wo2": rand(d, inner)}
        if biases:
            L.update(attn_norm_b=rand(d, std=0.3), Wqkv_b=rand(3 * d, std=0.5),
                     Wo_b=rand(d, std=0.3), mlp_norm_b=rand(d, std=0.3),
                     Wi_b=rand(2 * inner, std=0.3), Wo2_b=rand(d, std=0.3))
        p["layers"].append(L)
    return p


def modernbert_bias_names():
    """The reference's bias keys and their HF names (after "model.layers.N." for a layer's)."""
    return ({"emb_norm_b": "model.embeddings.norm.bias", "final_norm_b": "model.final_norm.bias",
             "head_dense_b": "head.dense.bias", "head_norm_b": "head.norm.bias"},
            {"attn_norm_b": "attn_norm.bias", "Wqkv_b": "attn.Wqkv.bias", "Wo_b": "attn.Wo.bias",
             "mlp_norm_b": "mlp_norm.bias", "Wi_b": "mlp.Wi.bias", "Wo2_b": "mlp.Wo.bias"})


def modernbert_forward(p, ids, cfg):
    heads, eps = cfg["num_attention_heads"], cfg["norm_eps"]
    def ln(x, w, b=0.0):
        return layer_norm(x, w, b, eps)

    def lin(x, L, name):
        y = x @ L[name].T
        return y + L[name + "_b"] if name + "_b" in L else y

    x = ln(p["word"][torch.tensor(ids)], p["emb_norm"], p.get("emb_norm_b", 0.0))
    T, d = x.shape
    dh = d // heads
    weights, stream = [], [x]
    dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs()
    for l, L in enumerate(p["layers"]):
        h = x if l == 0 else ln(x, L["attn_norm"], L.get("attn_norm_b", 0.0))
        q, k, v = lin(h, L, "Wqkv").view(T, 3, heads, dh).permute(1, 2, 0, 3)  # 3 x [H, T, dh]
        glob = l % cfg["global_attn_every_n_layers"] == 0
        theta = cfg["global_rope_theta"] if glob else cfg["local_rope_theta"]
        q, k = rope(q, theta), rope(k, theta)
        s = q @ k.transpose(1, 2) / math.sqrt(dh)
        if not glob:
            s = s.masked_fill(dist > cfg["local_attention"] // 2, float("-inf"))
        a = torch.softmax(s, dim=-1)
        weights.append(a)
        x = x + lin((a @ v).transpose(0, 1).reshape(T, d), L, "Wo")
        inp, gate = lin(ln(x, L["mlp_norm"], L.get("mlp_norm_b", 0.0)), L, "Wi").chunk(2, dim=-1)
        x = x + lin(gelu(inp) * gate, L, "Wo2")
        stream.append(x)
    hidden = ln(x, p["final_norm"], p.get("final_norm_b", 0.0))
    z = ln(gelu(lin(hidden, p, "head_dense")), p["head_norm"], p.get("head_norm_b", 0.0))
    return torch.stack(weights), hidden, z @ p["word"].T + p["head_bias"], torch.stack(stream)


def modernbert_tensors(p):
    t = {"model.embeddings.tok_embeddings.weight": p["word"],
         "model.embeddings.norm.weight": p["emb_norm"], "model.final_norm.weight": p["final_norm"],
         "head.dense.weight": p["head_dense"], "head.norm.weight": p["head_norm"],
         "decoder.bias": p["head_bias"]}
    for l, L in enumerate(p["layers"]):
        pre = "model.layers.%d." % l
        if l > 0:
            t[pre + "attn_norm.weight"] = L["attn_norm"]
        t[pre + "attn.Wqkv.weight"], t[pre + "attn.Wo.weight"] = L["Wqkv"], L["Wo"]
        t[pre + "mlp_norm.weight"] = L["mlp_norm"]
        t[pre + "mlp.Wi.weight"], t[pre + "mlp.Wo.weight"] = L["Wi"], L["Wo2"]
    glob, layer = modernbert_bias_names()
    for key, name in glob.items():
        if key in p:
            t[name] = p[key]
    for l, L in enumerate(p["layers"]):
        for key, name in layer.items():
            if key in L and not (l == 0 and key == "attn_norm_b"):  # layer 0: no attn_norm
                t["model.layers.%d.%s" % (l, name)] = L[key]
    return t


def bert_tensors(p, prefix, head, legacy=False):
    t = {prefix + "embeddings.word_embeddings.weight": p["word"],
         prefix + "embeddings.position_embeddings.weight": p["pos"],
         prefix + "embeddings.token_type_embeddings.weight": p["types"],
         prefix + "embeddings.LayerNorm.weight": p["emb_ln_w"],
         prefix + "embeddings.LayerNorm.bias": p["emb_ln_b"]}
    for i, L in enumerate(p["layers"]):
        b = prefix + "encoder.layer.%d." % i
        for name, key in [("attention.self.query", "q"), ("attention.self.key", "k"),
                          ("attention.self.value", "v"), ("attention.output.dense", "o"),
                          ("intermediate.dense", "up"), ("output.dense", "down")]:
            t[b + name + ".weight"] = L[key + "_w"]
            t[b + name + ".bias"] = L[key + "_b"]
        t[b + "attention.output.LayerNorm.weight"] = L["ln1_w"]
        t[b + "attention.output.LayerNorm.bias"] = L["ln1_b"]
        t[b + "output.LayerNorm.weight"] = L["ln2_w"]
        t[b + "output.LayerNorm.bias"] = L["ln2_b"]
    if legacy:  # TensorFlow-converted checkpoints: LayerNorm.gamma / LayerNorm.beta
        t = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                      "LayerNorm.beta"): v
             for k, v in t.items()}
    if head == "bert":
        t["cls.predictions.transform.dense.weight"] = p["head_dense_w"]
        t["cls.predictions.transform.dense.bias"] = p["head_dense_b"]
        t["cls.predictions.transform.LayerNorm.weight"] = p["head_ln_w"]
        t["cls.predictions.transform.LayerNorm.bias"] = p["head_ln_b"]
        t["cls.predictions.bias"] = p["head_bias"]  # the decoder itself is tied (not saved)
    elif head == "roberta":
        t["lm_head.dense.weight"] = p["head_dense_w"]
        t["lm_head.dense.bias"] = p["head_dense_b"]
        t["lm_head.layer_norm.weight"] = p["head_ln_w"]
        t["lm_head.layer_norm.bias"] = p["head_ln_b"]
        t["lm_head.bias"] = p["head_bias"]
    return t


def distilbert_tensors(p):
    t = {"distilbert.embeddings.word_embeddings.weight": p["word"],
         "distilbert.embeddings.position_embeddings.weight": p["pos"],
         "distilbert.embeddings.LayerNorm.weight": p["emb_ln_w"],
         "distilbert.embeddings.LayerNorm.bias": p["emb_ln_b"],
         "vocab_transform.weight": p["head_dense_w"], "vocab_transform.bias": p["head_dense_b"],
         "vocab_layer_norm.weight": p["head_ln_w"], "vocab_layer_norm.bias": p["head_ln_b"],
         "vocab_projector.weight": p["word"], "vocab_projector.bias": p["head_bias"]}
    for i, L in enumerate(p["layers"]):
        b = "distilbert.transformer.layer.%d." % i
        for name, key in [("attention.q_lin", "q"), ("attention.k_lin", "k"),
                          ("attention.v_lin", "v"), ("attention.out_lin", "o"),
                          ("ffn.lin1", "up"), ("ffn.lin2", "down")]:
            t[b + name + ".weight"] = L[key + "_w"]
            t[b + name + ".bias"] = L[key + "_b"]
        t[b + "sa_layer_norm.weight"] = L["ln1_w"]
        t[b + "sa_layer_norm.bias"] = L["ln1_b"]
        t[b + "output_layer_norm.weight"] = L["ln2_w"]
        t[b + "output_layer_norm.bias"] = L["ln2_b"]
    return t


def save(path, t):
    np.save(path, t.numpy().astype(np.float32))


def write_folder(folder, config, tensors, tokenizer):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    if tokenizer == "wordpiece":
        with open(os.path.join(folder, "vocab.txt"), "w") as f:
            f.write("\n".join(VOCAB) + "\n")
    else:  # RoBERTa's byte-level BPE in a tokenizer.json with its RobertaProcessing template
        specials = ["<s>", "<pad>", "</s>", "<unk>"]
        vocab = {t: i for i, t in enumerate(specials + ROBERTA_CHARS + ["<mask>"])}
        added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": False, "special": True}
                 for t in specials + ["<mask>"]]
        tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
               "normalizer": None,
               "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                                 "trim_offsets": True, "use_regex": True},
               "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2],
                                  "cls": ["<s>", 0], "trim_offsets": True,
                                  "add_prefix_space": False},
               "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                           "use_regex": True},
               "model": {"type": "BPE", "dropout": None, "unk_token": None,
                         "continuing_subword_prefix": "", "end_of_word_suffix": "",
                         "fuse_unk": False, "vocab": vocab, "merges": []}}
        with open(os.path.join(folder, "tokenizer.json"), "w") as f:
            json.dump(tok, f)
        return len(vocab)
    return V


def run_case(out, name, p, ids, types, positions, heads, eps, cases, folder, top_k=3, **extra):
    w, hidden, logits = forward(p, ids, types, positions, heads, eps)
    save(os.path.join(out, name + "_weights.npy"), w)
    save(os.path.join(out, name + "_hidden.npy"), hidden)
    save(os.path.join(out, name + "_logits.npy"), logits)
    case = {"name": name, "folder": folder, "ids": ids, "types": types}
    mask = extra.pop("mask_id", ID["[MASK]"])
    fill = []
    for t, i in enumerate(ids):
        if i == mask:
            prob = torch.softmax(logits[t], dim=-1)
            order = torch.argsort(prob, descending=True)
            top = [int(v) for v in order[:top_k]]
            gaps = [float(prob[order[j]] - prob[order[j + 1]]) for j in range(top_k)]
            assert min(gaps) > 1e-4, "top-k too close to call: %s" % gaps
            fill.append({"position": t, "ids": top, "probs": [float(prob[v]) for v in top]})
    case["fill"] = fill
    case.update(extra)
    cases.append(case)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    d, heads, layers, inner, max_pos, eps = 32, 4, 2, 64, 40, 1e-12
    cases = []

    # BERT: BertForMaskedLM ("bert." + cls.predictions) and BertModel (no head, and the legacy
    # gamma/beta names of its LayerNorms).
    bert = make_params(d, inner, layers, V, max_pos, 2)
    cfg = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": d,
           "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": inner,
           "max_position_embeddings": max_pos, "vocab_size": V, "type_vocab_size": 2,
           "layer_norm_eps": eps, "hidden_act": "gelu", "position_embedding_type": "absolute",
           "pad_token_id": 0}
    write_folder(os.path.join(out, "bert_mlm"), cfg, bert_tensors(bert, "bert.", "bert"),
                 "wordpiece")
    base_cfg = dict(cfg, architectures=["BertModel"])
    write_folder(os.path.join(out, "bert_base"), base_cfg, bert_tensors(bert, "", None, legacy=True),
                 "wordpiece")
    text = "The cat sat on the [MASK] and played."
    ids = [ID["[CLS]"]] + wordpiece(text) + [ID["[SEP]"]]
    run_case(out, "bert_single", bert, ids, [0] * len(ids), list(range(len(ids))), heads, eps,
             cases, "bert_mlm", text=text)
    a, b = "The dog ran to the park.", "It was [MASK] in the sun."
    ia, ib = wordpiece(a), wordpiece(b)
    ids = [ID["[CLS]"]] + ia + [ID["[SEP]"]] + ib + [ID["[SEP]"]]
    types = [0] * (len(ia) + 2) + [1] * (len(ib) + 1)
    run_case(out, "bert_pair", bert, ids, types, list(range(len(ids))), heads, eps, cases,
             "bert_mlm", text=a, text_pair=b)

    # RoBERTa: positions from padding_idx + 1, one token type, the lm_head.
    rvocab = 4 + len(ROBERTA_CHARS) + 1
    rob = make_params(d, inner, layers, rvocab, max_pos + 2, 1)
    rcfg = dict(cfg, model_type="roberta", architectures=["RobertaForMaskedLM"],
                vocab_size=rvocab, type_vocab_size=1, pad_token_id=1, bos_token_id=0,
                eos_token_id=2, max_position_embeddings=max_pos + 2, layer_norm_eps=1e-5)
    write_folder(os.path.join(out, "roberta_mlm"), rcfg, bert_tensors(rob, "roberta.", "roberta"),
                 "bpe")
    # <s> A </s></s> B </s>: RoBERTa has one token type, so the model runs on zeros.
    a, b = "the cat sat.", "a dog<mask>ran"
    rids = [0] + roberta_bytes(a) + [2, 2] + roberta_bytes(b) + [2]
    run_case(out, "roberta_pair", rob, rids, [0] * len(rids), [2 + t for t in range(len(rids))],
             heads, 1e-5, cases, "roberta_mlm", mask_id=RID["<mask>"], text=a, text_pair=b)

    # DistilBERT: its own names, no token types.
    dist = make_params(d, inner, layers, V, max_pos, 0)
    dcfg = {"model_type": "distilbert", "architectures": ["DistilBertForMaskedLM"], "dim": d,
            "n_layers": layers, "n_heads": heads, "hidden_dim": inner,
            "max_position_embeddings": max_pos, "vocab_size": V, "activation": "gelu",
            "sinusoidal_pos_embds": False, "pad_token_id": 0}
    write_folder(os.path.join(out, "distilbert_mlm"), dcfg, distilbert_tensors(dist), "wordpiece")
    text = "A dog is [MASK] in the house."
    ids = [ID["[CLS]"]] + wordpiece(text) + [ID["[SEP]"]]
    run_case(out, "distilbert_single", dist, ids, [0] * len(ids), list(range(len(ids))), heads,
             1e-12, cases, "distilbert_mlm", text=text)

    # ModernBERT: three layers, global (0 and 2) and local (1, window 4: |i - j| <= 2) with
    # their own RoPE bases, run on 14 tokens so the window cuts.
    mb = modernbert_params(d, inner, 3, V)
    mcfg = {"model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"],
            "hidden_size": d, "num_hidden_layers": 3, "num_attention_heads": heads,
            "intermediate_size": inner, "max_position_embeddings": 64, "vocab_size": V,
            "norm_eps": 1e-5, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
            "local_attention": 4, "global_attn_every_n_layers": 2, "hidden_activation": "gelu",
            "classifier_activation": "gelu", "attention_bias": False, "mlp_bias": False,
            "norm_bias": False, "decoder_bias": True, "tie_word_embeddings": True,
            "pad_token_id": 0}
    write_folder(os.path.join(out, "modernbert_mlm"), mcfg, modernbert_tensors(mb), "wordpiece")
    text = "The cat sat on the [MASK] in the sun and played."
    ids = [ID["[CLS]"]] + wordpiece(text) + [ID["[SEP]"]]
    w, hidden, logits, stream = modernbert_forward(mb, ids, mcfg)
    for what, t in (("weights", w), ("hidden", hidden), ("logits", logits), ("residual", stream)):
        save(os.path.join(out, "modernbert_%s.npy" % what), t)
    cases.append({"name": "modernbert", "folder": "modernbert_mlm", "ids": ids,
                  "types": [0] * len(ids), "fill": []})

    # ModernBERT with attention_bias, mlp_bias, norm_bias and classifier_bias true: every bias
    # read and added where HF adds it (the reference without them differs).
    mbb = modernbert_params(d, inner, 3, V, biases=True)
    bcfg = dict(mcfg, attention_bias=True, mlp_bias=True, norm_bias=True, classifier_bias=True)
    write_folder(os.path.join(out, "modernbert_bias_mlm"), bcfg, modernbert_tensors(mbb),
                 "wordpiece")
    w, hidden, logits, stream = modernbert_forward(mbb, ids, bcfg)
    nob = dict(mbb, layers=[{k: v for k, v in L.items() if not k.endswith("_b")}
                            for L in mbb["layers"]])
    nob = {k: v for k, v in nob.items() if not k.endswith("_b")}
    w0, _, z0, _ = modernbert_forward(nob, ids, bcfg)
    assert float((w0 - w).abs().max()) > 1e-3 and float((z0 - logits).abs().max()) > 1e-2
    for what, t in (("weights", w), ("hidden", hidden), ("logits", logits), ("residual", stream)):
        save(os.path.join(out, "modernbert_bias_%s.npy" % what), t)
    cases.append({"name": "modernbert_bias", "folder": "modernbert_bias_mlm", "ids": ids,
                  "types": [0] * len(ids), "fill": []})

    # Bad folders: an unsupported position embedding type, heads that do not divide d.
    write_folder(os.path.join(out, "bad_position_type"),
                 dict(cfg, position_embedding_type="relative_key"),
                 bert_tensors(bert, "bert.", "bert"), "wordpiece")
    write_folder(os.path.join(out, "bad_heads"), dict(cfg, num_attention_heads=5),
                 bert_tensors(bert, "bert.", "bert"), "wordpiece")

    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
