#!/usr/bin/python3
"""Round trips for the export tests: PyTorch models (random init) captured with
tools/python/attnviz_dump.py, plus the reference weights each dumped layer must show, computed
apart from the capture by calling each nn.MultiheadAttention again with per-head weights.

  dump_roundtrip.py OUTDIR   writes OUTDIR/<model>.safetensors and OUTDIR/<model>.<layer>.npy
                             ([H, T_q, T_k] float32) for encoder, transformer and hf
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "python"))
import attnviz_dump  # noqa: E402


def reference_hooks(model, masks, batch, out):
    """Pre-hooks that recompute every nn.MultiheadAttention call with per-head weights.
    masks: module -> attn_mask its caller passes (the layers pass masks by keyword, which 1.13's
    pre-hooks do not see)."""
    handles = []
    for _, m in model.named_modules():
        if isinstance(m, nn.MultiheadAttention):
            def hook(mod, args, m=m):
                q, k, v = args[:3]
                _, w = nn.MultiheadAttention.forward(mod, q, k, v, attn_mask=masks.get(m),
                                                     need_weights=True,
                                                     average_attn_weights=False)
                out.append(w[batch].float().numpy())
            handles.append(m.register_forward_pre_hook(hook))
    return handles


def check_same(a, b, what):
    if not torch.equal(a, b):
        raise SystemExit(f"{what}: the capture changed the model's output")


def main(outdir):
    torch.manual_seed(1234)
    with torch.no_grad():
        # An encoder whose layers call self_attn with need_weights=False, in eval mode with
        # batch_first: the case torch runs through its fused fast path.
        enc = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                       batch_first=True), num_layers=2).eval()
        x = torch.randn(2, 9, 32)
        plain = enc(x)
        refs = []
        handles = reference_hooks(enc, {}, 1, refs)
        with attnviz_dump.capture(enc) as rec:
            got = enc(x)
        for h in handles:
            h.remove()
        torch.testing.assert_close(got, plain, rtol=1e-5, atol=1e-5)
        if len(rec.records) != 2 or len(refs) != 2:
            raise SystemExit(f"encoder: captured {len(rec.records)} calls, reference {len(refs)}")
        words = ["the", "cat", "sat", "on", "the", "mat", "and", "slept", "."]
        rec.save(f"{outdir}/encoder.safetensors", tokens=words, model="nn.TransformerEncoder",
                 batch=1)
        for i, r in enumerate(refs):
            np.save(f"{outdir}/encoder.{i}.npy", r)

        # An encoder-decoder with a causal target mask (sequence-first, batch of 2): encoder
        # self-attention over 7 source tokens, decoder self-attention over 5 target tokens,
        # cross-attention 5 x 7.
        tr = nn.Transformer(d_model=24, nhead=3, num_encoder_layers=2, num_decoder_layers=2,
                            dim_feedforward=48, dropout=0.0).eval()
        src, tgt = torch.randn(7, 2, 24), torch.randn(5, 2, 24)
        causal = tr.generate_square_subsequent_mask(5)
        masks = {layer.self_attn: causal for layer in tr.decoder.layers}
        plain = tr(src, tgt, tgt_mask=causal)
        refs = []
        handles = reference_hooks(tr, masks, 0, refs)
        with attnviz_dump.capture(tr) as rec:
            got = tr(src, tgt, tgt_mask=causal)
        for h in handles:
            h.remove()
        check_same(got, plain, "transformer")
        names = [r["name"] for r in rec.records]
        want = ["encoder.0", "encoder.1", "decoder.0", "decoder.0.cross", "decoder.1",
                "decoder.1.cross"]
        if names != want:
            raise SystemExit(f"transformer: captured {names}")
        rec.save(f"{outdir}/transformer.safetensors", tokens=["<s>", "a", "small", "test", "."],
                 key_tokens=["ein", "kleiner", "Test", "mit", "sieben", "W\u00f6rtern", "</s>"],
                 model="nn.Transformer")
        for i, r in enumerate(refs):
            np.save(f"{outdir}/transformer.{i}.npy", r)

        # save() with a Hugging Face style tuple ([B, H, T, T] per layer), second sequence, and
        # positions for tokens.
        hf = tuple(torch.softmax(torch.randn(3, 2, 6, 6) * 2.0, dim=-1) for _ in range(3))
        attnviz_dump.save(f"{outdir}/hf.safetensors", hf, batch=2, model="hf-like")
        for i, a in enumerate(hf):
            np.save(f"{outdir}/hf.{i}.npy", a[2].numpy())
        # A caller that wants the head-averaged weights still gets them, unchanged.
        mha = nn.MultiheadAttention(16, 4).eval()
        y = torch.randn(5, 1, 16)
        o1, w1 = mha(y, y, y)
        with attnviz_dump.capture(mha) as rec:
            o2, w2 = mha(y, y, y)
        check_same(o2, o1, "nn.MultiheadAttention output")
        torch.testing.assert_close(w2, w1, rtol=1e-6, atol=1e-7)
        if len(rec.records) != 1 or rec.records[0]["weights"].shape != (1, 4, 5, 5):
            raise SystemExit("nn.MultiheadAttention: per-head weights not recorded")

        # A list of plain numpy arrays: [H, T_q, T_k] and a one-head [T_q, T_k], with tokens.
        rng = np.random.default_rng(5)
        arrays = [rng.dirichlet(np.ones(4), size=(2, 4)).astype(np.float32),
                  rng.dirichlet(np.ones(4), size=4)]
        attnviz_dump.save(f"{outdir}/np.safetensors", arrays, tokens=list("abcd"),
                          names=["first", "second"])
        np.save(f"{outdir}/np.0.npy", arrays[0])
        np.save(f"{outdir}/np.1.npy", arrays[1][None].astype(np.float32))
        # The same as float16.
        attnviz_dump.save(f"{outdir}/hf16.safetensors", hf, batch=2, dtype=np.float16)
        for i, a in enumerate(hf):
            np.save(f"{outdir}/hf16.{i}.npy", a[2].numpy().astype(np.float16).astype(np.float32))


if __name__ == "__main__":
    main(sys.argv[1])
