"""A small Gemma 2 in plain torch, written from the published architecture (Gemma Team 2024,
"Gemma 2: Improving Open Language Models at a Practical Size") with the Hugging Face
Gemma2ForCausalLM key names, so the saved model.safetensors and config.json load there (and in
attnviz) unchanged. What differs from llama_lm.py's LLaMA (RoPE, GQA and the save format are
shared with it):
  - the embeddings are multiplied by sqrt(d) (a float32 number);
  - every RMSNorm scales by (1 + w), w starting at 0; four of them a layer: input_layernorm
    before attention, post_attention_layernorm on the attention output before the residual add,
    pre_feedforward_layernorm before the MLP, post_feedforward_layernorm on its output;
  - the scores are q.k / sqrt(query_pre_attn_scalar), then soft-capped, c tanh(s / c)
    (attn_logit_softcapping), before the mask;
  - even layers (0, 2, ...) are local: key j is allowed for query i iff i - W < j <= i
    (sliding_window W); odd layers are global (causal only);
  - the MLP is GeGLU: down(gelu_tanh(gate(n)) * up(n));
  - the final logits are soft-capped too: c tanh(z / c) (final_logit_softcapping).
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import llama_lm
from llama_lm import rope_tables, rotate_half, save, write_json  # noqa: F401 (re-exported)


def make_config(vocab_size, hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads,
                head_dim, max_positions, sliding_window, attn_softcap, final_softcap,
                rms_norm_eps=1e-6, rope_theta=10000.0, tied=False):
    """config.json as HF's Gemma2Config writes it (the fields attnviz and transformers read).
    layer_types spells out the even-layers-local rule the model_type implies."""
    return {
        "architectures": ["Gemma2ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_logit_softcapping": attn_softcap,
        "bos_token_id": 1,
        "cache_implementation": "hybrid",
        "eos_token_id": 2,
        "final_logit_softcapping": final_softcap,
        "head_dim": head_dim,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size,
        "layer_types": ["sliding_attention" if l % 2 == 0 else "full_attention"
                        for l in range(n_layers)],
        "max_position_embeddings": max_positions,
        "model_type": "gemma2",
        "num_attention_heads": n_heads,
        "num_hidden_layers": n_layers,
        "num_key_value_heads": n_kv_heads,
        "pad_token_id": 0,
        "query_pre_attn_scalar": head_dim,
        "rms_norm_eps": rms_norm_eps,
        "rope_scaling": None,
        "rope_theta": rope_theta,
        "sliding_window": sliding_window,
        "tie_word_embeddings": tied,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": vocab_size,
    }


def local_layers(cfg):
    return [t == "sliding_attention" for t in cfg["layer_types"]]


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * (1 + w), w stored (HF's Gemma2RMSNorm, computed in float32)."""

    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)) * (1.0 + self.weight)


class Attention(llama_lm.Attention):
    """llama_lm's projections; the scale, the cap and the window of Gemma 2."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.scale = cfg["query_pre_attn_scalar"] ** -0.5
        self.cap = cfg["attn_logit_softcapping"] or 0.0

    def forward(self, x, cos, sin, mask, ablate_heads=(), keep_weights=None, keep_scores=None):
        """mask: [T, T] additive (0 allowed, -inf not), this layer's (causal, or windowed)."""
        B, T, _ = x.shape
        H, KV, D = self.H, self.KV, self.D
        g = H // KV
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)
        k = self.k_proj(x).view(B, T, KV, D).transpose(1, 2)
        v = self.v_proj(x).view(B, T, KV, D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        qg = q.reshape(B * KV, g * T, D)  # query head h reads KV head h // g
        s = torch.bmm(qg, k.reshape(B * KV, T, D).transpose(1, 2)) * self.scale
        if keep_scores is not None:  # the scaled scores, before the cap (masked: -inf)
            keep_scores.append((s.detach().view(B, H, T, T) + mask))
        if self.cap:
            s = self.cap * torch.tanh(s / self.cap)
        a = torch.softmax(s + mask.repeat(g, 1).unsqueeze(0), dim=-1)
        if keep_weights is not None:
            keep_weights.append(a.detach().view(B, H, T, T))
        o = torch.bmm(a, v.reshape(B * KV, T, D)).view(B, H, T, D)
        if ablate_heads:
            o = o.clone()
            for h in ablate_heads:
                o[:, h] = 0.0
        return self.o_proj(o.transpose(1, 2).reshape(B, T, H * D))


class MLP(llama_lm.MLP):
    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(d, eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(d, eps)
        self.pre_feedforward_layernorm = RMSNorm(d, eps)
        self.mlp = MLP(cfg)
        self.post_feedforward_layernorm = RMSNorm(d, eps)

    def forward(self, x, cos, sin, mask, ablate_heads=(), keep_weights=None, keep_scores=None):
        u = self.self_attn(self.input_layernorm(x), cos, sin, mask, ablate_heads, keep_weights,
                           keep_scores)
        x = x + self.post_attention_layernorm(u)
        return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))


class Body(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([Layer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class Gemma2LM(nn.Module):
    """Gemma2ForCausalLM's layout: model.* and, untied, lm_head.weight [V, d]."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Body(cfg)
        if not cfg["tie_word_embeddings"]:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        std, d = cfg["initializer_range"], cfg["hidden_size"]
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=std)
        # the embeddings at 1/sqrt(d), so that after the sqrt(d) factor each component is ~1,
        # as large as what the post-norms write into the residual stream
        nn.init.normal_(self.model.embed_tokens.weight, std=1.0 / math.sqrt(d))
        # the post-norms write into the residual stream at unit RMS whatever o_proj and down_proj
        # hold: their scales start at 1/sqrt(2 x layers) (w = that - 1), as llama_lm.py scales
        # the writers themselves, so the token's own embedding is not drowned at the start
        with torch.no_grad():
            for layer in self.model.layers:
                for norm in (layer.post_attention_layernorm, layer.post_feedforward_layernorm):
                    norm.weight.fill_(1.0 / math.sqrt(2 * cfg["num_hidden_layers"]) - 1.0)
        P = cfg["max_position_embeddings"]
        cos, sin = rope_tables(cfg["head_dim"], cfg["rope_theta"], P)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        i, j = torch.arange(P)[:, None], torch.arange(P)[None, :]
        W = cfg["sliding_window"]
        causal = torch.zeros(P, P).masked_fill(j > i, float("-inf"))
        local = causal.masked_fill(j <= i - W, float("-inf"))
        self.register_buffer("mask_global", causal, persistent=False)
        self.register_buffer("mask_local", local, persistent=False)
        self.local = local_layers(cfg)
        self.embed_scale = float(torch.tensor(math.sqrt(d), dtype=torch.float32))

    def forward(self, ids, ablate=(), keep_weights=None, keep_scores=None):
        """ids [B, T] -> logits [B, T, V] (capped). ablate: (layer, query head) pairs;
        keep_weights / keep_scores: lists that receive each layer's attention weights / scaled
        scores before the cap [B, H, T, T]."""
        T = ids.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.model.embed_tokens(ids) * self.embed_scale
        for l, layer in enumerate(self.model.layers):
            mask = (self.mask_local if self.local[l] else self.mask_global)[:T, :T]
            x = layer(x, cos, sin, mask, [h for (al, h) in ablate if al == l], keep_weights,
                      keep_scores)
        z = self.model.norm(x) @ self.unembedding().t()
        c = self.cfg["final_logit_softcapping"]
        return c * torch.tanh(z / c) if c else z

    def unembedding(self):
        return (self.lm_head.weight if hasattr(self, "lm_head")
                else self.model.embed_tokens.weight)


def load(model_dir):
    """-> Gemma2LM in eval mode (float32), from a folder written by save()."""
    import bytegpt
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    model = Gemma2LM(cfg)
    tensors, _ = bytegpt.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()},
                          strict=True)
    model.eval()
    return model


def weights_and_scores(model, ids):
    """-> (weights [L, H, T, T], scaled scores before the cap [L, H, T, T], logits [T, V])."""
    keep_w, keep_s = [], []
    with torch.no_grad():
        z = model(torch.tensor([ids]), keep_weights=keep_w, keep_scores=keep_s)
    return (torch.stack([a[0] for a in keep_w]).numpy(),
            torch.stack([s[0] for s in keep_s]).numpy(), z[0].numpy())
