#!/usr/bin/env python3
"""Times torch's own float32 forward pass in the GPT-2 small shape (12 layers, d 768, 12 heads,
MLP 3072, vocabulary 50257, 1024 positions), for the ratio in docs/performance.md to
attnviz_bench's Gpt2Forward_T128. Run by hand, not in CI:

    build/tests/bench/attnviz_bench --benchmark_filter=Gpt2Forward_T128
    python3 tests/bench/torch_gpt2_pass.py 128 --threads 1 2

The pass follows the published GPT-2 architecture (pre-LayerNorm blocks, fused q/k/v projection
with biases, causal softmax over scores / sqrt(d_h), tanh-approximated GELU, final LayerNorm,
tied head) on random weights of the real shapes (time does not depend on their values), keeps
every layer's attention weights and every position's logits, as the bench's pass does. Prints
the median of 5 timed runs after a warm-up, per thread count.
"""
import argparse
import statistics
import time

import torch

L, D, H, V, P = 12, 768, 12, 50257, 1024


def make_weights(gen):
    def rnd(*shape):
        return torch.randn(*shape, generator=gen) * 0.02

    layers = []
    for _ in range(L):
        layers.append(dict(ln1_w=torch.ones(D), ln1_b=torch.zeros(D), qkv=rnd(D, 3 * D),
                           qkv_b=torch.zeros(3 * D), proj=rnd(D, D), proj_b=torch.zeros(D),
                           ln2_w=torch.ones(D), ln2_b=torch.zeros(D), fc=rnd(D, 4 * D),
                           fc_b=torch.zeros(4 * D), out=rnd(4 * D, D), out_b=torch.zeros(D)))
    return layers, rnd(V, D), rnd(P, D)


def forward(layers, wte, wpe, ids):
    T = ids.shape[0]
    dh = D // H
    x = wte[ids] + wpe[:T]
    causal = torch.full((T, T), float("-inf")).triu(1)
    weights = []
    for w in layers:
        h = torch.nn.functional.layer_norm(x, (D,), w["ln1_w"], w["ln1_b"])
        q, k, v = (h @ w["qkv"] + w["qkv_b"]).split(D, dim=-1)
        q, k, v = (t.view(T, H, dh).transpose(0, 1) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(1, 2) / dh**0.5 + causal, dim=-1)
        weights.append(a)
        x = x + (a @ v).transpose(0, 1).reshape(T, D) @ w["proj"] + w["proj_b"]
        h = torch.nn.functional.layer_norm(x, (D,), w["ln2_w"], w["ln2_b"])
        m = torch.nn.functional.gelu(h @ w["fc"] + w["fc_b"], approximate="tanh")
        x = x + m @ w["out"] + w["out_b"]
    x = torch.nn.functional.layer_norm(x, (D,))
    return x @ wte.T, weights


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("T", type=int, nargs="+")
    ap.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    args = ap.parse_args()
    layers, wte, wpe = make_weights(torch.Generator().manual_seed(0))
    with torch.no_grad():
        for threads in args.threads:
            torch.set_num_threads(threads)
            for T in args.T:
                ids = torch.arange(T) * 7919 % V
                forward(layers, wte, wpe, ids)
                times = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    forward(layers, wte, wpe, ids)
                    times.append(time.perf_counter() - t0)
                print(f"torch {torch.__version__}, {threads} thread(s): GPT-2 small shape, T = {T}: "
                      f"median {statistics.median(times) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
