#!/usr/bin/env python3
"""The chat-format reference: renders the chat templates in chat/ with Jinja2 exactly as Hugging
Face's apply_chat_template does, and writes a tiny model folder for each case.

    python3 chat_reference.py OUT_DIR

The templates in chat/ are the public `chat_template` strings of the models' tokenizer_config.json
files (origin of each below); openchat.jinja stands for a format attnviz does not know:
  llama2.jinja       meta-llama/Llama-2-7b-chat-hf
  llama3.jinja       meta-llama/Meta-Llama-3-8B-Instruct (as llama.cpp's tests/test-chat-template.cpp
                     quotes it, with the add_generation_prompt guard of the release)
  llama3_2.jinja     meta-llama/Llama-3.2-1B-Instruct (strftime_now: today's date)
  (llama3_1)         the same with Llama 3.1's fixed default date, made below
  mistral_v01.jinja  mistralai/Mistral-7B-Instruct-v0.1 (first release: no system role)
  mistral_v03.jinja  mistralai/Mistral-7B-Instruct-v0.3
  qwen2_5.jinja      Qwen/Qwen2.5-7B-Instruct (its default system turn)
  gemma2.jinja       google/gemma-2-2b-it (raises on a system turn)
  gemma3.jinja       google/gemma-3-1b-it (the system text opens the first user turn)
  phi3.jinja         microsoft/Phi-3-mini-4k-instruct
  olmo2.jinja        allenai/OLMo-2-1124-7B-Instruct
  openchat.jinja     openchat/openchat-3.5-0106 (llama.cpp's test-chat-template.cpp)

Rendering: transformers' ImmutableSandboxedEnvironment with trim_blocks=True, lstrip_blocks=True,
the loopcontrols extension, and the globals raise_exception and strftime_now; messages
[{"role": "system", ...}?, {"role": "user", ...}], add_generation_prompt=True, bos_token and
eos_token as the tokenizer's special tokens map holds them (absent when the tokenizer has none).

Each case's folder: tokenizer.json (byte-level BPE: the 256 byte pieces, four merges, and the
family's special tokens as added tokens), tokenizer_config.json (chat_template, bos/eos),
config.json and, for the cases in WEIGHTS, a random one-layer Llama checkpoint (model.safetensors)
so that `attnviz model` runs on it. A vocab-only GGUF (tokenizer.ggml.* of the same vocabulary and
tokenizer.chat_template) is written for the cases in GGUF. OUT_DIR/cases.json lists every case:
{name: {"template", "system" (or null), "user", "rendered" (or null), "error" (or null)}}.
The ids are made from "rendered" by chat_tokenize.mjs (@huggingface/tokenizers).
"""
import datetime
import json
import os
import struct
import sys

import numpy as np
from jinja2.ext import loopcontrols
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import gguf_file as gg  # noqa: E402

LLAMA2 = dict(bos="<s>", eos="</s>", special=["<unk>", "<s>", "</s>"])
LLAMA3 = dict(bos="<|begin_of_text|>", eos="<|eot_id|>",
              special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                       "<|end_header_id|>", "<|eot_id|>"])
MISTRAL3 = dict(bos="<s>", eos="</s>", special=["<unk>", "<s>", "</s>", "[INST]", "[/INST]"])
QWEN = dict(bos=None, eos="<|im_end|>", special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
GEMMA = dict(bos="<bos>", eos="<eos>",
             special=["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"])
PHI3 = dict(bos="<s>", eos="<|endoftext|>",
            special=["<s>", "</s>", "<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>",
                     "<|end|>"])
OLMO2 = dict(bos="<|endoftext|>", eos="<|endoftext|>", special=["<|endoftext|>", "<|pad|>"])

USER = "  Why is the sky blue?\u00a0\n"
SYSTEM = " Answer in one sentence.\n"
# name: (template, tokenizer, system)
CASES = {
    "llama2": ("llama2", LLAMA2, None),
    "llama2_system": ("llama2", LLAMA2, SYSTEM),
    "llama3": ("llama3", LLAMA3, None),
    "llama3_system": ("llama3", LLAMA3, SYSTEM),
    "llama3_1": ("llama3_1", LLAMA3, None),
    "llama3_2": ("llama3_2", LLAMA3, None),
    "llama3_2_system": ("llama3_2", LLAMA3, SYSTEM),
    "mistral_v01": ("mistral_v01", LLAMA2, None),
    "mistral_v01_system": ("mistral_v01", LLAMA2, SYSTEM),
    "mistral_v03": ("mistral_v03", MISTRAL3, None),
    "mistral_v03_system": ("mistral_v03", MISTRAL3, SYSTEM),
    "qwen2_5": ("qwen2_5", QWEN, None),
    "qwen2_5_system": ("qwen2_5", QWEN, SYSTEM),
    "gemma2": ("gemma2", GEMMA, None),
    "gemma2_system": ("gemma2", GEMMA, SYSTEM),
    "gemma3": ("gemma3", GEMMA, None),
    "gemma3_system": ("gemma3", GEMMA, SYSTEM),
    "phi3": ("phi3", PHI3, None),
    "phi3_system": ("phi3", PHI3, SYSTEM),
    "olmo2": ("olmo2", OLMO2, None),
    "olmo2_system": ("olmo2", OLMO2, SYSTEM),
    "openchat": ("openchat", LLAMA2, None),
}
WEIGHTS = ["llama3_2_system", "qwen2_5", "gemma3_system", "mistral_v03_system"]
GGUF = ["llama3_2_system", "qwen2_5", "phi3"]
MERGES = [("Ġ", "t"), ("h", "e"), ("i", "n"), ("Ġt", "he")]


def raise_exception(message):
    raise TemplateError(message)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def render(template, tok, system):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    messages = ([{"role": "system", "content": system}] if system is not None else []) + \
        [{"role": "user", "content": USER}]
    kw = {k + "_token": tok[k] for k in ("bos", "eos") if tok[k] is not None}
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, **kw)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def vocabulary(tok):
    pieces = bytes_to_unicode() + [a + b for a, b in MERGES]
    return pieces, tok["special"]


def tokenizer_json(tok):
    pieces, special = vocabulary(tok)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": len(pieces) + i, "content": s, "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False, "special": True}
                         for i, s in enumerate(special)],
        "normalizer": None, "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, trim_offsets=False), "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {p: i for i, p in enumerate(pieces)},
                  "merges": [a + " " + b for a, b in MERGES]},
    }


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


D, FF, HEADS = 8, 16, 2


def llama_config(vocab):
    d, ff, heads = D, FF, HEADS
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": vocab,
           "hidden_size": d, "intermediate_size": ff, "num_hidden_layers": 1,
           "num_attention_heads": heads, "num_key_value_heads": heads,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "hidden_act": "silu"}


def write_llama(folder, vocab, seed):
    d, ff = D, FF
    cfg = llama_config(vocab)
    rng = np.random.default_rng(seed)
    r = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.5  # noqa: E731
    t = {"model.embed_tokens.weight": r(vocab, d), "model.norm.weight": 1 + r(d),
         "lm_head.weight": r(vocab, d)}
    p = "model.layers.0."
    for n in ("q", "k", "v", "o"):
        t[p + f"self_attn.{n}_proj.weight"] = r(d, d)
    t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"] = r(ff, d), r(ff, d)
    t[p + "mlp.down_proj.weight"] = r(d, ff)
    t[p + "input_layernorm.weight"], t[p + "post_attention_layernorm.weight"] = 1 + r(d), 1 + r(d)
    write_safetensors(os.path.join(folder, "model.safetensors"), t)
    return cfg


def write_gguf(path, tok, template):
    pieces, special = vocabulary(tok)
    tokens = pieces + special
    w = gg.GGUFWriter()
    w.add("general.architecture", gg.STR("llama"))
    w.add("tokenizer.ggml.model", gg.STR("gpt2"))
    w.add("tokenizer.ggml.pre", gg.STR("gpt-2"))
    w.add("tokenizer.ggml.tokens", gg.ARR(gg.STRT, tokens))
    w.add("tokenizer.ggml.token_type", gg.ARR(gg.I32T, [1] * len(pieces) + [3] * len(special)))
    w.add("tokenizer.ggml.merges", gg.ARR(gg.STRT, [a + " " + b for a, b in MERGES]))
    for k in ("bos", "eos"):
        if tok[k] is not None:
            w.add(f"tokenizer.ggml.{k}_token_id", gg.U32(tokens.index(tok[k])))
    w.add("tokenizer.ggml.add_bos_token", gg.BOOL_(False))
    w.add("tokenizer.chat_template", gg.STR(template))
    w.write(path)


def main():
    out = sys.argv[1]
    templates = {}
    for f in os.listdir(os.path.join(HERE, "chat")):
        if f.endswith(".jinja"):
            with open(os.path.join(HERE, "chat", f), encoding="utf-8") as fh:
                templates[f[:-6]] = fh.read()
    # Llama 3.1: no strftime_now branch, the fixed default date.
    t = templates["llama3_2"]
    a = t.index("{%- if not date_string is defined %}")
    b = t.index("{%- if not tools is defined %}")
    templates["llama3_1"] = t[:a] + ('{%- if not date_string is defined %}\n'
                                     '    {%- set date_string = "26 Jul 2024" %}\n{%- endif %}\n') + t[b:]
    cases = {}
    for name, (tname, tok, system) in CASES.items():
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        try:
            rendered, error = render(templates[tname], tok, system), None
        except TemplateError as e:
            rendered, error = None, str(e)
        cases[name] = {"template": tname, "system": system, "user": USER, "rendered": rendered,
                       "error": error, "gguf": name in GGUF}
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tokenizer_json(tok), f, ensure_ascii=False)
        with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"bos_token": tok["bos"], "eos_token": tok["eos"], "add_bos_token": False,
                       "chat_template": templates[tname]}, f, ensure_ascii=False)
        vocab = len(vocabulary(tok)[0]) + len(tok["special"])
        cfg = llama_config(vocab)  # tokenize reads config.json; weights only where a pass runs
        if name in WEIGHTS:
            cfg = write_llama(folder, vocab, len(cases))
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(cfg, f)
        if name in GGUF:
            write_gguf(os.path.join(out, name + ".gguf"), tok, templates[tname])
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
