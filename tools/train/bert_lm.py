"""A small BERT masked LM in plain torch, written from the published architecture (Devlin et al.
2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding") with
the Hugging Face BertForMaskedLM key names, so the saved model.safetensors and config.json load
there (and in attnviz) unchanged:
  - embeddings: word + learned absolute position + token type, then LayerNorm;
  - post-norm layers: x = LN(x + O(attention(x))), x = LN(x + down(gelu(up(x)))), exact (erf)
    GELU, biases everywhere, no causal mask: every query sees every key (a padding mask only
    hides the [PAD] keys of a batch);
  - the masked-LM head: dense -> GELU -> LayerNorm -> the decoder, whose weight IS the word
    embedding matrix (tied), plus its own bias.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def make_config(vocab_size, hidden_size, intermediate_size, n_layers, n_heads, max_positions,
                type_vocab_size=2, layer_norm_eps=1e-12):
    """config.json as HF's BertConfig writes it (the fields attnviz and transformers read)."""
    return {
        "architectures": ["BertForMaskedLM"],
        "attention_probs_dropout_prob": 0.0,
        "classifier_dropout": None,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size,
        "layer_norm_eps": layer_norm_eps,
        "max_position_embeddings": max_positions,
        "model_type": "bert",
        "num_attention_heads": n_heads,
        "num_hidden_layers": n_layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
        "type_vocab_size": type_vocab_size,
        "use_cache": True,
        "vocab_size": vocab_size,
    }


class Layer(nn.Module):
    def __init__(self, d, inner, heads, eps, pdrop):
        super().__init__()
        self.h, self.pdrop = heads, pdrop
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1 = nn.LayerNorm(d, eps=eps)
        self.up, self.down = nn.Linear(d, inner), nn.Linear(inner, d)
        self.ln2 = nn.LayerNorm(d, eps=eps)

    def forward(self, x, key_mask=None, keep_weights=None):
        B, T, d = x.shape
        dh = d // self.h

        def split(m):
            return m.view(B, T, self.h, dh).transpose(1, 2)  # [B, H, T, dh]
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        if key_mask is not None:  # [B, T] True where a key is real
            s = s.masked_fill(~key_mask[:, None, None, :], float("-inf"))
        a = torch.softmax(s, dim=-1)
        if keep_weights is not None:
            keep_weights.append(a.detach())
        a = F.dropout(a, self.pdrop, self.training)
        ctx = (a @ v).transpose(1, 2).reshape(B, T, d)
        x = self.ln1(x + F.dropout(self.o(ctx), self.pdrop, self.training))
        h = self.down(F.gelu(self.up(x)))
        return self.ln2(x + F.dropout(h, self.pdrop, self.training))


class BertMLM(nn.Module):
    def __init__(self, cfg, pdrop=0.0):
        super().__init__()
        self.cfg = dict(cfg)
        d, eps = cfg["hidden_size"], cfg["layer_norm_eps"]
        self.pdrop = pdrop
        self.word = nn.Embedding(cfg["vocab_size"], d)
        self.pos = nn.Embedding(cfg["max_position_embeddings"], d)
        self.types = nn.Embedding(cfg["type_vocab_size"], d)
        self.emb_ln = nn.LayerNorm(d, eps=eps)
        self.layers = nn.ModuleList(
            Layer(d, cfg["intermediate_size"], cfg["num_attention_heads"], eps, pdrop)
            for _ in range(cfg["num_hidden_layers"]))
        self.head_dense = nn.Linear(d, d)
        self.head_ln = nn.LayerNorm(d, eps=eps)
        self.head_bias = nn.Parameter(torch.zeros(cfg["vocab_size"]))
        std = cfg["initializer_range"]
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, std)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)

    def hidden(self, ids, types, key_mask=None, keep_weights=None):
        T = ids.shape[1]
        x = self.word(ids) + self.pos(torch.arange(T))[None] + self.types(types)
        x = F.dropout(self.emb_ln(x), self.pdrop, self.training)
        for layer in self.layers:
            x = layer(x, key_mask, keep_weights)
        return x

    def logits(self, x):
        """The masked-LM head on hidden states [..., d] -> [..., V] (decoder tied to word)."""
        h = self.head_ln(F.gelu(self.head_dense(x)))
        return h @ self.word.weight.T + self.head_bias

    def forward(self, ids, types, key_mask=None, keep_weights=None):
        return self.logits(self.hidden(ids, types, key_mask, keep_weights))

    def hf_state(self):
        """-> {HF key: numpy float32}; the tied decoder stored once, as the embeddings
        (transformers re-ties cls.predictions.decoder.weight on load)."""
        mine = dict(self.named_parameters())
        return {hf: mine[name].detach().cpu().numpy().astype(np.float32)
                for name, hf in self._hf_names().items()}

    def load_hf_state(self, tensors):
        mine = dict(self.named_parameters())
        names = self._hf_names()
        assert sorted(names) == sorted(mine) and set(tensors) == set(names.values())
        with torch.no_grad():
            for name, hf in names.items():
                mine[name].copy_(torch.from_numpy(np.array(tensors[hf])))

    def _hf_names(self):
        out = {"word.weight": "bert.embeddings.word_embeddings.weight",
               "pos.weight": "bert.embeddings.position_embeddings.weight",
               "types.weight": "bert.embeddings.token_type_embeddings.weight",
               "emb_ln.weight": "bert.embeddings.LayerNorm.weight",
               "emb_ln.bias": "bert.embeddings.LayerNorm.bias",
               "head_dense.weight": "cls.predictions.transform.dense.weight",
               "head_dense.bias": "cls.predictions.transform.dense.bias",
               "head_ln.weight": "cls.predictions.transform.LayerNorm.weight",
               "head_ln.bias": "cls.predictions.transform.LayerNorm.bias",
               "head_bias": "cls.predictions.bias"}
        names = {"q": "attention.self.query", "k": "attention.self.key",
                 "v": "attention.self.value", "o": "attention.output.dense",
                 "ln1": "attention.output.LayerNorm", "up": "intermediate.dense",
                 "down": "output.dense", "ln2": "output.LayerNorm"}
        for i in range(len(self.layers)):
            for mine, hf in names.items():
                for p in ("weight", "bias"):
                    out[f"layers.{i}.{mine}.{p}"] = f"bert.encoder.layer.{i}.{hf}.{p}"
        return out


def write_json(path, obj, indent=2):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def save(model, out_dir, metadata=None):
    import bytegpt  # the hand-written safetensors writer
    os.makedirs(out_dir, exist_ok=True)
    bytegpt.write_safetensors(os.path.join(out_dir, "model.safetensors"), model.hf_state(),
                              metadata)
    write_json(os.path.join(out_dir, "config.json"), dict(model.cfg, torch_dtype="float32"))


def load(model_dir):
    import bytegpt
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    model = BertMLM(cfg)
    tensors, _ = bytegpt.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model.load_hf_state(tensors)
    model.eval()
    return model
