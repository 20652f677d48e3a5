#!/usr/bin/python3
"""Random-init LLaMA-family checkpoints (llama, mistral, qwen2) in the exact Hugging Face layout,
and what the float64 reference forward pass of llama_reference.py (written from the published
architectures, not from attnviz's code) computes on them: test fixtures of attnviz's model pass.

Run with Debian's python3 (python3-torch, python3-numpy, python3-regex):
    /usr/bin/python3 tests/model/make_llama_fixtures.py tests/model/fixtures/llama

Deterministic (seeded). Each fixture folder holds config.json, the weights (model.safetensors,
or shards + model.safetensors.index.json), tokenizer.json + tokenizer_config.json, cases.json
and per case the float32 .npy files of the expected attention weights [L, H_query, T, T] and
logits [T, V]. cases.json: {"text", "ids", "cases": [{"name", "ablate": ["L:H", ...],
"temperature", "window", "weights", "logits"}]}; "ids" are what the tokenizer written here
encodes "text" to (by this file's own implementation of the tokenizers' BPE), the BOS included
where the tokenizer adds one.

Fixtures:
  llama_gqa            8 query / 2 KV heads, F32, tied embeddings, rope_theta 1e4
  llama_mqa_f16        4 query / 1 KV head, F16, untied, rope_theta 5e5, vocab_size > tokenizer
  llama3_bf16_sharded  BF16, rope_scaling llama3, 2 shards + index, Llama-3-style byte-level
                       tokenizer (BOS <|begin_of_text|> from the post-processor, eos a list)
  llama_linear         rope_scaling {"type": "linear", "factor": 2}, head_dim 16 != 48 / 4
  mistral_window       model_type mistral, sliding_window 5 < T, 4 query / 2 KV heads; a sixth
                       case "window_wide" (window 8 > 5) equals "plain"
  qwen2_bias           model_type qwen2, q/k/v biases, use_sliding_window false with a
                       sliding_window of 4 present (ignored), tied, Qwen2 byte-level tokenizer
The llama ones and mistral use a Llama-2-style tokenizer.json (SentencePiece BPE: Prepend/Replace
"▁" normalizer, byte_fallback, BOS <s> from the post-processor and add_bos_token).

Interventions as in make_gpt2_fixtures.py: "ablate" zeroes query heads' outputs before o_proj;
"temperature" tau: L = (q.k / sqrt(head_dim)) / tau; "window" W: an extra mask keeping the last W
keys (i - W < j <= i), ANDed with the causal mask and the model's own sliding window (a user window
never widens Mistral's). Sliding windows follow docs/design/conventions.md: the last W keys, the
query itself included (transformers' current masking_utils; mistral-src's reference lets W + 1
through).

Self-checks (asserts): every row of weights sums to 1; the interventions change the result; the
rotate-half forward equals an independent route (q/k rows permuted to Meta's interleaved order,
rotated as complex numbers) and differs from a wrong convention; rope scaling matters (llama3:
the scaled inv_freq differs from the unscaled for some dims, not all); Mistral's window matters
and Qwen2's disabled one would have mattered.
"""
import json
import math
import os
import sys
import unicodedata

import numpy as np
import regex
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402
from make_gpt2_fixtures import BYTES, stored, tensor_bytes, write_safetensors  # noqa: E402

TEXT = "Once upon a time, the cat's hat sat on 1234 cafés.\n"

# ---------------------------------------------------------------------------------------------
# BPE as Hugging Face tokenizers runs it: the adjacent pair of lowest merge rank merges first
# (the leftmost on ties), until no pair has a rank.


def bpe(symbols, ranks):
    word = list(symbols)
    while len(word) > 1:
        best = min((ranks.get((a, b), math.inf), i) for i, (a, b) in enumerate(zip(word, word[1:])))
        if best[0] == math.inf:
            break
        pair = (word[best[1]], word[best[1] + 1])
        merged, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                merged.append(word[i] + word[i + 1])
                i += 2
            else:
                merged.append(word[i])
                i += 1
        word = merged
    return word


# Llama-2 style (SentencePiece BPE converted to tokenizer.json) --------------------------------

SPM_CHARS = "▁abcdefghijklmnopqrstuvwxyzTO.,;'!?-0123456789"   # no "é" nor "\n": byte fallback
SPM_MERGES = [("▁", "t"), ("h", "e"), ("a", "t"), ("▁t", "he"), ("▁", "c"), ("▁c", "at"),
              ("▁", "s"), ("▁s", "at"), ("o", "n"), ("▁", "on"), ("▁", "m"), ("▁m", "at"),
              ("▁", "T"), ("▁T", "he"), ("▁", "h"), ("▁h", "at"), ("i", "n"), ("▁", "in"),
              ("e", "l"), ("el", "l"), ("▁", "f"), ("▁f", "ell"), ("▁", "O"), ("n", "c"),
              ("nc", "e"), ("▁O", "nce"), ("u", "p"), ("▁", "up"), ("▁up", "on"),
              ("▁", "a"),
              ("i", "m"), ("im", "e"), ("▁t", "ime"), ("'", "s"), ("a", "f"), ("▁c", "af"),
              ("1", "2"), ("▁", "12")]


def spm_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in SPM_CHARS:
        vocab[c] = len(vocab)
    for a, b in SPM_MERGES:
        assert a in vocab and b in vocab
        vocab.setdefault(a + b, len(vocab))
    return vocab, SPM_MERGES


def spm_encode(text, vocab, merges):
    """Prepend "▁", spaces -> "▁", one word, byte fallback for characters not in the vocab."""
    ranks = {m: r for r, m in enumerate(merges)}
    norm = "▁" + text.replace(" ", "▁")
    symbols = []
    for c in norm:
        if c in vocab:
            symbols.append(c)
        else:
            symbols.extend(f"<0x{b:02X}>" for b in c.encode("utf-8"))
    return [vocab["<s>"]] + [vocab[s] for s in bpe(symbols, ranks)]


def added(token_id, content):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True}


def write_spm_tokenizer(out, vocab, merges, bos_as_added_token=False):
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, indent=1, ensure_ascii=False)

    def special(s):
        if not bos_as_added_token:
            return s
        return {"__type": "AddedToken", "content": s, "lstrip": False, "normalized": False,
                "rstrip": False, "single_word": False}
    cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": special("<s>"),
           "eos_token": special("</s>"), "unk_token": special("<unk>"), "pad_token": None,
           "clean_up_tokenization_spaces": False, "legacy": False, "model_max_length": 1024,
           "tokenizer_class": "LlamaTokenizer"}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)


# Byte-level BPE (Qwen2, Llama 3) --------------------------------------------------------------

QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
                 r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
LLAMA3_PATTERN = QWEN2_PATTERN.replace(r"\p{N}|", r"\p{N}{1,3}|")
BL_MERGES = [(" ", "t"), ("h", "e"), ("a", "t"), (" t", "he"), (" ", "c"), (" c", "at"),
             (" ", "s"), (" s", "at"), ("o", "n"), (" ", "on"), (" ", "m"), (" m", "at"),
             ("T", "he"), (" ", "h"), (" h", "at"), ("i", "n"), (" ", "in"), ("e", "l"),
             ("el", "l"), (" ", "f"), (" f", "ell"), ("n", "c"), ("O", "nc"), ("Onc", "e"),
             ("u", "p"), (" ", "up"), (" up", "on"), (" ", "a"), ("i", "m"), ("im", "e"),
             (" t", "ime"), ("'", "s"), ("a", "f"), (" c", "af"), ("\xc3", "\xa9"),
             ("1", "2"), ("12", "3"), (".", "\n")]


def bytelevel_tokenizer(specials):
    """256 byte symbols in GPT-2's order, one token per merge, then the special tokens."""
    vocab = {BYTES[b]: i for i, b in enumerate(sorted(BYTES, key=lambda b: ord(BYTES[b])))}
    merges = []
    for a, b in BL_MERGES:   # written as bytes (latin-1 for the two halves of "é")
        a = "".join(BYTES[x] for x in a.encode("latin-1"))
        b = "".join(BYTES[x] for x in b.encode("latin-1"))
        merges.append((a, b))
        vocab.setdefault(a + b, len(vocab))
    for s in specials:
        vocab[s] = len(vocab)
    return vocab, merges


def bytelevel_encode(text, vocab, merges, pattern, nfc, ignore_merges, bos=None):
    ranks = {m: r for r, m in enumerate(merges)}
    if nfc:
        text = unicodedata.normalize("NFC", text)
    ids = [] if bos is None else [vocab[bos]]
    for piece in regex.findall(pattern, text):
        word = "".join(BYTES[b] for b in piece.encode("utf-8"))
        if ignore_merges and word in vocab:
            ids.append(vocab[word])
        else:
            ids.extend(vocab[s] for s in bpe(word, ranks))
    return ids


def write_bytelevel_tokenizer(out, vocab, merges, specials, pattern, nfc, ignore_merges, bos,
                              merges_as_pairs, tokenizer_config):
    bytelevel = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                 "use_regex": False}
    post = bytelevel
    if bos is not None:
        b = {"SpecialToken": {"id": bos, "type_id": 0}}
        post = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [b, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [b, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": bos, "type_id": 1}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}}}]}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(vocab[s], s) for s in specials],
        "normalizer": {"type": "NFC"} if nfc else None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
             "invert": False}, bytelevel]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": {k: v for k, v in vocab.items() if k not in specials},
                  "merges": [[a, b] if merges_as_pairs else f"{a} {b}" for a, b in merges]}}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, indent=1, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config, f, indent=2, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Checkpoints

TORCH_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def random_weights(cfg, gen, qkv_bias):
    p = ref.params(cfg)
    d, H, KV, hd, V = p["d"], p["H"], p["KV"], p["hd"], cfg["vocab_size"]
    inter = cfg["intermediate_size"]

    def rnd(*shape, std=1.0, mean=0.0):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std + mean

    w = {"model.embed_tokens.weight": rnd(V, d)}
    for l in range(p["L"]):
        pre = f"model.layers.{l}."
        w[pre + "input_layernorm.weight"] = rnd(d, std=0.1, mean=1.0)
        # Large enough that heads attend sharply (scaled scores of std ~3), so that a wrong
        # RoPE, window or scaling shows in the weights.
        w[pre + "self_attn.q_proj.weight"] = rnd(H * hd, d, std=1.8 / math.sqrt(d))
        w[pre + "self_attn.k_proj.weight"] = rnd(KV * hd, d, std=1.8 / math.sqrt(d))
        w[pre + "self_attn.v_proj.weight"] = rnd(KV * hd, d, std=1.0 / math.sqrt(d))
        if qkv_bias:
            w[pre + "self_attn.q_proj.bias"] = rnd(H * hd, std=0.3)
            w[pre + "self_attn.k_proj.bias"] = rnd(KV * hd, std=0.3)
            w[pre + "self_attn.v_proj.bias"] = rnd(KV * hd, std=0.3)
        w[pre + "self_attn.o_proj.weight"] = rnd(d, H * hd, std=1.0 / math.sqrt(H * hd))
        w[pre + "post_attention_layernorm.weight"] = rnd(d, std=0.1, mean=1.0)
        w[pre + "mlp.gate_proj.weight"] = rnd(inter, d, std=1.0 / math.sqrt(d))
        w[pre + "mlp.up_proj.weight"] = rnd(inter, d, std=1.0 / math.sqrt(d))
        w[pre + "mlp.down_proj.weight"] = rnd(d, inter, std=1.0 / math.sqrt(inter))
    w["model.norm.weight"] = rnd(d, std=0.1, mean=1.0)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = rnd(V, d, std=2.0 / math.sqrt(d))
    return w


def write_weights(out, w, dtype, shards):
    names = list(w)
    if shards == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), [(n, w[n], dtype) for n in names])
        return
    # Embedding and layer 0 in the first shard, the rest in the second.
    first = [n for n in names if n.startswith(("model.embed_tokens.", "model.layers.0."))]
    parts = [first, [n for n in names if n not in first]]
    weight_map, total = {}, 0
    for s, part in enumerate(parts):
        fname = f"model-{s + 1:05d}-of-{len(parts):05d}.safetensors"
        write_safetensors(os.path.join(out, fname), [(n, w[n], dtype) for n in part])
        for n in part:
            weight_map[n] = fname
            total += len(tensor_bytes(w[n], dtype))
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)


def base_config(model_type, d, inter, L, H, KV, V, tied, dtype, theta, bos, eos, eps=1e-5):
    arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
            "qwen2": "Qwen2ForCausalLM"}[model_type]
    return {"architectures": [arch], "model_type": model_type, "hidden_size": d,
            "intermediate_size": inter, "num_hidden_layers": L, "num_attention_heads": H,
            "num_key_value_heads": KV, "hidden_act": "silu", "max_position_embeddings": 512,
            "rms_norm_eps": eps, "rope_theta": theta, "rope_scaling": None, "vocab_size": V,
            "tie_word_embeddings": tied, "bos_token_id": bos, "eos_token_id": eos,
            "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True,
            "torch_dtype": TORCH_DTYPE[dtype], "transformers_version": "4.44.0"}


# ---------------------------------------------------------------------------------------------
# Fixtures


def save_npy(path, t):
    np.save(path, t.numpy().astype(np.float32))


def maxdiff(a, b):
    return float((a - b).abs().max())


def check_fixture(name, cfg, w, ids, results):
    """The self-checks: see the module docstring."""
    p = ref.params(cfg)
    att, logits = results["plain"]
    for case, (a, z) in results.items():
        assert torch.allclose(a.sum(-1), torch.ones_like(a.sum(-1)), atol=1e-12), (name, case)
        assert torch.isfinite(z).all(), (name, case)
    assert maxdiff(results["ablate"][1], logits) > 1e-2, name
    assert maxdiff(results["temperature"][0], att) > 1e-2, name
    assert maxdiff(results["window"][0], att) > 1e-2, name
    # Peaky enough: on rows with at least 8 keys, the largest weight averages over 0.4.
    rows = att[:, :, 7:, :].max(-1).values.mean()
    assert rows > 0.4, (name, float(rows))
    # RoPE by an independent route: Meta's interleaved pairs rotated as complex numbers, on q/k
    # rows permuted back to Meta's order.
    meta = ref.permute_qk(w, cfg, ref.hf_to_meta)
    a2, z2 = ref.forward(cfg, meta, ids, rope_convention="interleaved")
    assert maxdiff(a2, att) < 1e-12 and maxdiff(z2, logits) < 1e-10, name
    assert torch.equal(ref.meta_to_hf(ref.hf_to_meta(w["model.layers.0.self_attn.k_proj.weight"],
                                                     p["KV"]), p["KV"]),
                       w["model.layers.0.self_attn.k_proj.weight"])
    a3, _ = ref.forward(cfg, w, ids, rope_convention="interleaved")     # the wrong convention
    assert maxdiff(a3, att) > 0.05, (name, maxdiff(a3, att))
    if cfg.get("rope_scaling"):
        unscaled = dict(cfg, rope_scaling=None)
        a4, _ = ref.forward(unscaled, w, ids)
        assert maxdiff(a4, att) > 0.05, (name, maxdiff(a4, att))
    if cfg["model_type"] == "mistral":
        a5, _ = ref.forward(dict(cfg, sliding_window=None), w, ids)
        assert maxdiff(a5, att) > 0.05, name
        T = len(ids)
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        assert (att[:, :, ~((j <= i) & (j > i - cfg["sliding_window"]))] == 0).all()
        # A user window wider than the model's changes nothing: it never widens it.
        assert torch.equal(results["window_wide"][0], att), name
    if cfg["model_type"] == "qwen2":
        # Had the (disabled) window been applied, the weights would differ.
        a6, _ = ref.forward(cfg, w, ids, window=cfg["sliding_window"])
        assert maxdiff(a6, att) > 0.05, name


def make_fixture(out, name, cfg, w_fp64, dtype, shards, ids, text, ablate, extra=()):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_weights(out, w_fp64, dtype, shards)
    w = {k: stored(v, dtype) for k, v in w_fp64.items()}   # what the file holds, as float64
    variants = [("plain", [], 1.0, 0), ("ablate", ablate, 1.0, 0),
                ("temperature", [], 0.5, 0), ("window", [], 1.0, 3),
                ("combined", ablate, 0.5, 3)] + list(extra)
    results, cases = {}, []
    for case, abl, tau, win in variants:
        att, logits = ref.forward(cfg, w, ids, abl, tau, win)
        results[case] = (att, logits)
        save_npy(os.path.join(out, f"{case}_weights.npy"), att)
        save_npy(os.path.join(out, f"{case}_logits.npy"), logits)
        cases.append({"name": case, "ablate": [f"{l}:{h}" for l, h in abl],
                      "temperature": tau, "window": win,
                      "weights": f"{case}_weights.npy", "logits": f"{case}_logits.npy"})
    check_fixture(name, cfg, w, ids, results)
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"text": text, "ids": ids, "cases": cases}, f, indent=2, ensure_ascii=False)


def llama3_scaling_check(cfg):
    p = ref.params(cfg)
    plain = ref.rope_inv_freq(p["hd"], p["theta"])
    scaled = ref.rope_inv_freq(p["hd"], p["theta"], cfg["rope_scaling"])
    factor = cfg["rope_scaling"]["factor"]
    same = torch.isclose(scaled, plain, rtol=1e-15, atol=0)
    divided = torch.isclose(scaled, plain / factor, rtol=1e-15, atol=0)
    assert same.any() and not same.all(), (plain, scaled)
    # All three regimes: kept, divided by factor, and the smooth band in between.
    assert divided.any() and (~same & ~divided).any(), (plain, scaled)


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = sys.argv[1]
    torch.set_num_threads(1)
    spm_vocab, spm_merges = spm_tokenizer()
    spm_ids = spm_encode(TEXT, spm_vocab, spm_merges)
    V = len(spm_vocab)

    def seed(n):
        return torch.Generator().manual_seed(n)

    def spm_fixture(name, cfg, dtype, n_seed, ablate, bos_as_added_token=False, extra=()):
        out = os.path.join(root, name)
        w = random_weights(cfg, seed(n_seed), qkv_bias=False)
        make_fixture(out, name, cfg, w, dtype, 1, spm_ids, TEXT, ablate, extra)
        write_spm_tokenizer(out, spm_vocab, spm_merges, bos_as_added_token)
        print("wrote", out, "T =", len(spm_ids))

    # 1. GQA 8/2, F32, tied.
    cfg = base_config("llama", 64, 128, 2, 8, 2, V, True, "F32", 10000.0, 1, 2)
    spm_fixture("llama_gqa", cfg, "F32", 21, [(0, 1), (1, 6)])

    # 2. MQA 4/1, F16, untied, theta 5e5, vocab_size padded beyond the tokenizer.
    cfg = base_config("llama", 32, 96, 3, 4, 1, (V + 63) // 64 * 64, False, "F16", 500000.0, 1, 2)
    spm_fixture("llama_mqa_f16", cfg, "F16", 22, [(0, 1), (2, 3)], bos_as_added_token=True)

    # 4. Linear rope scaling, head_dim 16 with hidden 48 / 4 heads (q_proj [64, 48]).
    cfg = base_config("llama", 48, 96, 2, 4, 4, V, False, "F32", 10000.0, 1, 2)
    cfg.update(head_dim=16, rope_scaling={"type": "linear", "factor": 2.0})
    spm_fixture("llama_linear", cfg, "F32", 24, [(0, 1), (1, 2)])

    # 5. Mistral, sliding_window 5 < T, GQA 4/2.
    cfg = base_config("mistral", 48, 128, 2, 4, 2, V, False, "F32", 10000.0, 1, 2)
    cfg.update(sliding_window=5, head_dim=12)
    spm_fixture("mistral_window", cfg, "F32", 25, [(0, 1), (1, 2)],
                extra=[("window_wide", [], 1.0, 8)])

    # 3. Llama 3.1-style: BF16, llama3 rope scaling, two shards, byte-level tokenizer.
    # original_max_position_embeddings 64 (not 16): with head_dim 16 and theta 5e5 the
    # wavelengths are 6.3, 32.3, 167, ...; 64/4 = 16 keeps the first, 64/1 = 64 divides the
    # third on, and the second falls in the smooth band. (With 16 and high_freq_factor 4, the
    # threshold 4 lies below 2*pi and no frequency would stay unscaled.)
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    vocab, merges = bytelevel_tokenizer(specials)
    ids = bytelevel_encode(TEXT, vocab, merges, LLAMA3_PATTERN, nfc=False, ignore_merges=True,
                           bos="<|begin_of_text|>")
    out = os.path.join(root, "llama3_bf16_sharded")
    cfg = base_config("llama", 64, 128, 2, 4, 2, len(vocab), False, "BF16", 500000.0,
                      vocab["<|begin_of_text|>"], [vocab["<|end_of_text|>"], vocab["<|eot_id|>"]])
    cfg.update(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
               max_position_embeddings=1024, head_dim=16)
    llama3_scaling_check(cfg)
    w = random_weights(cfg, seed(23), qkv_bias=False)
    make_fixture(out, "llama3_bf16_sharded", cfg, w, "BF16", 2, ids, TEXT, [(0, 1), (1, 3)])
    write_bytelevel_tokenizer(
        out, vocab, merges, specials, LLAMA3_PATTERN, nfc=False, ignore_merges=True,
        bos="<|begin_of_text|>", merges_as_pairs=True,
        tokenizer_config={"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                          "clean_up_tokenization_spaces": True, "model_max_length": 1024,
                          "model_input_names": ["input_ids", "attention_mask"],
                          "tokenizer_class": "PreTrainedTokenizerFast"})
    print("wrote", out, "T =", len(ids))

    # 6. Qwen2: q/k/v biases, a disabled sliding window, tied, byte-level tokenizer, no BOS.
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab, merges = bytelevel_tokenizer(specials)
    ids = bytelevel_encode(TEXT, vocab, merges, QWEN2_PATTERN, nfc=True, ignore_merges=False)
    out = os.path.join(root, "qwen2_bias")
    eot = vocab["<|endoftext|>"]
    cfg = base_config("qwen2", 32, 96, 2, 4, 2, (len(vocab) + 31) // 32 * 32, True, "BF16",
                      1000000.0, eot, eot, eps=1e-6)
    cfg.update(use_sliding_window=False, sliding_window=4, max_window_layers=2)
    w = random_weights(cfg, seed(26), qkv_bias=True)
    make_fixture(out, "qwen2_bias", cfg, w, "BF16", 1, ids, TEXT, [(0, 1), (1, 2)])
    write_bytelevel_tokenizer(
        out, vocab, merges, specials, QWEN2_PATTERN, nfc=True, ignore_merges=False, bos=None,
        merges_as_pairs=False,
        tokenizer_config={"add_prefix_space": False, "bos_token": None,
                          "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                          "errors": "replace", "model_max_length": 32768,
                          "split_special_tokens": False, "clean_up_tokenization_spaces": False,
                          "tokenizer_class": "Qwen2Tokenizer"})
    print("wrote", out, "T =", len(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
