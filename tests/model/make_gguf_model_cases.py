#!/usr/bin/python3
"""GGUF model files of every common type, and what the float64 torch reference computes on exactly
the weights each file holds: the test cases of gguf_model_test.cpp. Run at test time into a
temporary folder (never committed); takes a few seconds.

    /usr/bin/python3 tests/model/make_gguf_model_cases.py OUT_DIR [--bad-only]

(--bad-only: only the llama checkpoint, its F32 file and the broken copies, with "models" empty.)

Three random Hugging Face checkpoints, whose matrices all have rows of 256 or 512 values so that
the K-quants (256-value super-blocks) really apply to every matrix (hf_to_gguf.py falls back to F16
only for rows that are not whole blocks):
  llama   d 256, MLP 512, 2 layers, 4 query heads over 2 KV heads (head 64), untied head,
          Llama-2-style tokenizer.json (make_llama_fixtures.py's SentencePiece BPE, BOS <s>)
  qwen2   the same shape with q/k/v biases, tied head, Qwen2 byte-level tokenizer (no BOS)
  gpt2    d 256, 4 heads, MLP 512, 2 layers, tied, GPT-2 vocab.json + merges.txt
Each is converted by tools/gguf/hf_to_gguf.py to F32, F16, Q8_0, Q4_0, Q4_K and Q6_K files. Then
each file is read back with tools/gguf/gguf_file.py, every tensor dequantized with quants.py (the
values ggml's block layouts define), and the reference forward pass runs on those values, with
the hyperparameters the file's metadata states (f32 eps and RoPE base as stored):
  llama: llama_reference.forward with interleaved RoPE on the GGUF's own (Meta) q/k row order;
         asserted equal to rotate-half on the rows permuted back to HF order (meta_to_hf)
  qwen2: llama_reference.forward, rotate-half, nothing permuted (llama.cpp runs qwen2 as NEOX)
  gpt2:  make_gpt2_fixtures.forward, the GGUF's [out, in] matrices transposed back to Conv1D
The F32 file's reference is also asserted equal (to float32 rounding) to the reference on the HF
checkpoint itself: the conversion is faithful, so the quantized files differ from F32 only by
their quantization.

OUT_DIR/cases.json:
  {"models": [{"name", "arch", "hf": folder, "text", "ids": [...], "files": [{"type", "file",
    "weights": [L,H,T,T] .npy, "logits": [T,V] .npy, "max_abs_dweights_vs_f32": [[per head] per
    layer], "max_abs_dlogits_vs_f32"}]}],
   "bad": [{"name", "file", "expect": substring of the one-line error}]}
The "bad" files are broken copies of the llama F32 file, written with gguf_file.py: a tensor
dropped, a tensor type id ggml does not define, a vocab_size that disagrees with the embedding,
more tokens than embedding rows, an IQ4_NL attention weight (a type attnviz cannot read); and two
copies of the gpt2 F32 file whose head_count_kv or key_length do not fit GPT-2's fused c_attn.
OUT_DIR/quant_table.md: the largest change of any attention weight per head against the F32 file,
per type and model (for docs/gguf.md).
"""
import json
import os
import struct
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gguf"))
import gguf_file as gg  # noqa: E402
import hf_to_gguf  # noqa: E402
import llama_reference as ref  # noqa: E402
import make_gpt2_fixtures as g2  # noqa: E402
import make_llama_fixtures as lf  # noqa: E402

TYPES = ["F32", "F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"]
LLAMA_TEXT = lf.TEXT
GPT2_TEXT = "The cat sat on the mat; the cat's hat is at 42 in the sitting room."

# ---------------------------------------------------------------------------------------------
# Hugging Face checkpoints


def llama_checkpoint(out):
    vocab, merges = lf.spm_tokenizer()
    ids = lf.spm_encode(LLAMA_TEXT, vocab, merges)
    cfg = lf.base_config("llama", 256, 512, 2, 4, 2, len(vocab), False, "F32", 10000.0, 1, 2)
    w = lf.random_weights(cfg, torch.Generator().manual_seed(201), qkv_bias=False)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    lf.write_weights(out, w, "F32", 1)
    lf.write_spm_tokenizer(out, vocab, merges)
    return cfg, {k: lf.stored(v, "F32") for k, v in w.items()}, ids


def qwen2_checkpoint(out):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab, merges = lf.bytelevel_tokenizer(specials)
    ids = lf.bytelevel_encode(LLAMA_TEXT, vocab, merges, lf.QWEN2_PATTERN, nfc=True,
                              ignore_merges=False)
    eot = vocab["<|endoftext|>"]
    cfg = lf.base_config("qwen2", 256, 512, 2, 4, 2, len(vocab), True, "F32", 1000000.0, eot, eot,
                         eps=1e-6)
    cfg.update(use_sliding_window=False, sliding_window=4096, max_window_layers=2)
    w = lf.random_weights(cfg, torch.Generator().manual_seed(202), qkv_bias=True)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    lf.write_weights(out, w, "F32", 1)
    lf.write_bytelevel_tokenizer(
        out, vocab, merges, specials, lf.QWEN2_PATTERN, nfc=True, ignore_merges=False, bos=None,
        merges_as_pairs=False,
        tokenizer_config={"add_prefix_space": False, "bos_token": None,
                          "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                          "errors": "replace", "model_max_length": 32768,
                          "split_special_tokens": False, "clean_up_tokenization_spaces": False,
                          "tokenizer_class": "Qwen2Tokenizer"})
    return cfg, {k: lf.stored(v, "F32") for k, v in w.items()}, ids


def gpt2_checkpoint(out):
    # (L, H, d, P); gelu_new: the activation llama.cpp's gpt2 graph uses (ggml_gelu, tanh form).
    cfg, ws, lm, vocab, merges = g2.make_checkpoint(out, (2, 4, 256, 64), 203, "F32", True, True,
                                                    "gelu_new", 512, False)
    ids = g2.bpe_encode(GPT2_TEXT, vocab, {m: r for r, m in enumerate(merges)})
    return cfg, ws, lm, ids


# ---------------------------------------------------------------------------------------------
# Reading a GGUF back and the reference on its values


def read_back(path):
    """(metadata, {gguf name: float64 torch tensor in numpy order}, {name: type name})"""
    r = gg.GGUFReader(path)
    tensors = {t.name: torch.from_numpy(r.dequantize(t).astype(np.float64)) for t in r.tensors}
    types = {t.name: t.type_name for t in r.tensors}
    meta = dict(r.metadata)
    r.close()
    return meta, tensors, types


def f32(x):
    return float(np.float32(x))


def llama_family_config(meta, arch, tensors):
    g = lambda k, default=None: meta.get(f"{arch}.{k}", default)  # noqa: E731
    heads = int(g("attention.head_count"))
    return {"model_type": arch, "hidden_size": int(g("embedding_length")),
            "intermediate_size": int(g("feed_forward_length")),
            "num_hidden_layers": int(g("block_count")), "num_attention_heads": heads,
            "num_key_value_heads": int(g("attention.head_count_kv", heads)),
            "rms_norm_eps": f32(g("attention.layer_norm_rms_epsilon")),
            "rope_theta": f32(g("rope.freq_base", 10000.0)), "rope_scaling": None,
            "vocab_size": int(tensors["token_embd.weight"].shape[0]),
            "tie_word_embeddings": "output.weight" not in tensors}


def hf_names_llama(tensors):
    from stories260k_to_hf import hf_name
    return {hf_name(k): v for k, v in tensors.items()}


def reference_llama_family(path, ids):
    meta, tensors, types = read_back(path)
    arch = meta["general.architecture"]
    cfg = llama_family_config(meta, arch, tensors)
    w = hf_names_llama(tensors)
    if arch == "llama":
        att, logits = ref.forward(cfg, w, ids, rope_convention="interleaved")
        # The same model in HF's order with rotate-half.
        a2, z2 = ref.forward(cfg, ref.permute_qk(w, cfg, ref.meta_to_hf), ids,
                             rope_convention="half")
        assert (a2 - att).abs().max() < 1e-12 and (z2 - logits).abs().max() < 1e-9, path
        # ... and the convention matters on these weights.
        a3, _ = ref.forward(cfg, w, ids, rope_convention="half")
        assert (a3 - att).abs().max() > 0.05, path
    else:
        att, logits = ref.forward(cfg, w, ids, rope_convention="half")
    return cfg, att, logits, types


def reference_gpt2(path, ids):
    meta, tensors, types = read_back(path)
    cfg = {"n_embd": int(meta["gpt2.embedding_length"]), "n_head": int(meta["gpt2.attention.head_count"]),
           "n_layer": int(meta["gpt2.block_count"]),
           "layer_norm_epsilon": f32(meta["gpt2.attention.layer_norm_epsilon"]),
           "activation_function": "gelu_new"}
    w = {"wte.weight": tensors["token_embd.weight"], "wpe.weight": tensors["position_embd.weight"],
         "ln_f.weight": tensors["output_norm.weight"], "ln_f.bias": tensors["output_norm.bias"]}
    names = {"attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj",
             "ffn_norm": "ln_2", "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
    for l in range(cfg["n_layer"]):
        for src, dst in names.items():
            for kind in ("weight", "bias"):
                t = tensors[f"blk.{l}.{src}.{kind}"]
                if kind == "weight" and t.dim() == 2:
                    t = t.T.contiguous()       # ggml [out, in] rows -> Conv1D [in, out]
                w[f"h.{l}.{dst}.{kind}"] = t
    lm = tensors.get("output.weight", w["wte.weight"])
    att, logits = g2.forward(cfg, w, lm, ids)
    return cfg, att, logits, types


# ---------------------------------------------------------------------------------------------
# Broken copies


def vtype_of(desc):
    """gguf_file's type description ("uint32", "array[string]") -> (vtype, elem type)"""
    names = {v: k for k, v in gg.VTYPE_NAMES.items()}
    if desc.startswith("array["):
        inner = desc[len("array["):-1]
        if inner.startswith("array"):
            raise ValueError("nested arrays are not copied here")
        return gg.ARRAY, names[inner]
    return names[desc], None


def rewrite(src, dst, drop=(), meta=None, raw=None):
    """A copy of src with tensors dropped, metadata values replaced or added ({key: Val}) and tensors
    replaced ({name: (type name, raw bytes)})."""
    r = gg.GGUFReader(src)
    w = gg.GGUFWriter(version=r.version, alignment=r.alignment)
    meta = meta or {}
    raw = raw or {}
    for k, v in r.metadata.items():
        if k in meta:
            w.add(k, meta[k])
            continue
        vt, et = vtype_of(r.types[k])
        w.add(k, gg.Val(vt, v, et))
    for k, v in meta.items():  # keys the source does not have
        if k not in r.metadata:
            w.add(k, v)
    for t in r.tensors:
        if t.name in drop:
            continue
        if t.name in raw:
            tname, data = raw[t.name]
            w.add_tensor_raw(t.name, data, tname, t.ne)
        else:
            w.add_tensor_raw(t.name, bytes(t.raw), t.type_name, t.ne)
    w.write(dst)
    r.close()


def patch_tensor_type(path, name, type_id):
    """Overwrites the type id in tensor `name`'s info (ggml's ids: 99 is none)."""
    with open(path, "rb") as f:
        b = bytearray(f.read())
    enc = struct.pack("<Q", len(name)) + name.encode()
    at = b.find(enc)
    assert at > 0, name
    p = at + len(enc)
    nd = struct.unpack_from("<I", b, p)[0]
    p += 4 + 8 * nd
    struct.pack_into("<I", b, p, type_id)
    with open(path, "wb") as f:
        f.write(b)


def bad_gpt2_files(out, good, case):
    """gpt2 files whose metadata claims a head size or KV heads of their own: GPT-2's fused
    [3d, d] c_attn cannot hold them, so the file is refused before a pass reads past a buffer."""
    r = gg.GGUFReader(good)
    H = int(r.metadata["gpt2.attention.head_count"])
    d = int(r.metadata["gpt2.embedding_length"])
    r.close()
    rewrite(good, case("gpt2_kv_heads", "a gpt2 model needs gpt2.attention.head_count_kv"),
            meta={"gpt2.attention.head_count_kv": gg.U32(H // 2)})
    rewrite(good, case("gpt2_key_length", "a gpt2 model needs gpt2.attention.head_count_kv"),
            meta={"gpt2.attention.key_length": gg.U32(2 * d // H)})


def bad_files(out, good, gpt2_good=None):
    os.makedirs(out, exist_ok=True)
    r = gg.GGUFReader(good)
    V = r.by_name["token_embd.weight"].ne[1]
    tokens = list(r.metadata["tokenizer.ggml.tokens"])
    q = r.by_name["blk.0.attn_q.weight"]
    iq_bytes = q.n_elements // 32 * 18          # IQ4_NL: 18 bytes per 32 values
    r.close()
    cases = []

    def case(name, expect):
        path = os.path.join(out, name + ".gguf")
        cases.append({"name": name, "file": os.path.relpath(path, os.path.dirname(out)),
                      "expect": expect})
        return path

    rewrite(good, case("missing_tensor", "missing tensor 'blk.1.attn_q.weight'"),
            drop={"blk.1.attn_q.weight"})
    p = case("unknown_type", "unknown")
    rewrite(good, p)
    patch_tensor_type(p, "blk.0.ffn_up.weight", 99)
    rewrite(good, case("vocab_size_mismatch",
                       f"llama.vocab_size {V + 1} disagrees with token_embd.weight's {V} rows"),
            meta={"llama.vocab_size": gg.U32(V + 1)})
    rewrite(good, case("more_tokens_than_rows", f"token_embd.weight's {V} rows"),
            meta={"tokenizer.ggml.tokens": gg.ARR(gg.STRT, tokens + ["extra"]),
                  "tokenizer.ggml.scores": gg.ARR(gg.F32T, np.zeros(V + 1, np.float32)),
                  "tokenizer.ggml.token_type": gg.ARR(gg.I32T, np.ones(V + 1, np.int32))})
    rng = np.random.default_rng(5)
    rewrite(good, case("iq_weight", "'blk.0.attn_q.weight' has type IQ4_NL"),
            raw={"blk.0.attn_q.weight": ("IQ4_NL", rng.integers(0, 256, iq_bytes,
                                                                 dtype=np.uint8).tobytes())})
    if gpt2_good:
        bad_gpt2_files(out, gpt2_good, case)
    return cases


# ---------------------------------------------------------------------------------------------


def save_npy(path, t):
    np.save(path, t.numpy().astype(np.float32))


def maxdiff(a, b):
    return float((a - b).abs().max())


def main():
    args = [a for a in sys.argv[1:] if a != "--bad-only"]
    bad_only = "--bad-only" in sys.argv[1:]
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = os.path.abspath(args[0])
    os.makedirs(root, exist_ok=True)
    torch.set_num_threads(1)
    t0 = time.time()
    models = []
    if bad_only:
        llama_checkpoint(os.path.join(root, "llama_hf"))
        hf_to_gguf.convert(os.path.join(root, "llama_hf"), os.path.join(root, "llama_F32.gguf"),
                           "F32", quiet=True)
        gpt2_checkpoint(os.path.join(root, "gpt2_hf"))
        hf_to_gguf.convert(os.path.join(root, "gpt2_hf"), os.path.join(root, "gpt2_F32.gguf"),
                           "F32", quiet=True)
    for name in ([] if bad_only else ["llama", "qwen2", "gpt2"]):
        hf = os.path.join(root, name + "_hf")
        if name == "gpt2":
            cfg_hf, w_hf, lm_hf, ids = gpt2_checkpoint(hf)
            att_hf, logits_hf = g2.forward(cfg_hf, w_hf, lm_hf, ids)
            text = GPT2_TEXT
        else:
            cfg_hf, w_hf, ids = (llama_checkpoint if name == "llama" else qwen2_checkpoint)(hf)
            att_hf, logits_hf = ref.forward(cfg_hf, w_hf, ids)
            text = LLAMA_TEXT
        entry = {"name": name, "hf": os.path.basename(hf), "text": text, "ids": ids, "files": []}
        base_att = base_logits = None
        for qtype in TYPES:
            fname = f"{name}_{qtype}.gguf"
            path = os.path.join(root, fname)
            hf_to_gguf.convert(hf, path, qtype, quiet=True)
            if name == "gpt2":
                cfg, att, logits, types = reference_gpt2(path, ids)
            else:
                cfg, att, logits, types = reference_llama_family(path, ids)
            entry["arch"] = name
            # Every matrix really is of the file's type (rows are whole blocks).
            mats = {t for n, t in types.items() if not n.endswith((".bias", "_norm.weight"))}
            assert mats == {qtype}, (fname, mats)
            assert torch.allclose(att.sum(-1), torch.ones_like(att.sum(-1)), atol=1e-12)
            if qtype == "F32":
                base_att, base_logits = att, logits
                # Faithful conversion: the F32 file computes what the HF checkpoint computes.
                assert maxdiff(att, att_hf) < 1e-5, (fname, maxdiff(att, att_hf))
                assert maxdiff(logits, logits_hf) < 1e-4 * float(logits_hf.abs().max())
                peak = float(att[:, :, 7:, :].max(-1).values.mean())
                assert peak > 0.3, (fname, peak)       # heads attend sharply, not uniformly
            stem = fname[:-len(".gguf")]
            save_npy(os.path.join(root, stem + "_weights.npy"), att)
            save_npy(os.path.join(root, stem + "_logits.npy"), logits)
            dw = (att - base_att).abs().amax(dim=(2, 3))         # [L, H]
            entry["files"].append({
                "type": qtype, "file": fname, "weights": stem + "_weights.npy",
                "logits": stem + "_logits.npy",
                "max_abs_dweights_vs_f32": [[round(float(v), 6) for v in row] for row in dw],
                "max_abs_dlogits_vs_f32": round(maxdiff(logits, base_logits), 6)})
        # Quantization moves the attention, more the coarser the type.
        d = {f["type"]: max(max(r) for r in f["max_abs_dweights_vs_f32"]) for f in entry["files"]}
        assert d["F32"] == 0 and d["Q4_0"] > d["Q8_0"] and d["Q4_K"] > d["Q6_K"], (name, d)
        models.append(entry)
    bad = bad_files(os.path.join(root, "bad"), os.path.join(root, "llama_F32.gguf"),
                    os.path.join(root, "gpt2_F32.gguf"))
    with open(os.path.join(root, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"models": models, "bad": bad}, f, indent=1, ensure_ascii=False)
    if bad_only:
        print(f"wrote {root} in {time.time() - t0:.1f} s")
        return 0

    # The table of docs/gguf.md: per type, per model, the largest change over the heads of each
    # head's largest |delta attention weight| against the F32 file (and the median head).
    lines = ["| type | " + " | ".join(m["name"] + " (worst head / median head)" for m in models)
             + " |", "|---|" + "---|" * len(models)]
    for i, qtype in enumerate(TYPES[1:], 1):
        cells = []
        for m in models:
            per_head = sorted(v for row in m["files"][i]["max_abs_dweights_vs_f32"] for v in row)
            cells.append(f"{per_head[-1]:.2g} / {float(np.median(per_head)):.2g}")
        lines.append(f"| {qtype} | " + " | ".join(cells) + " |")
    with open(os.path.join(root, "quant_table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {root} in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
