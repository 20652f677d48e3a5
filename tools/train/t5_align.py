"""The alignment task of kjv-t5-align, and the batched T5 v1.1 it trains.

Task: a KJV clause (a verse split at its punctuation, lower-cased, 2 to 8 words, every word among
the corpus's most frequent ones) is "translated" word for word through a letter cipher (each
letter shifted along a fixed permutation of the alphabet) and the clause's word order is
reversed. So target word i comes from source word n-1-i: the gold alignment is known by
construction (one sure link per target word).

The model is T5 v1.1 (Raffel et al. 2020; pre-RMS-norm, no biases, unscaled q.k, relative
position buckets in each stack's self attention, gated GELU, untied head), its parameters named
as tests/model/seq2seq_reference.py's t5_forward reads them, so that float64 reference and the
HF export (t5_tensors) are reused as they are.
"""
import math
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "model"))
import seq2seq_reference as ref  # noqa: E402

import kjv  # noqa: E402

PLAIN = "abcdefghijklmnopqrstuvwxyz"
CIPHER = "qwertyuiopasdfghjklzxcvbnm"  # letter i of PLAIN becomes letter i of CIPHER
TOP_WORDS = 600
MAX_WORDS = 8


def encipher(word):
    return word.translate(str.maketrans(PLAIN, CIPHER))


def translate(clause):
    """-> the target text: the clause's words enciphered, in reverse order."""
    return " ".join(encipher(w) for w in reversed(clause.split()))


def gold(n):
    """Sure links (target word i, source word j) of an n-word clause."""
    return {(i, n - 1 - i) for i in range(n)}


def _clauses(text):
    out = []
    for line in text.splitlines():
        for part in re.split(r"[,;:.?!()]", line):
            words = re.sub(r"[^a-z ]", " ", part.lower()).split()
            if words:
                out.append(words)
    return out


def data():
    """-> (train clauses, held-out clauses), each a list of strings; held-out from kjv's split
    (Hebrews to Revelation), de-duplicated and without any clause seen in training."""
    train_text, held_text = kjv.splits()
    tr, he = _clauses(train_text), _clauses(held_text)
    counts = {}
    for ws in tr:
        for w in ws:
            counts[w] = counts.get(w, 0) + 1
    top = set(sorted(counts, key=lambda w: (-counts[w], w))[:TOP_WORDS])

    def keep(cl):
        seen, out = set(), []
        for ws in cl:
            s = " ".join(ws)
            if 2 <= len(ws) <= MAX_WORDS and all(w in top for w in ws) and s not in seen:
                seen.add(s)
                out.append(s)
        return out
    train = keep(tr)
    ts = set(train)
    held = [s for s in keep(he) if s not in ts]
    return train, held


class T5(torch.nn.Module):
    def __init__(self, cfg, vocab, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.cfg = cfg
        d, H, dkv, dff = cfg["d_model"], cfg["num_heads"], cfg["d_kv"], cfg["d_ff"]
        nb = cfg["relative_attention_num_buckets"]
        P = {}

        def w(*s, std):
            return torch.nn.Parameter(torch.randn(*s) * std)
        P["shared"] = w(vocab, d, std=1.0)
        P["lm_head"] = w(vocab, d, std=d ** -0.5)
        P["enc.final"] = torch.nn.Parameter(torch.ones(d))
        P["dec.final"] = torch.nn.Parameter(torch.ones(d))
        P["enc.rel"] = w(nb, H, std=0.1)
        P["dec.rel"] = w(nb, H, std=0.1)
        for stack, n in (("enc", cfg["num_layers"]), ("dec", cfg["num_decoder_layers"])):
            for l in range(n):
                pre = "%s.%d." % (stack, l)
                for site in ["self."] + (["cross."] if stack == "dec" else []):
                    P[pre + site + "ln"] = torch.nn.Parameter(torch.ones(d))
                    P[pre + site + "q"] = w(H * dkv, d, std=(d * dkv) ** -0.5)
                    P[pre + site + "k"] = w(H * dkv, d, std=d ** -0.5)
                    P[pre + site + "v"] = w(H * dkv, d, std=d ** -0.5)
                    P[pre + site + "o"] = w(d, H * dkv, std=(H * dkv) ** -0.5)
                P[pre + "ff.ln"] = torch.nn.Parameter(torch.ones(d))
                P[pre + "ff.wi_0"] = w(dff, d, std=d ** -0.5)
                P[pre + "ff.wi_1"] = w(dff, d, std=d ** -0.5)
                P[pre + "ff.wo"] = w(d, dff, std=dff ** -0.5)
        self.names = list(P)
        self.params = torch.nn.ParameterList([P[k] for k in self.names])

    def p(self):
        return dict(zip(self.names, self.params))

    def forward(self, src, tgt):
        """src [B, S], tgt [B, T] (pad 0 on the right; the decoder input starts with 0, which is
        never masked) -> logits [B, T, V]."""
        cfg, p = self.cfg, self.p()
        H, dkv, eps = cfg["num_heads"], cfg["d_kv"], cfg["layer_norm_epsilon"]
        nb, md = cfg["relative_attention_num_buckets"], cfg["relative_attention_max_distance"]
        B, S = src.shape
        T = tgt.shape[1]
        smask = (src == 0)[:, None, None, :]  # keys that are padding

        def rms(x, w):
            return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w

        def attend(pre, xq, xkv, bias, mask):
            Tq, Tk = xq.shape[1], xkv.shape[1]
            q = (xq @ p[pre + "q"].T).view(B, Tq, H, dkv).transpose(1, 2)
            k = (xkv @ p[pre + "k"].T).view(B, Tk, H, dkv).transpose(1, 2)
            v = (xkv @ p[pre + "v"].T).view(B, Tk, H, dkv).transpose(1, 2)
            s = q @ k.transpose(2, 3)
            if bias is not None:
                s = s + bias
            s = s.masked_fill(mask, float("-inf"))
            a = torch.softmax(s, -1)
            return (a @ v).transpose(1, 2).reshape(B, Tq, H * dkv) @ p[pre + "o"].T

        def ff(pre, x):
            a = torch.nn.functional.gelu(x @ p[pre + "wi_0"].T, approximate="tanh")
            return (a * (x @ p[pre + "wi_1"].T)) @ p[pre + "wo"].T

        def bias(table, n, bidirectional):
            pos = torch.arange(n)
            b = ref.t5_bucket(pos[None, :] - pos[:, None], bidirectional, nb, md)
            return table[b].permute(2, 0, 1)[None]

        x = p["shared"][src]
        be = bias(p["enc.rel"], S, True)
        for l in range(cfg["num_layers"]):
            pre = "enc.%d." % l
            h = rms(x, p[pre + "self.ln"])
            x = x + attend(pre + "self.", h, h, be, smask)
            x = x + ff(pre + "ff.", rms(x, p[pre + "ff.ln"]))
        enc = rms(x, p["enc.final"])
        y = p["shared"][tgt]
        bd = bias(p["dec.rel"], T, False)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)[None, None]
        for l in range(cfg["num_decoder_layers"]):
            pre = "dec.%d." % l
            h = rms(y, p[pre + "self.ln"])
            y = y + attend(pre + "self.", h, h, bd, causal)
            y = y + attend(pre + "cross.", rms(y, p[pre + "cross.ln"]), enc, None, smask)
            y = y + ff(pre + "ff.", rms(y, p[pre + "ff.ln"]))
        return rms(y, p["dec.final"]) @ p["lm_head"].T

    def reference_params(self):
        """-> the parameters as float64 tensors under t5_forward's names."""
        return {k: v.detach().to(torch.float64) for k, v in self.p().items()}


def cosine_lr(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
