"""A small LLaMA in plain torch, written from the published architecture (Touvron et al. 2023,
"LLaMA" and "Llama 2"), with the Hugging Face LlamaForCausalLM key names and layouts, so the
saved model.safetensors and config.json load there (and in attnviz) unchanged.

The block is pre-norm:
    h = RMSNorm(x) (input_layernorm); q, k, v = h Wq^T, h Wk^T, h Wv^T    (no biases)
    RoPE on q and k (HF's rotate-half convention: dims i and i + head_dim/2 form the pair of
    frequency theta^(-2i/head_dim)); query head h reads KV head h // (H / H_kv)  (GQA)
    A = softmax(q.k / sqrt(head_dim) + causal mask); x += concat_h(A v) Wo^T
    n = RMSNorm(x) (post_attention_layernorm); x += down(silu(gate(n)) * up(n))
    logits = RMSNorm(x) (model.norm) lm_head^T
RMSNorm(x) = w * x / sqrt(mean(x^2) + eps). Shapes: B batch, T positions, d hidden, H query
heads, KV key/value heads, D head_dim; nn.Linear weights are [out, in] as in HF.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def make_config(vocab_size, hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads,
                head_dim, max_positions, rms_norm_eps=1e-5, rope_theta=10000.0, tied=False):
    """config.json as HF's LlamaConfig writes it (the fields attnviz and transformers read)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size,
        "max_position_embeddings": max_positions,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": n_heads,
        "num_hidden_layers": n_layers,
        "num_key_value_heads": n_kv_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": rms_norm_eps,
        "rope_scaling": None,
        "rope_theta": rope_theta,
        "tie_word_embeddings": tied,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": vocab_size,
    }


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_tables(head_dim, theta, n_positions):
    """-> (cos, sin) [n_positions, head_dim] for rotate-half RoPE."""
    inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(n_positions, dtype=torch.float64)[:, None] * inv[None, :]  # [P, D/2]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().float(), ang.sin().float()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, H, KV, D = (cfg["hidden_size"], cfg["num_attention_heads"],
                       cfg["num_key_value_heads"], cfg["head_dim"])
        self.H, self.KV, self.D = H, KV, D
        self.q_proj = nn.Linear(d, H * D, bias=False)
        self.k_proj = nn.Linear(d, KV * D, bias=False)
        self.v_proj = nn.Linear(d, KV * D, bias=False)
        self.o_proj = nn.Linear(H * D, d, bias=False)

    def forward(self, x, cos, sin, mask, ablate_heads=(), keep_weights=None):
        """mask: [T, T] additive, 0 where key j <= query i, -inf above the diagonal."""
        B, T, _ = x.shape
        H, KV, D = self.H, self.KV, self.D
        g = H // KV  # query head h reads KV head h // g
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)   # [B, H, T, D]
        k = self.k_proj(x).view(B, T, KV, D).transpose(1, 2)  # [B, KV, T, D]
        v = self.v_proj(x).view(B, T, KV, D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # a KV head's g query heads as one matrix of g*T rows, so the scores are one batched
        # matmul per KV head (no copies of k and v); the scale and the mask ride along in baddbmm
        qg = q.reshape(B * KV, g * T, D)
        s = torch.baddbmm(mask.repeat(g, 1).unsqueeze(0), qg,
                          k.reshape(B * KV, T, D).transpose(1, 2),
                          alpha=1.0 / math.sqrt(D))            # scores [B*KV, g*T, T_k]
        a = torch.softmax(s, dim=-1)                            # weights, rows = queries
        if keep_weights is not None:
            keep_weights.append(a.detach().view(B, H, T, T))
        o = torch.bmm(a, v.reshape(B * KV, T, D)).view(B, H, T, D)
        if ablate_heads:
            o = o.clone()
            for h in ablate_heads:
                o[:, h] = 0.0  # the head's output, zeroed before o_proj
        return self.o_proj(o.transpose(1, 2).reshape(B, T, H * D))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, f = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(cfg["hidden_size"], eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, mask, ablate_heads=(), keep_weights=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, ablate_heads,
                               keep_weights)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([Layer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class LlamaLM(nn.Module):
    """LlamaForCausalLM's layout: model.* and (untied) lm_head.weight [V, d]."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Body(cfg)
        if not cfg["tie_word_embeddings"]:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        std = cfg["initializer_range"]
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=std)
            # the projections that write into the residual stream, scaled as in GPT-2
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, std=std / math.sqrt(2 * cfg["num_hidden_layers"]))
        P = cfg["max_position_embeddings"]
        cos, sin = rope_tables(cfg["head_dim"], cfg["rope_theta"], P)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        # the causal mask, additive: -inf where key j > query i
        self.register_buffer("mask", torch.full((P, P), float("-inf")).triu(1),
                             persistent=False)

    def forward(self, ids, ablate=(), keep_weights=None):
        """ids [B, T] -> logits [B, T, V]. ablate: (layer, query head) pairs; keep_weights: a
        list that receives each layer's attention weights [B, H, T, T]."""
        T = ids.shape[1]
        cos, sin, mask = self.cos[:T], self.sin[:T], self.mask[:T, :T]
        x = self.model.embed_tokens(ids)  # [B, T, d]
        for l, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, mask, [h for (al, h) in ablate if al == l], keep_weights)
        x = self.model.norm(x)
        return x @ self.unembedding().t()  # [B, T, V]

    def unembedding(self):
        return (self.lm_head.weight if hasattr(self, "lm_head")
                else self.model.embed_tokens.weight)

    def untie(self):
        """From here on lm_head is a matrix of its own, starting as a copy of embed_tokens."""
        if hasattr(self, "lm_head"):
            return
        self.cfg = dict(self.cfg, tie_word_embeddings=False)
        self.lm_head = nn.Linear(self.cfg["hidden_size"], self.cfg["vocab_size"], bias=False)
        with torch.no_grad():
            self.lm_head.weight.copy_(self.model.embed_tokens.weight)


def write_json(path, obj, indent=2):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def save(model, out_dir, metadata=None, dtype=np.float32):
    """config.json and model.safetensors (HF key names; lm_head.weight stored when untied)."""
    import bytegpt  # the hand-written safetensors writer
    os.makedirs(out_dir, exist_ok=True)
    tensors = {k: v.detach().cpu().numpy().astype(dtype) for k, v in model.state_dict().items()}
    bytegpt.write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, metadata)
    cfg = dict(model.cfg, torch_dtype={np.float32: "float32", np.float16: "float16"}[dtype])
    write_json(os.path.join(out_dir, "config.json"), cfg)


def load(model_dir):
    """-> LlamaLM in eval mode (float32), from a folder written by save()."""
    import bytegpt
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    model = LlamaLM(cfg)
    tensors, _ = bytegpt.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()},
                          strict=True)
    model.eval()
    return model
