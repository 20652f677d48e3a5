"""BERT for hf_to_gguf.py, written in llama.cpp's `bert` layout (its metadata keys and tensor
names), as llama.cpp's converter writes embedding models (bge, all-MiniLM):

  - The encoder alone: the masked-LM head (cls.predictions.*), the next-sentence head
    (cls.seq_relationship.*), the pooler and embeddings.position_ids are dropped; a checkpoint's
    "bert." prefix is removed and TensorFlow's LayerNorm.gamma / .beta read as weight / bias.
  - Tensors: token_embd, token_types, position_embd, token_embd_norm (weight, bias), and per
    layer blk.N.attn_q / attn_k / attn_v / attn_output (weight, bias), attn_output_norm,
    ffn_up, ffn_down (weight, bias), layer_output_norm (weight, bias). position_embd and
    token_types are always F32, as are 1-D tensors.
  - Metadata: bert.context_length (max_position_embeddings), embedding_length,
    feed_forward_length, block_count, attention.head_count, attention.layer_norm_epsilon,
    attention.causal = false, pooling_type when the folder is a sentence-transformers model
    (modules.json's Pooling: 1 mean, 2 CLS).
  - Vocabulary: tokenizer.ggml.model "bert" with tokenizer.ggml.token_type_count
    (type_vocab_size, default 1); WordPiece tokens in llama.cpp's spelling: a control token as
    it is, a "##" continuation without its "##", any other token after U+2581 (the word start);
    the special ids (unknown, seperator, padding, cls, mask).

A GGUF has no key for the activation: llama.cpp runs GELU, and so does attnviz (exact, as BERT
was trained), so a checkpoint with another hidden_act is refused, as is a position embedding
type other than absolute.
"""

import json
import os

from gguf_file import U32, F32, STR, BOOL_  # noqa: F401

ARCH = {"bert": "bert"}
# Stored as F32 whatever the file's type (llama.cpp's converter keeps these unquantized).
ALWAYS_F32 = ("position_embd.weight", "token_types.weight")
WORD_START = "\u2581"
# llama.cpp's pooling types.
POOLING_MEAN, POOLING_CLS = 1, 2


class EncoderError(Exception):
    pass


def _read_json(path):
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    return None


def pooling_type(folder):
    """A sentence-transformers folder's pooling (modules.json -> its Pooling module's config)."""
    modules = _read_json(os.path.join(folder, "modules.json")) or []
    for m in modules:
        if m.get("type") == "sentence_transformers.models.Pooling":
            cfg = _read_json(os.path.join(folder, m.get("path", ""), "config.json")) or {}
            if cfg.get("pooling_mode_mean_tokens"):
                return POOLING_MEAN
            if cfg.get("pooling_mode_cls_token"):
                return POOLING_CLS
            raise EncoderError("%s: only mean and CLS pooling are written" % folder)
    return None


def hparams(config, arch, w, folder):
    a = arch + "."
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise EncoderError("hidden_act %r: a GGUF bert runs GELU" % act)
    pe = config.get("position_embedding_type", "absolute")
    if pe != "absolute":
        raise EncoderError("position_embedding_type %r: a GGUF bert has absolute positions" % pe)
    w.add(a + "context_length", U32(config["max_position_embeddings"]))
    w.add(a + "embedding_length", U32(config["hidden_size"]))
    w.add(a + "feed_forward_length", U32(config["intermediate_size"]))
    w.add(a + "block_count", U32(config["num_hidden_layers"]))
    w.add(a + "attention.head_count", U32(config["num_attention_heads"]))
    w.add(a + "attention.layer_norm_epsilon", F32(config.get("layer_norm_eps", 1e-12)))
    w.add(a + "attention.causal", BOOL_(False))
    pool = pooling_type(folder)
    if pool is not None:
        w.add(a + "pooling_type", U32(pool))


def phantom(token, control):
    """llama.cpp's spelling of a WordPiece token."""
    if control:
        return token
    if token.startswith("##"):
        return token[2:]
    return WORD_START + token


# BertTokenizer's special tokens when the folder names none.
BERT_SPECIALS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                 "cls_token": "[CLS]", "mask_token": "[MASK]"}
SPECIAL_KEYS = (("unknown", "unk_token"), ("seperator", "sep_token"), ("padding", "pad_token"),
                ("cls", "cls_token"), ("mask", "mask_token"), ("bos", "bos_token"),
                ("eos", "eos_token"))


def wordpiece_vocab(folder, config, vocab, types):
    """Fills vocab (hf_to_gguf.Vocab) from tokenizer.json's WordPiece model or vocab.txt; types:
    (normal, control, unused)."""
    normal, control, unused = types
    tj = _read_json(os.path.join(folder, "tokenizer.json"))
    if tj is not None and tj.get("model", {}).get("type") == "WordPiece":
        by_id = {i: t for t, i in tj["model"]["vocab"].items()}
        added = {a["id"]: (a["content"], bool(a.get("special"))) for a in tj.get("added_tokens", [])}
    elif os.path.exists(os.path.join(folder, "vocab.txt")):
        with open(os.path.join(folder, "vocab.txt"), encoding="utf-8") as f:
            by_id = {i: line.rstrip("\n") for i, line in enumerate(f) if line.rstrip("\n")}
        added = {}
    else:
        raise EncoderError("%s: no WordPiece tokenizer (tokenizer.json or vocab.txt)" % folder)
    tc = _read_json(os.path.join(folder, "tokenizer_config.json")) or {}
    stm = _read_json(os.path.join(folder, "special_tokens_map.json")) or {}
    for tid, data in (tc.get("added_tokens_decoder") or {}).items():
        added.setdefault(int(tid), (data["content"], bool(data.get("special"))))

    def content(v):
        return v.get("content") if isinstance(v, dict) else v
    named = {}
    for _, key in SPECIAL_KEYS:
        text = content(tc.get(key)) or content(stm.get(key)) or BERT_SPECIALS.get(key)
        if text is not None:
            named[key] = text
    special_texts = set(named.values())
    size = max(list(by_id) + list(added)) + 1
    size = max(size, int(config.get("vocab_size") or 0))
    vocab.model = "bert"
    vocab.tokens, vocab.types = [], []
    for i in range(size):
        if i in added:
            text, special = added[i]
            kind = control if special or text in special_texts else normal
        elif i in by_id:
            text = by_id[i]
            kind = control if text in special_texts else normal
        else:
            text, kind = "[PAD%d]" % i, unused
        vocab.tokens.append(phantom(text, kind == control))
        vocab.types.append(kind)
    lookup = {t: i for i, t in enumerate(vocab.tokens)}
    for name, key in SPECIAL_KEYS:
        if key in named and named[key] in lookup:
            vocab.special[name] = lookup[named[key]]
    if "padding" not in vocab.special and isinstance(config.get("pad_token_id"), int):
        vocab.special["padding"] = config["pad_token_id"]
    vocab.token_type_count = int(config.get("type_vocab_size", 1))
    return vocab


def tensor_plan(config, names, take):
    """[(gguf name, Take)] in llama.cpp's order."""
    pre = "bert." if "bert.embeddings.word_embeddings.weight" in names else ""

    def src(name):
        """the stored name: LayerNorm's weight / bias, or TensorFlow's gamma / beta"""
        full = pre + name
        if full not in names and "LayerNorm." in full:
            alt = full.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                "LayerNorm.bias", "LayerNorm.beta")
            if alt in names:
                return alt
        return full

    plan = [("token_embd.weight", take(src("embeddings.word_embeddings.weight")))]
    if int(config.get("type_vocab_size", 1)) > 0:
        plan.append(("token_types.weight", take(src("embeddings.token_type_embeddings.weight"))))
    plan.append(("position_embd.weight", take(src("embeddings.position_embeddings.weight"))))
    plan.append(("token_embd_norm.weight", take(src("embeddings.LayerNorm.weight"))))
    plan.append(("token_embd_norm.bias", take(src("embeddings.LayerNorm.bias"))))
    for i in range(config["num_hidden_layers"]):
        h = "encoder.layer.%d." % i
        b = "blk.%d." % i
        for hf, gg in (("attention.self.query", "attn_q"), ("attention.self.key", "attn_k"),
                       ("attention.self.value", "attn_v"), ("attention.output.dense", "attn_output"),
                       ("attention.output.LayerNorm", "attn_output_norm"),
                       ("intermediate.dense", "ffn_up"), ("output.dense", "ffn_down"),
                       ("output.LayerNorm", "layer_output_norm")):
            plan.append((b + gg + ".weight", take(src(h + hf + ".weight"))))
            plan.append((b + gg + ".bias", take(src(h + hf + ".bias"))))
    return plan
