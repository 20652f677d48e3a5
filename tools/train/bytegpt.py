"""A byte-level GPT-2 in plain torch, with the Hugging Face GPT2LMHeadModel key names and
layouts, plus the files of a GPT-2 checkpoint folder written by hand (safetensors, config.json,
vocab.json, merges.txt).

Shapes are written where tensors are made: B batch, T positions, C = n_embd, H heads, D = C/H.
Conv1D weights are [in, out] as in HF's GPT-2 (y = x @ W + b), so the saved tensors load there
unchanged.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB_SIZE = 256


def bytes_to_unicode():
    """GPT-2's reversible map from the 256 bytes to printable unicode characters.

    Printable Latin-1 bytes stand for themselves; the rest (controls, space, 0x7f-0xa0, 0xad)
    are moved to 256 + n in byte order, so no token is whitespace or a control character.
    """
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
            list(range(ord("®"), ord("ÿ") + 1)))
    chars = {}
    extra = 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def gelu_new(x):
    # GPT-2's tanh approximation ("gelu_new" in HF's config)
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def sinusoids(n_positions, n_embd, rms):
    """[n_positions, n_embd] sin/cos positions with the given rms per component.

    Used only to initialise the learned wpe: an offset of one position is then (nearly) a fixed
    rotation of the vector, so a previous-token head is easy to find; with random positions it
    has to be learned position by position, which is a long plateau on this budget."""
    p = torch.arange(n_positions, dtype=torch.float32)[:, None]
    freq = torch.pow(10000.0, -torch.arange(0, n_embd, 2, dtype=torch.float32) / n_embd)
    pe = torch.zeros(n_positions, n_embd)
    pe[:, 0::2] = torch.sin(p * freq)
    pe[:, 1::2] = torch.cos(p * freq)
    return pe * rms * math.sqrt(2.0)


class Conv1D(nn.Module):
    """HF's GPT-2 linear layer: weight [n_in, n_out], y = x @ W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(
            *x.shape[:-1], self.weight.shape[1])


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg["n_head"]
        self.c_attn = Conv1D(cfg["n_embd"], 3 * cfg["n_embd"])
        self.c_proj = Conv1D(cfg["n_embd"], cfg["n_embd"])
        n = cfg["n_positions"]
        # True above the diagonal: key j > query i is blocked (not saved in the checkpoint)
        self.register_buffer("blocked", torch.ones(n, n, dtype=torch.bool).triu(1),
                             persistent=False)

    def forward(self, x, ablate_heads=(), keep_weights=None):
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)  # each [B, T, C]
        q = q.view(B, T, H, C // H).transpose(1, 2)  # [B, H, T, D]
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(C // H)  # scores [B, H, T_q, T_k]
        s = s.masked_fill(self.blocked[:T, :T], float("-inf"))
        a = torch.softmax(s, dim=-1)  # weights [B, H, T_q, T_k]
        if keep_weights is not None:
            keep_weights.append(a.detach())
        o = a @ v  # [B, H, T, D]
        if ablate_heads:
            o = o.clone()
            for h in ablate_heads:
                o[:, h] = 0.0  # zero the head's output before the output projection
        o = o.transpose(1, 2).reshape(B, T, C)
        return self.c_proj(o)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = Conv1D(cfg["n_embd"], 4 * cfg["n_embd"])
        self.c_proj = Conv1D(4 * cfg["n_embd"], cfg["n_embd"])

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        eps = cfg["layer_norm_epsilon"]
        self.ln_1 = nn.LayerNorm(cfg["n_embd"], eps=eps)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg["n_embd"], eps=eps)
        self.mlp = MLP(cfg)

    def forward(self, x, ablate_heads=(), keep_weights=None):
        x = x + self.attn(self.ln_1(x), ablate_heads, keep_weights)
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["n_positions"], cfg["n_embd"])
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(cfg["n_embd"], eps=cfg["layer_norm_epsilon"])


class ByteGPT(nn.Module):
    """GPT2LMHeadModel's layout. With cfg["tie_word_embeddings"] false the model has its own
    lm_head.weight [V, C] (stored in the checkpoint); otherwise lm_head is wte (not stored)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = Transformer(cfg)
        nn.init.normal_(self.transformer.wte.weight, std=0.02)
        if not cfg.get("tie_word_embeddings", True):
            self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
            nn.init.normal_(self.lm_head.weight, std=0.02)
        with torch.no_grad():
            self.transformer.wpe.weight.copy_(sinusoids(cfg["n_positions"], cfg["n_embd"], 0.02))
        # GPT-2's scaled init of the projections that write into the residual stream
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg["n_layer"]))

    def forward(self, ids, ablate=(), keep_weights=None):
        """ids [B, T] -> logits [B, T, V]. ablate: (layer, head) pairs; keep_weights: a list
        that receives each layer's attention weights [B, H, T, T]."""
        tr = self.transformer
        T = ids.shape[1]
        x = tr.wte(ids) + tr.wpe(torch.arange(T, device=ids.device))  # [B, T, C]
        for l, block in enumerate(tr.h):
            x = block(x, [h for (al, h) in ablate if al == l], keep_weights)
        x = tr.ln_f(x)
        return x @ self.unembedding().t()  # [B, T, V]

    def unembedding(self):
        return self.lm_head.weight if hasattr(self, "lm_head") else self.transformer.wte.weight

    def untie(self):
        """From here on the output matrix is a parameter of its own, starting as a copy of wte."""
        if hasattr(self, "lm_head"):
            return
        self.cfg = dict(self.cfg, tie_word_embeddings=False)
        self.lm_head = nn.Linear(self.cfg["n_embd"], self.cfg["vocab_size"], bias=False)
        with torch.no_grad():
            self.lm_head.weight.copy_(self.transformer.wte.weight)


def make_config(n_layer, n_head, n_embd, n_positions):
    """config.json as HF's GPT2Config writes it, for a 256-byte vocabulary."""
    return {
        "activation_function": "gelu_new",
        "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.0,
        "bos_token_id": 0,
        "embd_pdrop": 0.0,
        "eos_token_id": 0,
        "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05,
        "model_type": "gpt2",
        "n_ctx": n_positions,
        "n_embd": n_embd,
        "n_head": n_head,
        "n_inner": None,
        "n_layer": n_layer,
        "n_positions": n_positions,
        "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.0,
        "scale_attn_by_inverse_layer_idx": False,
        "scale_attn_weights": True,
        "summary_activation": None,
        "summary_first_dropout": 0.0,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": VOCAB_SIZE,
    }


# ---- safetensors, written and read by hand (Debian has no python3-safetensors) ----------------

_DTYPES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16"}
_NP_OF = {"F32": np.float32, "F16": np.float16}


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> numpy array (float32 or float16). Layout: 8-byte little-endian header
    length, the JSON header (names sorted, data_offsets relative to the data block, padded with
    spaces to a multiple of 8), then the raw little-endian C-order data. Written to a temp file
    and renamed into place."""
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _DTYPES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    """-> (name -> float32 numpy array, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=np.dtype(_NP_OF[t["dtype"]]).newbyteorder("<"))
        out[name] = arr.reshape(t["shape"]).astype(np.float32)
    return out, meta


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def save_checkpoint(model, out_dir, metadata=None):
    """Writes config.json, model.safetensors (F32), vocab.json and merges.txt."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = {k: v.detach().cpu().numpy().astype(np.float32)
               for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, metadata)
    write_json(os.path.join(out_dir, "config.json"), model.cfg)
    # token id = byte value; with no merges every UTF-8 byte of a text is one token
    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    write_json(os.path.join(out_dir, "vocab.json"), vocab)
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")


def load_checkpoint(model_dir):
    """-> ByteGPT in eval mode, from a folder written by save_checkpoint."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    model = ByteGPT(cfg)
    tensors, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    state = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}
    model.load_state_dict(state, strict=True)
    model.eval()
    return model


def text_ids(text):
    return list(text.encode("utf-8"))
