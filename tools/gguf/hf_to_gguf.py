#!/usr/bin/python3
"""Convert a Hugging Face model folder to GGUF (numpy only; written for attnviz).

    /usr/bin/python3 tools/gguf/hf_to_gguf.py MODEL_DIR OUT.gguf [--type Q8_0] [--vocab-only]
        [--name NAME] [--pre llama-bpe] [--tokenizer auto|spm|json|gpt2] [--version 3] [--alignment 32]
        [--fallback F16]

MODEL_DIR holds config.json, model.safetensors or model.safetensors.index.json (+ shards,
F32/F16/BF16), and a tokenizer: tokenizer.model (SentencePiece), tokenizer.json, or GPT-2's
vocab.json + merges.txt (plus tokenizer_config.json / added_tokens.json when present).

Architectures (config.json model_type), with llama.cpp's tensor names:
  llama, mistral -> general.architecture "llama"
      token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
      ffn_up, ffn_down}, output_norm, output (absent when the head is tied to the embedding).
      llama.cpp runs "llama" with ggml's NORM rope (rotates consecutive pairs 2i, 2i+1, Meta's
      layout); HF checkpoints are laid out for rotate-half, so the rows of q_proj and k_proj
      (and their biases) are permuted per head back to Meta order:
          w.reshape(heads, 2, head_dim/2, d_in).swapaxes(1, 2).reshape(rows, d_in)
      (the inverse of HF's w.view(heads, head_dim/2, 2, d_in).transpose(1, 2)); k uses the KV
      head count.
  qwen2 -> "qwen2": the same names plus blk.N.attn_{q,k,v}.bias. llama.cpp runs qwen2 with
      NEOX rope (llama_model_rope_type: LLM_ARCH_QWEN2 -> LLAMA_ROPE_TYPE_NEOX, "pairs offset by
      n_rot/2", i.e. rotate-half), the HF layout, so nothing is permuted.
  gpt2 -> "gpt2": token_embd, position_embd, blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm,
      ffn_up, ffn_down}.{weight,bias}, output_norm, output (only if untied). GPT-2's Conv1D
      stores [in, out]; ggml wants out rows of in values (ne = [in, out]), so those four
      matrices are transposed.
  qwen3, gemma2, gemma3_text (-> "gemma3"), phi3, olmo2: see decoder_families.py (NEOX rope,
      nothing permuted; Gemma's norms written as w + 1).
  t5 -> "t5": see seq2seq_families.py (enc.blk.N / dec.blk.N, the relative position tables,
      a Unigram vocabulary with its normalizer).
  bert -> "bert": see encoder_families.py (the encoder without its masked-LM head, a WordPiece
      vocabulary in llama.cpp's spelling).

Types: --type F32|F16|BF16|Q4_0|Q4_1|Q5_0|Q5_1|Q8_0|Q2_K|Q3_K|Q4_K|Q5_K|Q6_K applies to the
2-D weights; 1-D tensors (norms, biases) stay F32; a matrix whose row length is not a multiple
of the type's block size falls back to F16 (as llama.cpp's converter does), or to --fallback's type
when its blocks fit (llama.cpp's quantizer takes Q5_0 for Q4_K, Q5_1 for Q5_K and Q8_0 for Q6_K:
a SmolLM2-shaped model, d = 576, is mostly that fallback in a "Q4_K_M" file).
"""

import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_families  # noqa: E402
import encoder_families  # noqa: E402
import seq2seq_families  # noqa: E402
import quants  # noqa: E402
import safetensors_file  # noqa: E402
from gguf_file import (GGUFWriter, U32, I32T, F32T, STRT, ARR, F32, BOOL_, STR)  # noqa: E402

TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6

# llama.cpp's general.file_type (LLAMA_FTYPE) for a file of one type
FILE_TYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10,
             "Q3_K": 11, "Q4_K": 14, "Q5_K": 16, "Q6_K": 18, "BF16": 32}   # K types: the _S variants


# The checkpoint's tensors (safetensors_file.py).
ConvertError = safetensors_file.ConvertError
SafeTensors, Weights = safetensors_file.SafeTensors, safetensors_file.Weights

# -------------------------------------------------------------- permutation

def hf_to_meta_rows(w, n_heads):
    """rotate-half row order (HF) -> consecutive-pair order (Meta, ggml NORM rope), per head.
    Works on a weight [rows, d_in] or a bias [rows]."""
    rows = w.shape[0]
    hd = rows // n_heads
    return w.reshape(n_heads, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def meta_to_hf_rows(w, n_heads):
    """the inverse: what HF's conversion script does"""
    rows = w.shape[0]
    hd = rows // n_heads
    return w.reshape(n_heads, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ---------------------------------------------------------------- tokenizer

def _read_json(path):
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    return None


def _token_content(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


def _sp_add_dummy_prefix(model_bytes):
    """normalizer_spec.add_dummy_prefix (field 3 of ModelProto, field 3 inside; default true)"""
    def varint(b, i):
        r = s = 0
        while True:
            c = b[i]
            i += 1
            r |= (c & 0x7F) << s
            s += 7
            if not c & 0x80:
                return r, i

    def fields(b):
        i = 0
        while i < len(b):
            key, i = varint(b, i)
            fn, wt = key >> 3, key & 7
            if wt == 0:
                v, i = varint(b, i)
            elif wt == 1:
                v, i = b[i:i + 8], i + 8
            elif wt == 2:
                n, i = varint(b, i)
                v, i = b[i:i + n], i + n
            elif wt == 5:
                v, i = b[i:i + 4], i + 4
            else:
                raise ConvertError("tokenizer.model: bad protobuf wire type %d" % wt)
            yield fn, wt, v
    for fn, wt, v in fields(model_bytes):
        if fn == 3 and wt == 2:
            for fn2, wt2, v2 in fields(v):
                if fn2 == 3 and wt2 == 0:
                    return bool(v2)
    return True


class Vocab:
    def __init__(self):
        self.model = None      # "llama" | "gpt2"
        self.pre = None
        self.tokens = []
        self.scores = None
        self.types = []
        self.merges = None
        self.special = {}      # bos/eos/unk/pad/sep -> id
        self.add_bos = None
        self.add_eos = None
        self.add_space_prefix = None
        self.token_type_count = None  # an encoder's token types (tokenizer.ggml.token_type_count)
        self.remove_extra_whitespaces = None  # t5: the normalizer's whitespace rule
        self.charsmap = None                  # t5: its precompiled character map (bytes)

    def pad_to(self, n):
        while len(self.tokens) < n:
            self.tokens.append("[PAD%d]" % len(self.tokens))
            self.types.append(TOKEN_UNUSED)
            if self.scores is not None:
                self.scores.append(-1000.0)

    def write(self, w):
        if self.token_type_count is not None:
            w.add("tokenizer.ggml.token_type_count", U32(self.token_type_count))
        w.add("tokenizer.ggml.model", STR(self.model))
        if self.pre:
            w.add("tokenizer.ggml.pre", STR(self.pre))
        w.add("tokenizer.ggml.tokens", ARR(STRT, self.tokens))
        if self.scores is not None:
            w.add("tokenizer.ggml.scores", ARR(F32T, np.asarray(self.scores, dtype=np.float32)))
        w.add("tokenizer.ggml.token_type", ARR(I32T, np.asarray(self.types, dtype=np.int32)))
        if self.merges is not None:
            w.add("tokenizer.ggml.merges", ARR(STRT, self.merges))
        for k in ("bos", "eos", "unknown", "seperator", "padding", "cls", "mask"):
            if self.special.get(k) is not None:
                w.add("tokenizer.ggml.%s_token_id" % k, U32(self.special[k]))
        if self.add_bos is not None:
            w.add("tokenizer.ggml.add_bos_token", BOOL_(self.add_bos))
        if self.add_eos is not None:
            w.add("tokenizer.ggml.add_eos_token", BOOL_(self.add_eos))
        if self.add_space_prefix is not None:
            w.add("tokenizer.ggml.add_space_prefix", BOOL_(self.add_space_prefix))
        if self.remove_extra_whitespaces is not None:
            w.add("tokenizer.ggml.remove_extra_whitespaces", BOOL_(self.remove_extra_whitespaces))
        if self.charsmap:
            w.add("tokenizer.ggml.precompiled_charsmap", seq2seq_families.charsmap_value(self.charsmap))


def _special_ids(folder, config, lookup, vocab):
    """bos/eos/unk/pad ids: tokenizer_config.json's token strings, else config.json ids"""
    tc = _read_json(os.path.join(folder, "tokenizer_config.json")) or {}
    stm = _read_json(os.path.join(folder, "special_tokens_map.json")) or {}
    for name, key in (("bos", "bos_token"), ("eos", "eos_token"), ("unknown", "unk_token"),
                      ("padding", "pad_token"), ("seperator", "sep_token")):
        content = _token_content(tc.get(key)) or _token_content(stm.get(key))
        tid = lookup.get(content) if content is not None else None
        if tid is None and name in ("bos", "eos", "padding"):
            cid = config.get({"bos": "bos_token_id", "eos": "eos_token_id", "padding": "pad_token_id"}[name])
            if isinstance(cid, list):
                cid = cid[0] if cid else None
            tid = cid
        if tid is not None:
            vocab.special[name] = int(tid)
    if "add_bos_token" in tc:
        vocab.add_bos = bool(tc["add_bos_token"])
    if "add_eos_token" in tc:
        vocab.add_eos = bool(tc["add_eos_token"])
    return tc


def vocab_from_sentencepiece(folder, config):
    import sentencepiece
    path = os.path.join(folder, "tokenizer.model")
    sp = sentencepiece.SentencePieceProcessor()
    sp.Load(path)
    v = Vocab()
    v.model = "llama"
    v.pre = "default"
    n = sp.GetPieceSize()
    v.scores = []
    for i in range(n):
        v.tokens.append(sp.IdToPiece(i))
        v.scores.append(float(sp.GetScore(i)))
        t = TOKEN_NORMAL
        if sp.IsUnknown(i):
            t = TOKEN_UNKNOWN
        if sp.IsControl(i):
            t = TOKEN_CONTROL
        if sp.IsUnused(i):
            t = TOKEN_UNUSED
        if sp.IsByte(i):
            t = TOKEN_BYTE
        v.types.append(t)
    added = _read_json(os.path.join(folder, "added_tokens.json")) or {}
    for text, tid in sorted(added.items(), key=lambda kv: kv[1]):
        if tid >= len(v.tokens):
            v.pad_to(tid)
            v.tokens.append(text)
            v.scores.append(-1000.0)
            v.types.append(TOKEN_USER_DEFINED)
    tc = _read_json(os.path.join(folder, "tokenizer_config.json")) or {}
    for tid, data in (tc.get("added_tokens_decoder") or {}).items():
        tid = int(tid)
        v.pad_to(tid + 1)
        v.tokens[tid] = data["content"]
        v.scores[tid] = -1000.0
        v.types[tid] = TOKEN_CONTROL if data.get("special") else TOKEN_USER_DEFINED
    if config.get("vocab_size"):
        v.pad_to(int(config["vocab_size"]))
    with open(path, "rb") as f:
        v.add_space_prefix = _sp_add_dummy_prefix(f.read())
    lookup = {t: i for i, t in enumerate(v.tokens)}
    _special_ids(folder, config, lookup, v)
    for name, tid in (("bos", sp.bos_id()), ("eos", sp.eos_id()), ("unknown", sp.unk_id())):
        if name not in v.special and tid >= 0:
            v.special[name] = tid
    return v


def _looks_special(text):
    return bool(re.fullmatch(r"<\|.*\|>|<[a-z_/]+>|\[[A-Z_]+\]", text))


def _bpe_from_vocab(folder, config, vocab_map, merges, added, pre):
    """vocab_map text -> id; merges ["a b"]; added [(id, text, special)]"""
    v = Vocab()
    v.model = "gpt2"
    v.pre = pre
    size = max(list(vocab_map.values()) + [a[0] for a in added]) + 1
    if config.get("vocab_size"):
        size = max(size, int(config["vocab_size"]))
    rev = {i: t for t, i in vocab_map.items()}
    added_by_id = {a[0]: a for a in added}
    for i in range(size):
        if i in added_by_id:
            _, text, special = added_by_id[i]
            v.tokens.append(text)
            v.types.append(TOKEN_CONTROL if special or _looks_special(text) else TOKEN_USER_DEFINED)
        elif i in rev:
            v.tokens.append(rev[i])
            v.types.append(TOKEN_NORMAL)
        else:
            v.tokens.append("[PAD%d]" % i)
            v.types.append(TOKEN_UNUSED)
    v.merges = merges
    lookup = {t: i for i, t in enumerate(v.tokens)}
    _special_ids(folder, config, lookup, v)
    return v


def _merge_strings(merges):
    out = []
    for m in merges:
        if isinstance(m, str):
            out.append(m)
        else:
            out.append(" ".join(m))
    return out


def vocab_from_tokenizer_json(folder, config, pre):
    tj = _read_json(os.path.join(folder, "tokenizer.json"))
    model = tj["model"]
    if model.get("type", "BPE") != "BPE":
        raise ConvertError("tokenizer.json: model type %s is not BPE" % model.get("type"))
    added = [(a["id"], a["content"], bool(a.get("special"))) for a in tj.get("added_tokens", [])]
    merges = _merge_strings(model.get("merges", []))
    byte_level = "ByteLevel" in json.dumps(tj.get("pre_tokenizer")) or "ByteLevel" in json.dumps(tj.get("decoder"))
    if model.get("byte_fallback") and not byte_level:
        # SentencePiece-style BPE without tokenizer.model: a "llama" vocab whose scores order the
        # merges (higher merges first), i.e. score = -rank of the merge that makes the token
        v = Vocab()
        v.model = "llama"
        v.pre = "default"
        vocab_map = model["vocab"]
        rank = {}
        for r, m in enumerate(merges):
            a, b = m.split(" ", 1)
            rank.setdefault(a + b, r)
        size = max(list(vocab_map.values()) + [a[0] for a in added]) + 1
        rev = {i: t for t, i in vocab_map.items()}
        added_by_id = {a[0]: a for a in added}
        v.scores = []
        for i in range(size):
            text = added_by_id[i][1] if i in added_by_id else rev.get(i, "[PAD%d]" % i)
            v.tokens.append(text)
            if i in added_by_id:
                v.types.append(TOKEN_CONTROL if added_by_id[i][2] else TOKEN_USER_DEFINED)
                v.scores.append(0.0)
            elif i not in rev:
                v.types.append(TOKEN_UNUSED)
                v.scores.append(-1000.0)
            elif re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", text):
                v.types.append(TOKEN_BYTE)
                v.scores.append(0.0)
            else:
                v.types.append(TOKEN_NORMAL)
                v.scores.append(-float(rank.get(text, 0)))
        if model.get("unk_token") in vocab_map:
            v.types[vocab_map[model["unk_token"]]] = TOKEN_UNKNOWN
        if config.get("vocab_size"):
            v.pad_to(int(config["vocab_size"]))
        norm = json.dumps(tj.get("normalizer"))
        v.add_space_prefix = "Prepend" in norm or "add_dummy_prefix" in norm
        lookup = {t: i for i, t in enumerate(v.tokens)}
        _special_ids(folder, config, lookup, v)
        return v
    v = _bpe_from_vocab(folder, config, model["vocab"], merges, added, pre)
    return v


def vocab_from_gpt2_files(folder, config, pre):
    with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
        vocab_map = json.load(f)
    merges = []
    with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#version"):
                continue
            merges.append(line)
    added = []
    tc = _read_json(os.path.join(folder, "tokenizer_config.json")) or {}
    for tid, data in (tc.get("added_tokens_decoder") or {}).items():
        added.append((int(tid), data["content"], bool(data.get("special"))))
    at = _read_json(os.path.join(folder, "added_tokens.json")) or {}
    known = {a[0] for a in added}
    for text, tid in at.items():
        if tid not in known:
            added.append((tid, text, _looks_special(text)))
    # GPT-2's <|endoftext|> is in vocab.json; it is the special BOS/EOS token
    for key in ("bos_token_id", "eos_token_id"):
        tid = config.get(key)
        if isinstance(tid, int) and tid not in {a[0] for a in added}:
            text = {i: t for t, i in vocab_map.items()}.get(tid)
            if text is not None:
                added.append((tid, text, True))
    return _bpe_from_vocab(folder, config, vocab_map, merges, added, pre)


def load_vocab(folder, config, arch, how="auto", pre=None):
    default_pre = {"llama": "llama-bpe", "qwen2": "qwen2", "gpt2": "gpt-2"}.get(arch, "default")
    pre = pre or default_pre
    if arch in seq2seq_families.ARCH.values():
        return seq2seq_families.t5_vocab(
            folder, config, Vocab(),
            (TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE),
            lambda lookup, v: _special_ids(folder, config, lookup, v))
    if arch in encoder_families.ARCH.values():
        v = encoder_families.wordpiece_vocab(folder, config, Vocab(),
                                             (TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_UNUSED))
        v.pre = pre
        return v
    has = lambda f: os.path.exists(os.path.join(folder, f))  # noqa: E731
    if how == "auto":
        if has("tokenizer.model") and arch == "llama":
            how = "spm"
        elif has("tokenizer.json"):
            how = "json"
        elif has("tokenizer.model"):
            how = "spm"
        elif has("vocab.json") and has("merges.txt"):
            how = "gpt2"
        else:
            raise ConvertError("%s: no tokenizer.model, tokenizer.json or vocab.json + merges.txt" % folder)
    if how == "spm":
        return vocab_from_sentencepiece(folder, config)
    if how == "json":
        return vocab_from_tokenizer_json(folder, config, pre)
    if how == "gpt2":
        return vocab_from_gpt2_files(folder, config, pre)
    raise ConvertError("unknown tokenizer source %s" % how)


# ------------------------------------------------------------------ models

ARCH = dict({"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "gpt2": "gpt2"},
            **decoder_families.ARCH, **encoder_families.ARCH, **seq2seq_families.ARCH)


def hparams(config, arch, w, folder=None, quiet=False):
    a = arch
    if config.get("model_type") in decoder_families.ARCH:
        return decoder_families.hparams(config, arch, w)
    if config.get("model_type") in encoder_families.ARCH:
        return encoder_families.hparams(config, arch, w, folder)
    if config.get("model_type") in seq2seq_families.ARCH:
        return seq2seq_families.hparams(config, arch, w, quiet)
    ctx = config.get("max_position_embeddings") or config.get("n_positions") or config.get("n_ctx")
    if arch == "gpt2":
        d = config["n_embd"]
        w.add("gpt2.context_length", U32(ctx))
        w.add("gpt2.embedding_length", U32(d))
        w.add("gpt2.feed_forward_length", U32(config.get("n_inner") or 4 * d))
        w.add("gpt2.block_count", U32(config["n_layer"]))
        w.add("gpt2.attention.head_count", U32(config["n_head"]))
        w.add("gpt2.attention.layer_norm_epsilon", F32(config.get("layer_norm_epsilon", 1e-5)))
        return
    d = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    hd = config.get("head_dim") or d // heads
    w.add(a + ".vocab_size", U32(config["vocab_size"]))
    w.add(a + ".context_length", U32(ctx))
    w.add(a + ".embedding_length", U32(d))
    w.add(a + ".block_count", U32(config["num_hidden_layers"]))
    w.add(a + ".feed_forward_length", U32(config["intermediate_size"]))
    w.add(a + ".attention.head_count", U32(heads))
    w.add(a + ".attention.head_count_kv", U32(kv))
    w.add(a + ".attention.layer_norm_rms_epsilon", F32(config.get("rms_norm_eps", 1e-6)))
    w.add(a + ".rope.freq_base", F32(config.get("rope_theta", 10000.0)))
    w.add(a + ".rope.dimension_count", U32(hd))
    if hd != d // heads:
        w.add(a + ".attention.key_length", U32(hd))
        w.add(a + ".attention.value_length", U32(hd))
    sw = config.get("sliding_window")
    if sw and (config.get("model_type") == "mistral" or config.get("use_sliding_window")):
        w.add(a + ".attention.sliding_window", U32(sw))
    rs = config.get("rope_scaling") or {}
    kind = rs.get("rope_type") or rs.get("type")
    if kind == "linear":
        w.add(a + ".rope.scaling.type", STR("linear"))
        w.add(a + ".rope.scaling.factor", F32(rs["factor"]))
    elif kind == "yarn":
        w.add(a + ".rope.scaling.type", STR("yarn"))
        w.add(a + ".rope.scaling.factor", F32(rs["factor"]))
        w.add(a + ".rope.scaling.original_context_length", U32(rs["original_max_position_embeddings"]))
    elif kind not in (None, "default", "llama3"):
        print("warning: rope_scaling %s is not converted" % kind, file=sys.stderr)


def llama3_rope_factors(config):
    """rope_freqs.weight for rope_scaling llama3 (one divisor per frequency, as llama.cpp stores)"""
    rs = config["rope_scaling"]
    base = config.get("rope_theta", 10000.0)
    hd = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    factor = rs.get("factor", 8.0)
    lo, hi = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    freqs = 1.0 / (base ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * np.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def tensor_plan(config, arch, weights):
    """[(gguf name, numpy shape, function returning the float32 array in ggml row order)]"""
    plan = []
    names = set(weights.names())

    class Take:
        def __init__(self, hf, fn=None, transpose=False):
            if hf not in names:
                raise ConvertError("missing tensor %s" % hf)
            self.hf, self.fn = hf, fn
            shape = list(weights.where[hf].header[hf]["shape"])
            self.shape = tuple(reversed(shape)) if transpose else tuple(shape)

    def take(hf, fn=None, transpose=False):
        return Take(hf, fn, transpose)

    if arch == "gpt2":
        pre = "transformer." if "transformer.wte.weight" in names else ""
        L = config["n_layer"]
        T = lambda a: np.ascontiguousarray(a.T)  # noqa: E731  Conv1D [in, out] -> [out, in]
        plan.append(("token_embd.weight", take(pre + "wte.weight")))
        plan.append(("position_embd.weight", take(pre + "wpe.weight")))
        for i in range(L):
            h = "%sh.%d." % (pre, i)
            b = "blk.%d." % i
            for src, dst, tr in (("ln_1", "attn_norm", False), ("attn.c_attn", "attn_qkv", True),
                                 ("attn.c_proj", "attn_output", True), ("ln_2", "ffn_norm", False),
                                 ("mlp.c_fc", "ffn_up", True), ("mlp.c_proj", "ffn_down", True)):
                plan.append((b + dst + ".weight", take(h + src + ".weight", T if tr else None, tr)))
                plan.append((b + dst + ".bias", take(h + src + ".bias")))
        plan.append(("output_norm.weight", take(pre + "ln_f.weight")))
        plan.append(("output_norm.bias", take(pre + "ln_f.bias")))
        if "lm_head.weight" in names and not config.get("tie_word_embeddings", True):
            plan.append(("output.weight", take("lm_head.weight")))
        return plan

    if config.get("model_type") in decoder_families.ARCH:
        return decoder_families.tensor_plan(config, arch, names, take)
    if config.get("model_type") in encoder_families.ARCH:
        return encoder_families.tensor_plan(config, names, take)
    if config.get("model_type") in seq2seq_families.ARCH:
        return seq2seq_families.tensor_plan(config, names, take)
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    L = config["num_hidden_layers"]
    permute = arch == "llama"
    pq = (lambda a: hf_to_meta_rows(a, heads)) if permute else None
    pk = (lambda a: hf_to_meta_rows(a, kv)) if permute else None
    plan.append(("token_embd.weight", take("model.embed_tokens.weight")))
    rs = config.get("rope_scaling") or {}
    if (rs.get("rope_type") or rs.get("type")) == "llama3":
        f = llama3_rope_factors(config)
        plan.append(("rope_freqs.weight", f))
    for i in range(L):
        h = "model.layers.%d." % i
        b = "blk.%d." % i
        plan.append((b + "attn_norm.weight", take(h + "input_layernorm.weight")))
        plan.append((b + "attn_q.weight", take(h + "self_attn.q_proj.weight", pq)))
        plan.append((b + "attn_k.weight", take(h + "self_attn.k_proj.weight", pk)))
        plan.append((b + "attn_v.weight", take(h + "self_attn.v_proj.weight")))
        for proj, dst, fn in (("q_proj", "attn_q", pq), ("k_proj", "attn_k", pk), ("v_proj", "attn_v", None)):
            if h + "self_attn.%s.bias" % proj in names:
                plan.append((b + dst + ".bias", take(h + "self_attn.%s.bias" % proj, fn)))
        plan.append((b + "attn_output.weight", take(h + "self_attn.o_proj.weight")))
        if h + "self_attn.o_proj.bias" in names:
            plan.append((b + "attn_output.bias", take(h + "self_attn.o_proj.bias")))
        plan.append((b + "ffn_norm.weight", take(h + "post_attention_layernorm.weight")))
        plan.append((b + "ffn_gate.weight", take(h + "mlp.gate_proj.weight")))
        plan.append((b + "ffn_up.weight", take(h + "mlp.up_proj.weight")))
        plan.append((b + "ffn_down.weight", take(h + "mlp.down_proj.weight")))
    plan.append(("output_norm.weight", take("model.norm.weight")))
    tied = config.get("tie_word_embeddings", False) or "lm_head.weight" not in names
    if not tied:
        plan.append(("output.weight", take("lm_head.weight")))
    return plan


def _producer(weights, item):
    """(numpy shape, function returning the float32 array)"""
    if isinstance(item, np.ndarray):
        return item.shape, (lambda: item)

    def get():
        a = weights.get(item.hf)
        a = item.fn(a) if item.fn else a
        if tuple(a.shape) != item.shape:
            raise ConvertError("%s: shape %s, expected %s" % (item.hf, a.shape, item.shape))
        return a
    return item.shape, get


def convert(folder, out, qtype="F16", vocab_only=False, name=None, pre=None, tokenizer="auto",
            version=3, alignment=32, quiet=False, fallback="F16"):
    config = _read_json(os.path.join(folder, "config.json"))
    if config is None:
        raise ConvertError("%s: no config.json" % folder)
    mt = config.get("model_type")
    if mt not in ARCH:
        raise ConvertError("%s: model_type %r is not one of %s" % (folder, mt, ", ".join(ARCH)))
    if qtype not in quants.SUPPORTED:
        raise ConvertError("--type %s is not one of %s" % (qtype, " ".join(quants.SUPPORTED)))
    arch = ARCH[mt]
    w = GGUFWriter(version=version, alignment=alignment)
    w.add("general.architecture", STR(arch))
    w.add("general.name", STR(name or os.path.basename(os.path.normpath(folder))))
    hparams(config, arch, w, folder, quiet)
    vocab = load_vocab(folder, config, arch, tokenizer, pre)
    if not vocab_only:
        w.add("general.file_type", U32(FILE_TYPE[qtype]))
        if qtype not in ("F32", "F16", "BF16"):
            w.add("general.quantization_version", U32(2))
    vocab.write(w)
    if not vocab_only:
        weights = Weights(folder)
        for gname, item in tensor_plan(config, arch, weights):
            shape, fn = _producer(weights, item)
            ne = list(reversed(shape))
            t = qtype
            if len(shape) == 1 or (arch in encoder_families.ARCH.values() and
                                   gname in encoder_families.ALWAYS_F32):
                t = "F32"
            elif ne[0] % quants.block_size(qtype):
                t = "F16" if qtype != "F32" else "F32"
                if qtype != "F32" and ne[0] % quants.block_size(fallback) == 0:
                    t = fallback
                if not quiet and t != qtype:
                    print("note: %s row %d is not a multiple of the %s block: stored as %s"
                          % (gname, ne[0], qtype, t), file=sys.stderr)
            w.add_tensor_raw(gname, (lambda fn=fn, t=t: quants.quantize(fn(), t)), t, ne)
    w.write(out)
    if not quiet:
        print("wrote %s: %s, %d tensors, %d tokens" % (out, arch, len(w.tensors), len(vocab.tokens)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--type", default="F16", choices=quants.SUPPORTED)
    ap.add_argument("--vocab-only", action="store_true")
    ap.add_argument("--name")
    ap.add_argument("--pre", help="tokenizer.ggml.pre for BPE vocabularies (default by architecture: "
                    "llama-bpe, qwen2, gpt-2)")
    ap.add_argument("--tokenizer", default="auto", choices=["auto", "spm", "json", "gpt2"])
    ap.add_argument("--version", type=int, default=3, choices=[2, 3])
    ap.add_argument("--alignment", type=int, default=32)
    ap.add_argument("--fallback", default="F16", choices=quants.SUPPORTED,
                    help="type for matrices whose rows are not whole --type blocks (default F16)")
    a = ap.parse_args(argv)
    try:
        convert(a.model_dir, a.out, a.type, a.vocab_only, a.name, a.pre, a.tokenizer, a.version, a.alignment,
                fallback=a.fallback)
    except (ConvertError, decoder_families.FamilyError, encoder_families.EncoderError,
            seq2seq_families.Seq2SeqError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
