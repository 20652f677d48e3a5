#!/usr/bin/python3
"""Fixtures of attnviz's attribution (core/model/attribution.h, `attnviz attribute`), computed by
float64 torch reference passes written from the published architectures, not from attnviz's code:
the LLaMA family's llama_reference.forward_trace, and a GPT-2 pass written here from
make_gpt2_fixtures' pieces (its layer_norm and gelu). Every intervention is a full re-run of the
reference pass from the embeddings; attnviz re-runs only from the intervened layer, so agreement
checks that shortcut too.

Run with Debian's python3 (python3-torch):
    /usr/bin/python3 tests/model/make_attribution_fixtures.py [OUT]
OUT defaults to tests/model/fixtures/attribution/. One folder per model, each with case.json
(the model's path from the repository root, the ids, positions, targets, foils, the logit
differences, the logit lens's top ids) and float32 .npy files:
  sweep_<kind>[_at<P>].npy  [L, H]  delta[l, h] = log p_ablated(target) - log p(target) at P,
                                    kind zero (head output zeroed) or mean (replaced at every
                                    position by its mean over the positions)
  patch_heads.npy           [L, H]  (m_patched - m_corrupt) / (m_clean - m_corrupt),
                                    m = logit(target) - logit(foil) at P, head h of layer l
                                    patched from the clean run into the corrupted one
  patch_resid.npy           [L, T]  the same with the residual stream entering layer l patched
                                    at position t
  lens_target_prob.npy      [L + 1, T] softmax(unembed(final_norm(resid_l[t])))[target]
  lens_top_prob.npy         [L + 1, T] the same for the most likely token (top ids in JSON)
  value_weighted.npy        [T, T]  |A_ij| * ||v_j W_O^h|| for one layer and head
  rollout.npy               [L, T, T] attention rollout (Abnar & Zuidema 2020) up to each layer
  direct_logits.npy         [V]     one head's output at P through its slice of W_O, the final
                                    norm linearised at P and the unembedding
  dla.npy                   [L, H]  every head's direct contribution to logit(target) at P

Models: the shipped assets/models/kjv-byte-2l, and the random checkpoints
tests/model/fixtures/llama/llama_gqa (RMSNorm, RoPE, GQA) and
tests/model/fixtures/f32_prefix_tied_gelu_new (GPT-2, tied head).
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import llama_reference as lref  # noqa: E402
from make_gpt2_fixtures import gelu, layer_norm  # noqa: E402


def read_safetensors(path):
    """F32 / F16 / BF16 tensors -> name -> torch float64 (values as stored)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        if t["dtype"] == "F32":
            arr = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").copy())
        elif t["dtype"] == "F16":
            arr = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f2").copy())
        elif t["dtype"] == "BF16":
            arr = torch.from_numpy(np.frombuffer(data[a:b], dtype="<i2").copy()).view(
                torch.bfloat16)
        else:
            raise ValueError(f"{path}: {name}: dtype {t['dtype']}")
        out[name] = arr.reshape(t["shape"]).to(torch.float64)
    return out


# ---------------------------------------------------------------------------------------------
# The two families behind one interface


class Llama:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            self.cfg = json.load(f)
        self.w = read_safetensors(os.path.join(folder, "model.safetensors"))
        p = lref.params(self.cfg)
        self.L, self.H = p["L"], p["H"]

    def trace(self, ids, zero=(), mean=(), patch=None, resid_patch=None):
        return lref.forward_trace(self.cfg, self.w, ids, zero, mean, patch, resid_patch)

    def unembed(self, x):
        return lref.unembed(self.cfg, self.w, x)

    def head_to_residual(self, l, h, o):
        return lref.head_to_residual(self.cfg, self.w, l, h, o)

    def direct_logits(self, final_row, u):
        return lref.direct_logits(self.cfg, self.w, final_row, u)


class Gpt2:
    """GPT-2 (pre-LayerNorm blocks, Conv1D weights [in, out]), as make_gpt2_fixtures.forward,
    with the activations kept and the interventions of forward_trace."""

    def __init__(self, folder):
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            self.cfg = json.load(f)
        w = read_safetensors(os.path.join(folder, "model.safetensors"))
        self.w = {k[len("transformer."):] if k.startswith("transformer.") else k: v
                  for k, v in w.items()}
        self.lm = self.w.get("lm_head.weight", self.w["wte.weight"])
        self.L, self.H = self.cfg["n_layer"], self.cfg["n_head"]
        self.d = self.cfg["n_embd"]
        self.hd = self.d // self.H
        self.eps = self.cfg["layer_norm_epsilon"]

    def trace(self, ids, zero=(), mean=(), patch=None, resid_patch=None):
        w, H, hd, d, eps = self.w, self.H, self.hd, self.d, self.eps
        T = len(ids)
        x = w["wte.weight"][list(ids)] + w["wpe.weight"][:T]
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        allowed = j <= i
        zero, mean = set(zero), set(mean)
        patch, resid_patch = patch or {}, resid_patch or {}
        resid, head_out, atts, vs = [], [], [], []
        for l in range(self.L):
            p = f"h.{l}."
            if l in resid_patch:
                x = x.clone()
                for t, row in resid_patch[l].items():
                    x[t] = row
            resid.append(x)
            a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
            qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = (qkv[:, n * d:(n + 1) * d].reshape(T, H, hd).transpose(0, 1)
                       for n in range(3))
            scores = (q @ k.transpose(1, 2) / math.sqrt(hd)).masked_fill(~allowed, -math.inf)
            att = torch.softmax(scores, dim=-1)
            out = (att @ v).clone()
            for h in range(H):
                if (l, h) in zero:
                    out[h] = 0.0
                elif (l, h) in patch:
                    out[h] = patch[(l, h)]
                elif (l, h) in mean:
                    out[h] = out[h].mean(0, keepdim=True).expand(T, hd)
            head_out.append(out)
            atts.append(att)
            vs.append(v)
            x = x + out.transpose(0, 1).reshape(T, d) @ w[p + "attn.c_proj.weight"] + \
                w[p + "attn.c_proj.bias"]
            m = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
            hh = gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"],
                      self.cfg["activation_function"])
            x = x + hh @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        resid.append(x)
        return {"resid": torch.stack(resid), "head_out": torch.stack(head_out),
                "att": torch.stack(atts), "v": torch.stack(vs), "logits": self.unembed(x)}

    def unembed(self, x):
        return layer_norm(x, self.w["ln_f.weight"], self.w["ln_f.bias"], self.eps) @ self.lm.T

    def head_to_residual(self, l, h, o):
        wo = self.w[f"h.{l}.attn.c_proj.weight"]          # [in, out]
        return o @ wo[h * self.hd:(h + 1) * self.hd, :]

    def direct_logits(self, final_row, u):
        mu = final_row.mean()
        denom = torch.sqrt(((final_row - mu) ** 2).mean() + self.eps)
        uc = u - u.mean(-1, keepdim=True)
        return (uc / denom * self.w["ln_f.weight"]) @ self.lm.T


# ---------------------------------------------------------------------------------------------
# Attribution, by full re-runs


def argmax_low_id(row):
    """The most likely id; ties go to the smaller id (as attnviz's topK)."""
    best = row.max()
    return int(torch.nonzero(row == best)[0])


def ranked(row):
    return sorted(range(len(row)), key=lambda v: (-float(row[v]), v))


def sweep(model, ids, kind, position, target):
    base = model.trace(ids)
    P = len(ids) - 1 if position is None else position
    t = argmax_low_id(base["logits"][P]) if target is None else target
    lp = torch.log_softmax(base["logits"][P], -1)[t]
    out = torch.zeros(model.L, model.H, dtype=torch.float64)
    for l in range(model.L):
        for h in range(model.H):
            r = model.trace(ids, zero=[(l, h)] if kind == "zero" else (),
                            mean=[(l, h)] if kind == "mean" else ())
            out[l, h] = torch.log_softmax(r["logits"][P], -1)[t] - lp
    return out, P, t


def patching(model, clean, corrupt):
    cl, co = model.trace(clean), model.trace(corrupt)
    P = len(clean) - 1
    t = argmax_low_id(cl["logits"][P])
    order = ranked(co["logits"][P])
    f = order[1] if order[0] == t else order[0]

    def metric(r):
        return float(r["logits"][P][t] - r["logits"][P][f])

    mc, mx = metric(cl), metric(co)
    heads = torch.zeros(model.L, model.H, dtype=torch.float64)
    for l in range(model.L):
        for h in range(model.H):
            r = model.trace(corrupt, patch={(l, h): cl["head_out"][l, h]})
            heads[l, h] = (metric(r) - mx) / (mc - mx)
    T = len(clean)
    resid = torch.zeros(model.L, T, dtype=torch.float64)
    for l in range(model.L):
        for p in range(T):
            r = model.trace(corrupt, resid_patch={l: {p: cl["resid"][l, p]}})
            resid[l, p] = (metric(r) - mx) / (mc - mx)
    return {"position": P, "target": t, "foil": f, "m_clean": mc, "m_corrupt": mx,
            "heads": heads, "resid": resid}


def logit_lens(model, r, target):
    probs = torch.softmax(model.unembed(r["resid"]), -1)     # [L + 1, T, V]
    top = [[argmax_low_id(probs[l, t]) for t in range(probs.shape[1])]
           for l in range(probs.shape[0])]
    top_prob = torch.tensor([[float(probs[l, t, top[l][t]]) for t in range(probs.shape[1])]
                             for l in range(probs.shape[0])])
    return top, top_prob, probs[:, :, target]


def value_weighted(model, r, l, h):
    norms = model.head_to_residual(l, h, r["v"][l, h]).norm(dim=-1)   # [T]
    return r["att"][l, h] * norms[None, :]


def rollout(r):
    A = r["att"].mean(1)                                   # [L, T, T]
    T = A.shape[-1]
    out, R = [], None
    for l in range(A.shape[0]):
        a = 0.5 * A[l] + 0.5 * torch.eye(T, dtype=torch.float64)
        a = a / a.sum(-1, keepdim=True)
        R = a if R is None else a @ R
        out.append(R)
    return torch.stack(out)


def direct(model, r, l, h, P):
    u = model.head_to_residual(l, h, r["head_out"][l, h, P][None, :])
    return model.direct_logits(r["resid"][-1, P], u)[0]


def dla(model, r, P, target):
    out = torch.zeros(model.L, model.H, dtype=torch.float64)
    for l in range(model.L):
        for h in range(model.H):
            out[l, h] = direct(model, r, l, h, P)[target]
    return out


# ---------------------------------------------------------------------------------------------


def save(path, t):
    np.save(path, t.detach().numpy().astype(np.float32))


def ids_of(folder):
    with open(os.path.join(ROOT, folder, "cases.json"), encoding="utf-8") as f:
        return json.load(f)["ids"]


def corrupt_ids(ids, changes):
    out = list(ids)
    for p, v in changes:
        out[p] = v
    return out


# The shipped byte-level model: token id = byte. The pair differs in one letter that an induction
# head copies ("...xqzv j" -> 'm' in the clean text, 'w' in the corrupted one).
KJV_CLEAN = "xqzv jmpk. xqzv j"
KJV_CORRUPT = "xqzv jwpk. xqzv j"

MODELS = [
    # name, folder (from the repository root), family, ids, patching pair, extra sweep position,
    # value-weighted (layer, head), direct-effect (layer, head)
    ("kjv_byte_2l", "assets/models/kjv-byte-2l", Gpt2,
     list("The grace of our Lord. The grace of our".encode()),
     (list(KJV_CLEAN.encode()), list(KJV_CORRUPT.encode()), KJV_CLEAN, KJV_CORRUPT),
     (21, 76), (1, 2), (1, 1)),
    ("llama_gqa", "tests/model/fixtures/llama/llama_gqa", Llama, None, None, (7, 100), (1, 5),
     (1, 3)),
    ("f32_prefix_tied_gelu_new", "tests/model/fixtures/f32_prefix_tied_gelu_new", Gpt2, None,
     None, (10, 5), (0, 1), (1, 0)),
]


def main():
    out_root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "attribution")
    torch.set_num_threads(1)
    for name, folder, family, ids, pair, extra, vw, de in MODELS:
        model = family(os.path.join(ROOT, folder))
        if ids is None:
            ids = ids_of(folder)
        out = os.path.join(out_root, name)
        os.makedirs(out, exist_ok=True)
        case = {"model": folder, "ids": ids, "sweeps": []}
        for kind, position, target in [("zero", None, None), ("mean", None, None),
                                       ("zero", extra[0], extra[1])]:
            d, P, t = sweep(model, ids, kind, position, target)
            file = f"sweep_{kind}" + (f"_at{position}" if position is not None else "") + ".npy"
            save(os.path.join(out, file), d)
            case["sweeps"].append({"kind": kind, "position": position, "target": target,
                                   "resolved_position": P, "resolved_target": t, "file": file})
        if pair is None:
            # Random checkpoints: the corrupted ids change three tokens before the last.
            T = len(ids)
            clean = ids
            corrupt = corrupt_ids(ids, [(T - 2, (ids[T - 2] + 7) % 200 + 3),
                                        (T // 2, (ids[T // 2] + 11) % 200 + 3),
                                        (3, (ids[3] + 5) % 200 + 3)])
            clean_text = corrupt_text = None
        else:
            clean, corrupt, clean_text, corrupt_text = pair
        pr = patching(model, clean, corrupt)
        if abs(pr["m_clean"] - pr["m_corrupt"]) < 0.5:
            raise SystemExit(f"{name}: the pair barely changes the logit difference "
                             f"({pr['m_clean']} vs {pr['m_corrupt']}); choose another")
        save(os.path.join(out, "patch_heads.npy"), pr["heads"])
        save(os.path.join(out, "patch_resid.npy"), pr["resid"])
        case["patch"] = {"clean_ids": clean, "corrupt_ids": corrupt, "clean_text": clean_text,
                         "corrupt_text": corrupt_text, "position": pr["position"],
                         "target": pr["target"], "foil": pr["foil"],
                         "m_clean": pr["m_clean"], "m_corrupt": pr["m_corrupt"],
                         "heads": "patch_heads.npy", "resid": "patch_resid.npy"}
        r = model.trace(ids)
        P = len(ids) - 1
        target = case["sweeps"][0]["resolved_target"]
        top, top_prob, target_prob = logit_lens(model, r, target)
        save(os.path.join(out, "lens_target_prob.npy"), target_prob)
        save(os.path.join(out, "lens_top_prob.npy"), top_prob)
        case["lens"] = {"target": target, "top_ids": top, "target_prob": "lens_target_prob.npy",
                        "top_prob": "lens_top_prob.npy"}
        save(os.path.join(out, "value_weighted.npy"), value_weighted(model, r, *vw))
        case["value_weighted"] = {"layer": vw[0], "head": vw[1], "file": "value_weighted.npy"}
        save(os.path.join(out, "rollout.npy"), rollout(r))
        case["rollout"] = "rollout.npy"
        save(os.path.join(out, "direct_logits.npy"), direct(model, r, de[0], de[1], P))
        case["direct"] = {"layer": de[0], "head": de[1], "position": P,
                          "file": "direct_logits.npy"}
        save(os.path.join(out, "dla.npy"), dla(model, r, P, target))
        case["dla"] = {"position": P, "target": target, "file": "dla.npy"}
        with open(os.path.join(out, "case.json"), "w", encoding="utf-8") as f:
            json.dump(case, f, indent=1)
            f.write("\n")
        print(f"wrote {out}: T={len(ids)}, L={model.L}, H={model.H}, target {target}, "
              f"patch target {pr['target']} foil {pr['foil']} "
              f"m {pr['m_clean']:.3f} vs {pr['m_corrupt']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
