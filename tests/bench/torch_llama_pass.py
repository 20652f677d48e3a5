#!/usr/bin/env python3
"""Times torch's own float32 forward pass of a LLaMA folder, for the ratio to attnviz's in
docs/performance.md (the target: docs/design/performance.md). Run by hand, not in CI, on the
checkpoint attnviz_bench writes and keeps:

    ATTNVIZ_BENCH_KEEP=1 ATTNVIZ_BENCH_DIR=/tmp build/tests/bench/attnviz_bench \
        --benchmark_filter=SmolOpen
    python3 tests/bench/torch_llama_pass.py /tmp/attnviz_smollm2_135m_<pid> 128 512
    THREADS="1 2" python3 tests/bench/torch_llama_pass.py /tmp/attnviz_smollm2_135m_<pid> 128

The pass follows the published LLaMA architecture (RMSNorm, RoPE in the rotate-half
convention, grouped-query attention, gated SiLU, tied head), float32, with the threads attnviz
uses (all cores; THREADS="1 2" times each count in turn), and keeps every layer's attention weights, as the default Capture does (so the
attention is computed explicitly, not by a fused kernel that never forms the weights). Prints
the median of 5 timed runs after a warm-up, per T.
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import torch


def load_file(path):
    """The F32 tensors of a .safetensors file (an 8-byte header length, a JSON header, the data);
    Debian has no python3-safetensors."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {t['dtype']}; this script reads F32 only")
        a, b = t["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=np.float32).reshape(t["shape"]).copy())
    return out


def forward(cfg, w, ids):
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    KV = cfg["num_key_value_heads"]
    dh = d // H
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    inv = cfg["rope_theta"] ** (-torch.arange(0, dh, 2, dtype=torch.float32) / dh)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)
    sin = torch.cat([ang.sin(), ang.sin()], -1)

    def norm(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g

    def rot(x):  # [heads, T, dh]
        a, b = x[..., : dh // 2], x[..., dh // 2:]
        return x * cos + torch.cat([-b, a], -1) * sin

    mask = torch.full((T, T), float("-inf")).triu(1)
    x = w["model.embed_tokens.weight"][torch.as_tensor(ids)]
    kept = []
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = norm(x, w[p + "input_layernorm.weight"])
        q = (a @ w[p + "self_attn.q_proj.weight"].T).view(T, H, dh).transpose(0, 1)
        k = (a @ w[p + "self_attn.k_proj.weight"].T).view(T, KV, dh).transpose(0, 1)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).view(T, KV, dh).transpose(0, 1)
        q, k = rot(q), rot(k)
        k = k.repeat_interleave(H // KV, 0)
        v = v.repeat_interleave(H // KV, 0)
        att = torch.softmax(q @ k.transpose(1, 2) / dh ** 0.5 + mask, -1)
        kept.append(att)
        o = (att @ v).transpose(0, 1).reshape(T, d)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        m = norm(x, w[p + "post_attention_layernorm.weight"])
        g = m @ w[p + "mlp.gate_proj.weight"].T
        u = m @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
    logits = norm(x, w["model.norm.weight"]) @ w["model.embed_tokens.weight"].T
    return logits, kept


def main():
    folder = sys.argv[1]
    sizes = [int(t) for t in sys.argv[2:]] or [128]
    counts = [int(n) for n in os.environ.get("THREADS", str(os.cpu_count())).split()]
    cfg = json.load(open(os.path.join(folder, "config.json")))
    w = load_file(os.path.join(folder, "model.safetensors"))
    with torch.inference_mode():
        for threads in counts:
            torch.set_num_threads(threads)
            print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32")
            for T in sizes:
                ids = [(t * 7919) % cfg["vocab_size"] for t in range(T)]  # as bench_llama.cpp
                forward(cfg, w, ids)
                times = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    forward(cfg, w, ids)
                    times.append((time.perf_counter() - t0) * 1e3)
                print(f"T={T}: median {statistics.median(times):.1f} ms "
                      f"(runs {', '.join(f'{t:.1f}' for t in times)})")

if __name__ == "__main__":
    main()
