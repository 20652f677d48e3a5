#!/usr/bin/python3
"""Random-init encoder-decoder folders (BART, Marian, T5) and their float64 reference.

Usage: seq2seq_reference.py OUTDIR

Writes, under OUTDIR, Hugging Face style folders (config.json, model.safetensors in F32, a
byte-level BPE tokenizer.json) and .npy references computed here in float64 from the published
architecture (BART: Lewis et al. 2019, a post-norm Transformer encoder-decoder; learned absolute
positions read at position + 2, an embedding LayerNorm in each stack, GELU, a cross-attention
site in every decoder layer whose keys and values are the encoder's last hidden states, the tied
unembedding plus final_logits_bias; Marian, Junczys-Dowmunt et al. 2018 as Hugging Face's
MarianMT holds it: the same layers with fixed sinusoidal positions (sines in the first half of
each row, cosines in the second), no embedding LayerNorm, embeddings x sqrt(d), SiLU, and two
SentencePiece models, trained here with python3-sentencepiece, over one vocab.json).
T5: Raffel et al. 2020, pre-RMS-norm stacks without biases, no score scaling, a relative
position bias per head and bucket in each stack's self attention (bidirectional buckets in the
encoder, causal in the decoder, none in cross attention), final norms, ReLU (v1.0, tied head
reading the states times d^-1/2) or gated GELU (v1.1, untied); spiece.model with </s> appended).
cases.json lists what each reference is for. Nothing here reads attnviz.
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "formats"))
from safetensors_py import write_file  # noqa: E402

torch.manual_seed(4321)
DTYPE = torch.float64

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
CHARS = list("abcdefghijklmnopqrstuvwxyz.,") + ["\u0120"]
VOCAB = SPECIALS + CHARS + ["<mask>"]
V = len(VOCAB)
ID = {t: i for i, t in enumerate(VOCAB)}
BOS, PAD, EOS = 0, 1, 2


def rand(*shape, std=0.3):
    return torch.randn(*shape, dtype=DTYPE) * std


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def act(x, name):
    if name == "gelu":
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    if name == "relu":
        return torch.relu(x)
    if name in ("silu", "swish"):
        return x * torch.sigmoid(x)
    raise ValueError(name)


def attention(p, pre, xq, xkv, heads, causal):
    """Multi-head attention: q from xq, k and v from xkv; returns (output, weights [H, Tq, Tk])."""
    Tq, d = xq.shape
    Tk = xkv.shape[0]
    dh = d // heads
    q = (xq @ p[pre + "q.w"].T + p[pre + "q.b"]) * dh ** -0.5
    k = xkv @ p[pre + "k.w"].T + p[pre + "k.b"]
    v = xkv @ p[pre + "v.w"].T + p[pre + "v.b"]
    q = q.view(Tq, heads, dh).transpose(0, 1)
    k = k.view(Tk, heads, dh).transpose(0, 1)
    v = v.view(Tk, heads, dh).transpose(0, 1)
    s = q @ k.transpose(1, 2)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(Tq, Tk, dtype=torch.bool), 1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    o = (w @ v).transpose(0, 1).reshape(Tq, d)
    return o @ p[pre + "o.w"].T + p[pre + "o.b"], w


def make_params(d, inner, enc_layers, dec_layers, max_pos):
    p = {"shared": rand(V, d)}
    for stack, n in (("enc", enc_layers), ("dec", dec_layers)):
        p[stack + ".pos"] = rand(max_pos + 2, d)
        p[stack + ".ln_emb.w"] = 1 + rand(d, std=0.1)
        p[stack + ".ln_emb.b"] = rand(d, std=0.1)
        for l in range(n):
            pre = "%s.%d." % (stack, l)
            sites = ["self."] + (["cross."] if stack == "dec" else [])
            for s in sites:
                for m in "qkvo":
                    p[pre + s + m + ".w"] = rand(d, d)
                    p[pre + s + m + ".b"] = rand(d, std=0.1)
                p[pre + s + "ln.w"] = 1 + rand(d, std=0.1)
                p[pre + s + "ln.b"] = rand(d, std=0.1)
            p[pre + "fc1.w"], p[pre + "fc1.b"] = rand(inner, d), rand(inner, std=0.1)
            p[pre + "fc2.w"], p[pre + "fc2.b"] = rand(d, inner), rand(d, std=0.1)
            p[pre + "ffn_ln.w"], p[pre + "ffn_ln.b"] = 1 + rand(d, std=0.1), rand(d, std=0.1)
    p["final_logits_bias"] = rand(1, V, std=0.5)
    return p


def sinusoids(n, d):
    """Row p: sin(p / 10000^(2j/d)) for j < d/2, then cos of the same angles."""
    pos = torch.arange(n, dtype=DTYPE)[:, None]
    inv = 10000.0 ** (-2.0 * torch.arange(d // 2, dtype=DTYPE) / d)
    return torch.cat([torch.sin(pos * inv), torch.cos(pos * inv)], dim=1)


def embed(p, cfg, stack, ids, scale):
    if cfg["model_type"] == "marian":
        return p["shared"][ids] * scale + sinusoids(len(ids), cfg["d_model"])
    x = p["shared"][ids] * scale + p[stack + ".pos"][torch.arange(len(ids)) + 2]
    return layer_norm(x, p[stack + ".ln_emb.w"], p[stack + ".ln_emb.b"])


def forward(p, cfg, src, tgt):
    heads, activation = cfg["encoder_attention_heads"], cfg["activation_function"]
    scale = math.sqrt(cfg["d_model"]) if cfg.get("scale_embedding") else 1.0
    x = embed(p, cfg, "enc", torch.tensor(src), scale)
    enc_w = []
    for l in range(cfg["encoder_layers"]):
        pre = "enc.%d." % l
        o, w = attention(p, pre + "self.", x, x, heads, False)
        enc_w.append(w)
        x = layer_norm(x + o, p[pre + "self.ln.w"], p[pre + "self.ln.b"])
        h = act(x @ p[pre + "fc1.w"].T + p[pre + "fc1.b"], activation)
        x = layer_norm(x + h @ p[pre + "fc2.w"].T + p[pre + "fc2.b"], p[pre + "ffn_ln.w"],
                       p[pre + "ffn_ln.b"])
    enc = x
    y = embed(p, cfg, "dec", torch.tensor(tgt), scale)
    dec_w, cross_w = [], []
    for l in range(cfg["decoder_layers"]):
        pre = "dec.%d." % l
        o, w = attention(p, pre + "self.", y, y, heads, True)
        dec_w.append(w)
        y = layer_norm(y + o, p[pre + "self.ln.w"], p[pre + "self.ln.b"])
        o, w = attention(p, pre + "cross.", y, enc, heads, False)
        cross_w.append(w)
        y = layer_norm(y + o, p[pre + "cross.ln.w"], p[pre + "cross.ln.b"])
        h = act(y @ p[pre + "fc1.w"].T + p[pre + "fc1.b"], activation)
        y = layer_norm(y + h @ p[pre + "fc2.w"].T + p[pre + "fc2.b"], p[pre + "ffn_ln.w"],
                       p[pre + "ffn_ln.b"])
    logits = y @ p["shared"].T + p["final_logits_bias"][0]
    return (torch.stack(enc_w), torch.stack(dec_w), torch.stack(cross_w), logits, enc)


def greedy(p, cfg, src, steps):
    """Greedy decoding from decoder_start_token_id, never the pad token, stopping at EOS."""
    tgt = [cfg["decoder_start_token_id"]]
    for _ in range(steps):
        z = forward(p, cfg, src, tgt)[3][-1].clone()
        z[cfg["pad_token_id"]] = float("-inf")
        order = torch.argsort(z, descending=True)
        assert float(z[order[0]] - z[order[1]]) > 1e-4, "greedy step too close to call"
        tgt.append(int(order[0]))
        if tgt[-1] == cfg["eos_token_id"]:
            break
    return tgt


def hf_tensors(p, cfg):
    """BartForConditionalGeneration's (and MarianMTModel's) names; the embeddings stored once
    (model.shared); Marian has no positions table nor embedding LayerNorm."""
    t = {"model.shared.weight": p["shared"], "final_logits_bias": p["final_logits_bias"]}
    marian = cfg["model_type"] == "marian"
    names = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "out_proj"}
    for stack, hf, n in (("enc", "encoder", cfg["encoder_layers"]),
                         ("dec", "decoder", cfg["decoder_layers"])):
        if not marian:
            t["model.%s.embed_positions.weight" % hf] = p[stack + ".pos"]
            t["model.%s.layernorm_embedding.weight" % hf] = p[stack + ".ln_emb.w"]
            t["model.%s.layernorm_embedding.bias" % hf] = p[stack + ".ln_emb.b"]
        for l in range(n):
            src, dst = "%s.%d." % (stack, l), "model.%s.layers.%d." % (hf, l)
            sites = [("self.", "self_attn")] + ([("cross.", "encoder_attn")] if stack == "dec" else [])
            for s, name in sites:
                for m, proj in names.items():
                    t[dst + "%s.%s.weight" % (name, proj)] = p[src + s + m + ".w"]
                    t[dst + "%s.%s.bias" % (name, proj)] = p[src + s + m + ".b"]
                t[dst + name + "_layer_norm.weight"] = p[src + s + "ln.w"]
                t[dst + name + "_layer_norm.bias"] = p[src + s + "ln.b"]
            for m in ("fc1", "fc2"):
                t[dst + m + ".weight"], t[dst + m + ".bias"] = p[src + m + ".w"], p[src + m + ".b"]
            t[dst + "final_layer_norm.weight"] = p[src + "ffn_ln.w"]
            t[dst + "final_layer_norm.bias"] = p[src + "ffn_ln.b"]
    return {k: v.to(torch.float32).numpy() for k, v in t.items()}


def write_folder(folder, cfg, tensors):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_file(os.path.join(folder, "model.safetensors"),
               [(k, "F32", v) for k, v in tensors.items()])
    vocab = {t: i for i, t in enumerate(VOCAB)}
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for t in SPECIALS + ["<mask>"]]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                             "trim_offsets": True, "use_regex": True},
           "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", EOS],
                              "cls": ["<s>", BOS], "trim_offsets": True,
                              "add_prefix_space": False},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": "", "end_of_word_suffix": "",
                     "fuse_unk": False, "vocab": vocab, "merges": []}}
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tok, f)


def text_ids(text):
    """Byte-level pieces of this vocabulary: every character its own token."""
    return [ID["\u0120" if ch == " " else ch] for ch in text]


def save(path, t):
    np.save(path, t.detach().numpy().astype(np.float32))


SOURCE_TEXT = ["the cat sat on the mat", "a dog ran to the park", "the sun is bright",
               "it was a happy dog", "the cat and the dog played in the house",
               "a bird sang in the tree", "the park was green and bright"]
TARGET_TEXT = ["le chat est sur le tapis", "un chien court au parc", "le soleil est clair",
               "c'etait un chien heureux", "le chat et le chien jouent dans la maison",
               "un oiseau chante dans l'arbre", "le parc etait vert et clair"]


def train_spm(prefix, lines, size):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines * 20), model_prefix=prefix, vocab_size=size,
        model_type="unigram", bos_id=-1, eos_id=-1, unk_id=0, hard_vocab_limit=False,
        minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def marian_case(out):
    """A MarianMT folder: source.spm, target.spm, vocab.json (</s> 0, <unk> 1, the pieces of
    both models, <pad> last), and its reference; the text's ids as python3-sentencepiece and
    vocab.json give them (the tokenizer's outside reference)."""
    folder = os.path.join(out, "marian")
    os.makedirs(folder, exist_ok=True)
    src_sp = train_spm(os.path.join(out, "src"), SOURCE_TEXT, 40)
    tgt_sp = train_spm(os.path.join(out, "tgt"), TARGET_TEXT, 40)
    os.replace(os.path.join(out, "src.model"), os.path.join(folder, "source.spm"))
    os.replace(os.path.join(out, "tgt.model"), os.path.join(folder, "target.spm"))
    vocab = {"</s>": 0, "<unk>": 1}
    for sp in (src_sp, tgt_sp):
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if not sp.is_unknown(i) and not sp.is_control(i) and piece not in vocab:
                vocab[piece] = len(vocab)
    pad = vocab["<pad>"] = len(vocab)
    with open(os.path.join(folder, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False)
    n = len(vocab)
    d, heads, inner, layers = 16, 2, 32, 2
    cfg = {"model_type": "marian", "architectures": ["MarianMTModel"], "d_model": d,
           "encoder_layers": layers, "decoder_layers": layers, "encoder_attention_heads": heads,
           "decoder_attention_heads": heads, "encoder_ffn_dim": inner, "decoder_ffn_dim": inner,
           "activation_function": "swish", "max_position_embeddings": 64, "vocab_size": n,
           "decoder_vocab_size": n, "scale_embedding": True, "pad_token_id": pad,
           "eos_token_id": 0, "decoder_start_token_id": pad, "forced_eos_token_id": 0,
           "share_encoder_decoder_embeddings": True, "static_position_embeddings": True,
           "normalize_before": False, "tie_word_embeddings": True}
    global V
    saved, V = V, n
    p = make_params(d, inner, layers, layers, 64)
    V = saved
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_file(os.path.join(folder, "model.safetensors"),
               [(k, "F32", v) for k, v in hf_tensors(p, cfg).items()])
    source_text, target_text = "the cat sat in the park", "le chat est dans le parc"
    src = [vocab.get(s, 1) for s in src_sp.encode(source_text, out_type=str)] + [0]
    target_pieces = [vocab.get(s, 1) for s in tgt_sp.encode(target_text, out_type=str)]
    tgt = [pad] + target_pieces
    enc_w, dec_w, cross_w, logits, _ = forward(p, cfg, src, tgt)
    for what, t in (("enc", enc_w), ("dec", dec_w), ("cross", cross_w), ("logits", logits)):
        save(os.path.join(out, "marian_%s.npy" % what), t)
    return {"name": "marian", "folder": folder, "source": src, "target": tgt,
            "source_text": source_text, "target_text": target_text,
            "target_ids": target_pieces + [0], "greedy": greedy(p, cfg, src, 6)}


def t5_bucket(rel, bidirectional, buckets, max_distance):
    """The bucket of relative positions rel = j - i (a long tensor), in float32 as T5's own."""
    ret = torch.zeros_like(rel)
    if bidirectional:
        buckets //= 2
        ret += (rel > 0).long() * buckets
        n = rel.abs()
    else:
        n = -torch.min(rel, torch.zeros_like(rel))
    max_exact = buckets // 2
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                         * (buckets - max_exact)).long()
    large = torch.min(large, torch.full_like(large, buckets - 1))
    return ret + torch.where(n < max_exact, n, large)


def t5_forward(p, cfg, src, tgt, masked_source=()):
    H, dkv, eps = cfg["num_heads"], cfg["d_kv"], cfg["layer_norm_epsilon"]
    nb, md = cfg["relative_attention_num_buckets"], cfg["relative_attention_max_distance"]
    gated = cfg["feed_forward_proj"].startswith("gated")

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w

    def attend(pre, xq, xkv, bias, causal):
        Tq, Tk = xq.shape[0], xkv.shape[0]
        q = (xq @ p[pre + "q"].T).view(Tq, H, dkv).transpose(0, 1)
        k = (xkv @ p[pre + "k"].T).view(Tk, H, dkv).transpose(0, 1)
        v = (xkv @ p[pre + "v"].T).view(Tk, H, dkv).transpose(0, 1)
        s = q @ k.transpose(1, 2)  # no 1/sqrt(d)
        if bias is not None:
            s = s + bias
        if causal:
            s = s.masked_fill(torch.triu(torch.ones(Tq, Tk, dtype=torch.bool), 1), float("-inf"))
        w = torch.softmax(s, dim=-1)
        return (w @ v).transpose(0, 1).reshape(Tq, H * dkv) @ p[pre + "o"].T, w

    def ff(pre, x):
        if gated:
            a = x @ p[pre + "wi_0"].T
            a = 0.5 * a * (1 + torch.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
            return (a * (x @ p[pre + "wi_1"].T)) @ p[pre + "wo"].T
        return torch.relu(x @ p[pre + "wi"].T) @ p[pre + "wo"].T

    def bias(table, T, bidirectional):
        pos = torch.arange(T)
        b = t5_bucket(pos[None, :] - pos[:, None], bidirectional, nb, md)  # [T, T]
        return table[b].permute(2, 0, 1)  # [H, T, T]

    x = p["shared"][torch.tensor(src)]
    be = bias(p["enc.rel"], len(src), True)
    enc_w = []
    for l in range(cfg["num_layers"]):
        pre = "enc.%d." % l
        o, w = attend(pre + "self.", rms(x, p[pre + "self.ln"]), rms(x, p[pre + "self.ln"]), be,
                      False)
        enc_w.append(w)
        x = x + o
        x = x + ff(pre + "ff.", rms(x, p[pre + "ff.ln"]))
    enc = rms(x, p["enc.final"])
    y = p["shared"][torch.tensor(tgt)]
    bd = bias(p["dec.rel"], len(tgt), False)
    # Masked source positions: -inf in their columns of every cross site (None: no mask).
    cross_bias = None
    if masked_source:
        cross_bias = torch.zeros(len(tgt), len(src), dtype=torch.float64)
        cross_bias[:, list(masked_source)] = float("-inf")
    dec_w, cross_w = [], []
    for l in range(cfg["num_decoder_layers"]):
        pre = "dec.%d." % l
        h = rms(y, p[pre + "self.ln"])
        o, w = attend(pre + "self.", h, h, bd, True)
        dec_w.append(w)
        y = y + o
        o, w = attend(pre + "cross.", rms(y, p[pre + "cross.ln"]), enc, cross_bias, False)
        cross_w.append(w)
        y = y + o
        y = y + ff(pre + "ff.", rms(y, p[pre + "ff.ln"]))
    y = rms(y, p["dec.final"])
    if cfg["tie_word_embeddings"]:
        logits = (y * cfg["d_model"] ** -0.5) @ p["shared"].T
    else:
        logits = y @ p["lm_head"].T
    return torch.stack(enc_w), torch.stack(dec_w), torch.stack(cross_w), logits, enc


def t5_params(cfg, vocab):
    d, H, dkv, dff = cfg["d_model"], cfg["num_heads"], cfg["d_kv"], cfg["d_ff"]
    gated = cfg["feed_forward_proj"].startswith("gated")
    p = {"shared": rand(vocab, d, std=1.0), "enc.final": 1 + rand(d, std=0.1),
         "dec.final": 1 + rand(d, std=0.1), "lm_head": rand(vocab, d),
         "enc.rel": rand(cfg["relative_attention_num_buckets"], H, std=1.0),
         "dec.rel": rand(cfg["relative_attention_num_buckets"], H, std=1.0)}
    for stack, n in (("enc", cfg["num_layers"]), ("dec", cfg["num_decoder_layers"])):
        for l in range(n):
            pre = "%s.%d." % (stack, l)
            for site in ["self."] + (["cross."] if stack == "dec" else []):
                p[pre + site + "ln"] = 1 + rand(d, std=0.1)
                p[pre + site + "q"], p[pre + site + "o"] = rand(H * dkv, d), rand(d, H * dkv)
                # (q and k smaller than the rest: T5 does not scale q.k, and float32 softmax
                # errors grow with the scores)
                p[pre + site + "q"] = rand(H * dkv, d, std=0.15)
                p[pre + site + "k"], p[pre + site + "v"] = rand(H * dkv, d, std=0.15), rand(H * dkv, d)
            p[pre + "ff.ln"] = 1 + rand(d, std=0.1)
            for w in (["wi_0", "wi_1"] if gated else ["wi"]):
                p[pre + "ff." + w] = rand(dff, d)
            p[pre + "ff.wo"] = rand(d, dff)
    return p


def t5_tensors(p, cfg):
    t = {"shared.weight": p["shared"],
         "encoder.final_layer_norm.weight": p["enc.final"],
         "decoder.final_layer_norm.weight": p["dec.final"],
         "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": p["enc.rel"],
         "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": p["dec.rel"]}
    if not cfg["tie_word_embeddings"]:
        t["lm_head.weight"] = p["lm_head"]
    for stack, hf, n in (("enc", "encoder", cfg["num_layers"]),
                         ("dec", "decoder", cfg["num_decoder_layers"])):
        for l in range(n):
            src, dst = "%s.%d." % (stack, l), "%s.block.%d.layer." % (hf, l)
            subs = [("self.", "SelfAttention")] + ([("cross.", "EncDecAttention")]
                                                   if stack == "dec" else [])
            for k, (site, name) in enumerate(subs):
                t[dst + "%d.layer_norm.weight" % k] = p[src + site + "ln"]
                for m in "qkvo":
                    t[dst + "%d.%s.%s.weight" % (k, name, m)] = p[src + site + m]
            k = len(subs)
            t[dst + "%d.layer_norm.weight" % k] = p[src + "ff.ln"]
            for w in ("wi", "wi_0", "wi_1", "wo"):
                if src + "ff." + w in p:
                    t[dst + "%d.DenseReluDense.%s.weight" % (k, w)] = p[src + "ff." + w]
    return {k: v.to(torch.float32).numpy() for k, v in t.items()}


def t5_cases(out):
    """T5 v1.0 (ReLU, tied) and v1.1 (gated GELU, untied, a decoder of another depth), with a
    spiece.model (pad 0, </s> 1, <unk> 2, no BOS) trained here; sources long enough that the
    logarithmic buckets are reached."""
    import sentencepiece as spm
    prefix = os.path.join(out, "t5spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter((SOURCE_TEXT + TARGET_TEXT) * 20), model_prefix=prefix,
        vocab_size=60, model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        hard_vocab_limit=False, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    vocab = sp.get_piece_size()
    cases = []
    source_text = "the cat and the dog played in the park and the sun was bright"
    target_text = "le chat et le chien"
    src = sp.encode(source_text) + [1]
    tgt = [0] + sp.encode(target_text)
    for name, ff, tied, le, ld in (("t5_v10", "relu", True, 2, 2),
                                   ("t5_v11", "gated-gelu", False, 2, 3)):
        cfg = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"],
               "d_model": 24, "d_kv": 8, "num_heads": 4, "d_ff": 40, "num_layers": le,
               "num_decoder_layers": ld, "relative_attention_num_buckets": 8,
               "relative_attention_max_distance": 20, "layer_norm_epsilon": 1e-6,
               "feed_forward_proj": ff, "tie_word_embeddings": tied, "vocab_size": vocab,
               "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0,
               "is_encoder_decoder": True}
        p = t5_params(cfg, vocab)
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        write_file(os.path.join(folder, "model.safetensors"),
                   [(k, "F32", v) for k, v in t5_tensors(p, cfg).items()])
        with open(prefix + ".model", "rb") as f, open(os.path.join(folder, "spiece.model"), "wb") as g:
            g.write(f.read())
        enc_w, dec_w, cross_w, logits, _ = t5_forward(p, cfg, src, tgt)
        for what, t in (("enc", enc_w), ("dec", dec_w), ("cross", cross_w), ("logits", logits)):
            save(os.path.join(out, "%s_%s.npy" % (name, what)), t)
        # The position bias each stack adds (the table at the bucket of j - i), and the buckets
        # themselves over distances past max_distance, for the position-bias view.
        nb, md = cfg["relative_attention_num_buckets"], cfg["relative_attention_max_distance"]
        for what, table, T, bidi in (("enc_bias", p["enc.rel"], len(src), True),
                                     ("dec_bias", p["dec.rel"], len(tgt), False)):
            pos = torch.arange(T)
            b = t5_bucket(pos[None, :] - pos[:, None], bidi, nb, md)
            save(os.path.join(out, "%s_%s.npy" % (name, what)), table[b].permute(2, 0, 1))
        rel = torch.arange(-3 * md, 3 * md + 1)
        buckets = {"distances": rel.tolist(),
                   "bidirectional": t5_bucket(rel, True, nb, md).tolist(),
                   "causal": t5_bucket(rel, False, nb, md).tolist()}
        g = [0]
        for _ in range(6):
            z = t5_forward(p, cfg, src, g)[3][-1].clone()
            z[0] = float("-inf")
            order = torch.argsort(z, descending=True)
            assert float(z[order[0]] - z[order[1]]) > 1e-4, "greedy step too close to call"
            g.append(int(order[0]))
            if g[-1] == 1:
                break
        # Source positions 2 and 5 hidden from every cross site: the weights, the logits and
        # greedy decoding under that mask (attnviz --mask-source 2,5).
        masked = (2, 5)
        _, _, mcross, mlogits, _ = t5_forward(p, cfg, src, tgt, masked)
        save(os.path.join(out, "%s_masked_cross.npy" % name), mcross)
        save(os.path.join(out, "%s_masked_logits.npy" % name), mlogits)
        mg = [0]
        for _ in range(6):
            z = t5_forward(p, cfg, src, mg, masked)[3][-1].clone()
            z[0] = float("-inf")
            order = torch.argsort(z, descending=True)
            assert float(z[order[0]] - z[order[1]]) > 1e-4, "greedy step too close to call"
            mg.append(int(order[0]))
            if mg[-1] == 1:
                break
        cases.append({"name": name, "folder": folder, "source": src, "target": tgt,
                      "source_text": source_text, "target_text": target_text, "greedy": g,
                      "buckets": buckets, "masked_source": list(masked),
                      "masked_greedy": mg})
    return cases


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = []
    variants = [
        # name, d, heads, ffn, enc layers, dec layers, activation, scale_embedding
        ("bart_a", 32, 4, 64, 2, 2, "gelu", False),
        ("bart_b", 24, 2, 40, 3, 1, "relu", True),
    ]
    for name, d, heads, inner, le, ld, activation, scale in variants:
        max_pos = 48
        cfg = {"model_type": "bart", "architectures": ["BartForConditionalGeneration"],
               "d_model": d, "encoder_layers": le, "decoder_layers": ld,
               "encoder_attention_heads": heads, "decoder_attention_heads": heads,
               "encoder_ffn_dim": inner, "decoder_ffn_dim": inner,
               "activation_function": activation, "max_position_embeddings": max_pos,
               "vocab_size": V, "scale_embedding": scale, "pad_token_id": PAD,
               "bos_token_id": BOS, "eos_token_id": EOS, "decoder_start_token_id": EOS,
               "forced_eos_token_id": EOS, "normalize_before": False,
               "add_final_layer_norm": False, "tie_word_embeddings": True}
        p = make_params(d, inner, le, ld, max_pos)
        folder = os.path.join(out, name)
        write_folder(folder, cfg, hf_tensors(p, cfg))
        src = [BOS] + text_ids("the cat sat on the mat.") + [EOS]
        tgt = [EOS, BOS] + text_ids("a dog ran")
        enc_w, dec_w, cross_w, logits, _ = forward(p, cfg, src, tgt)
        for what, t in (("enc", enc_w), ("dec", dec_w), ("cross", cross_w), ("logits", logits)):
            save(os.path.join(out, "%s_%s.npy" % (name, what)), t)
        cases.append({"name": name, "folder": folder, "source": src, "target": tgt,
                      "greedy": greedy(p, cfg, src, 8)})
    cases.append(marian_case(out))
    cases.extend(t5_cases(out))
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


if __name__ == "__main__":
    main()
