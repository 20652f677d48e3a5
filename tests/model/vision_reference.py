#!/usr/bin/env python3
"""Float64 torch reference for the image families (vit, deit, dinov2, dinov2_with_registers,
clip, clip_vision_model, siglip, siglip_vision_model), written from the
published architectures (transformers is not used).

Usage: vision_reference.py OUTDIR

Writes, under OUTDIR, random-init Hugging Face style folders (config.json with the real keys and
model_type, model.safetensors with the real tensor names in F32, preprocessor_config.json), the
pixels of each case as .npy, and the reference's outputs: NAME_weights.npy [L, H, T, T],
NAME_hidden.npy [T, d] (last_hidden_state) and NAME_logits.npy [num_labels] when the folder has a
head. cases.json lists the cases with their folder, pixels and the interventions they apply
(mask_patches: patch indices hidden from every query's keys; ablate: [layer, head] pairs whose
output is zeroed before the output projection).
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.manual_seed(1234)
D = torch.float64
REGISTERS = 3


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def rand(*shape, std=0.2):
    # values rounded to float32, so the folder holds exactly what the reference uses
    return (torch.randn(*shape, dtype=D) * std).to(torch.float32).to(D)


def make_model(family, d, layers, heads, inter, image, patch, labels, prefix, head):
    """Random tensors under their transformers names. head: None, "cls", "teacher" (DeiT)."""
    t = {}
    e = prefix + "embeddings."
    n = (image // patch) ** 2
    t[e + "cls_token"] = rand(1, 1, d)
    extra = 1
    if family == "deit":
        t[e + "distillation_token"] = rand(1, 1, d)
        extra = 2
    if family.startswith("dinov2"):
        t[e + "mask_token"] = rand(1, d)
    if family == "dinov2_with_registers":
        t[e + "register_tokens"] = rand(1, REGISTERS, d)
    t[e + "position_embeddings"] = rand(1, n + extra, d)
    t[e + "patch_embeddings.projection.weight"] = rand(d, 3, patch, patch)
    t[e + "patch_embeddings.projection.bias"] = rand(d)
    for l in range(layers):
        b = f"{prefix}encoder.layer.{l}."
        for s in ("query", "key", "value"):
            t[b + f"attention.attention.{s}.weight"] = rand(d, d)
            t[b + f"attention.attention.{s}.bias"] = rand(d)
        t[b + "attention.output.dense.weight"] = rand(d, d)
        t[b + "attention.output.dense.bias"] = rand(d)
        if family.startswith("dinov2"):
            n1, n2, f1, f2 = "norm1", "norm2", "mlp.fc1", "mlp.fc2"
            t[b + "layer_scale1.lambda1"] = 1 + rand(d, std=0.3)
            t[b + "layer_scale2.lambda1"] = 1 + rand(d, std=0.3)
        else:
            n1, n2, f1, f2 = "layernorm_before", "layernorm_after", "intermediate.dense", "output.dense"
        for nn_ in (n1, n2):
            t[b + nn_ + ".weight"] = 1 + rand(d)
            t[b + nn_ + ".bias"] = rand(d)
        t[b + f1 + ".weight"] = rand(inter, d)
        t[b + f1 + ".bias"] = rand(inter)
        t[b + f2 + ".weight"] = rand(d, inter)
        t[b + f2 + ".bias"] = rand(d)
    t[prefix + "layernorm.weight"] = 1 + rand(d)
    t[prefix + "layernorm.bias"] = rand(d)
    if head == "cls":
        t["classifier.weight"] = rand(labels, 2 * d if family.startswith("dinov2") else d, std=0.5)
        t["classifier.bias"] = rand(labels)
    elif head == "teacher":
        for h in ("cls_classifier", "distillation_classifier"):
            t[h + ".weight"] = rand(labels, d, std=0.5)
            t[h + ".bias"] = rand(labels)
    elif head == "pooler":  # ViTModel's pooler: present in the file, not part of the output
        t["pooler.dense.weight"] = rand(d, d)
        t["pooler.dense.bias"] = rand(d)
    return t


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def forward(family, t, prefix, cfg, pixels, mask_patches=(), ablate=(), states=None, temperature=1.0):
    """states: a list that gets the residual stream after the embeddings and after each layer
    (HF's hidden_states). temperature: every layer's scores divided by it before the softmax."""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    L, p, eps = cfg["num_hidden_layers"], cfg["patch_size"], cfg["layer_norm_eps"]
    hd = d // H
    e = prefix + "embeddings."
    x = torch.from_numpy(pixels).to(D)[None]
    emb = F.conv2d(x, t[e + "patch_embeddings.projection.weight"],
                   t[e + "patch_embeddings.projection.bias"], stride=p)
    gh, gw = emb.shape[2], emb.shape[3]
    emb = emb.flatten(2).transpose(1, 2)[0]  # [N, d]
    pos = t[e + "position_embeddings"][0]
    lead = [t[e + "cls_token"][0, 0]]
    if family == "deit":
        lead.append(t[e + "distillation_token"][0, 0])
    nl = len(lead)
    patch_pos = pos[nl:]
    g0 = cfg["image_size"] // p
    if family.startswith("dinov2") and not (gh * gw == g0 * g0 and pixels.shape[1] == pixels.shape[2]):
        grid = patch_pos.reshape(1, g0, g0, d).permute(0, 3, 1, 2).to(torch.float32)
        # the registers' variant antialiases
        grid = F.interpolate(grid, size=(gh, gw), mode="bicubic", align_corners=False,
                             antialias=family == "dinov2_with_registers")
        patch_pos = grid.to(D).permute(0, 2, 3, 1).reshape(gh * gw, d)
    h = torch.cat([torch.stack(lead) + pos[:nl], emb + patch_pos])
    if family == "dinov2_with_registers":  # after CLS, with no position embedding
        h = torch.cat([h[:1], t[e + "register_tokens"][0], h[1:]])
        nl += REGISTERS
    T = h.shape[0]
    hidden_keys = torch.zeros(T, dtype=torch.bool)
    for i in mask_patches:
        hidden_keys[nl + i] = True
    weights = []
    if states is not None:
        states.append(h.clone())
    for l in range(L):
        b = f"{prefix}encoder.layer.{l}."
        dino = family.startswith("dinov2")
        n1 = "norm1" if dino else "layernorm_before"
        n2 = "norm2" if dino else "layernorm_after"
        a = layer_norm(h, t[b + n1 + ".weight"], t[b + n1 + ".bias"], eps)
        q, k, v = (a @ t[b + f"attention.attention.{s}.weight"].T + t[b + f"attention.attention.{s}.bias"]
                   for s in ("query", "key", "value"))
        q = q.view(T, H, hd).transpose(0, 1)
        k = k.view(T, H, hd).transpose(0, 1)
        v = v.view(T, H, hd).transpose(0, 1)
        s = q @ k.transpose(1, 2) / math.sqrt(hd) / temperature
        s = s.masked_fill(hidden_keys[None, None, :], float("-inf"))
        w = torch.softmax(s, -1)
        weights.append(w)
        ctx = w @ v  # [H, T, hd]
        for (al, ah) in ablate:
            if al == l:
                ctx[ah] = 0
        ctx = ctx.transpose(0, 1).reshape(T, d)
        o = ctx @ t[b + "attention.output.dense.weight"].T + t[b + "attention.output.dense.bias"]
        if dino:
            o = o * t[b + "layer_scale1.lambda1"]
        h = h + o
        f1 = "mlp.fc1" if dino else "intermediate.dense"
        f2 = "mlp.fc2" if dino else "output.dense"
        m = layer_norm(h, t[b + n2 + ".weight"], t[b + n2 + ".bias"], eps)
        m = F.gelu(m @ t[b + f1 + ".weight"].T + t[b + f1 + ".bias"])
        m = m @ t[b + f2 + ".weight"].T + t[b + f2 + ".bias"]
        if dino:
            m = m * t[b + "layer_scale2.lambda1"]
        h = h + m
        if states is not None:
            states.append(h.clone())
    last = layer_norm(h, t[prefix + "layernorm.weight"], t[prefix + "layernorm.bias"], eps)
    logits = None
    if "classifier.weight" in t:
        feat = last[0]
        if family.startswith("dinov2"):
            feat = torch.cat([last[0], last[nl:].mean(0)])
        logits = feat @ t["classifier.weight"].T + t["classifier.bias"]
    elif "cls_classifier.weight" in t:
        logits = 0.5 * ((last[0] @ t["cls_classifier.weight"].T + t["cls_classifier.bias"]) +
                        (last[1] @ t["distillation_classifier.weight"].T + t["distillation_classifier.bias"]))
    return torch.stack(weights), last, logits


def make_clip(d, layers, inter, image, patch):
    """CLIP's vision tower under vision_model. (CLIPModel and CLIPVisionModel alike)."""
    t, e = {}, "vision_model.embeddings."
    n = (image // patch) ** 2
    t[e + "class_embedding"] = rand(d)
    t[e + "patch_embedding.weight"] = rand(d, 3, patch, patch)
    t[e + "position_embedding.weight"] = rand(n + 1, d)
    for nm in ("pre_layrnorm", "post_layernorm"):
        t[f"vision_model.{nm}.weight"] = 1 + rand(d)
        t[f"vision_model.{nm}.bias"] = rand(d)
    for l in range(layers):
        b = f"vision_model.encoder.layers.{l}."
        for s_ in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t[b + f"self_attn.{s_}.weight"] = rand(d, d)
            t[b + f"self_attn.{s_}.bias"] = rand(d)
        for nm in ("layer_norm1", "layer_norm2"):
            t[b + nm + ".weight"] = 1 + rand(d)
            t[b + nm + ".bias"] = rand(d)
        t[b + "mlp.fc1.weight"] = rand(inter, d)
        t[b + "mlp.fc1.bias"] = rand(inter)
        t[b + "mlp.fc2.weight"] = rand(d, inter)
        t[b + "mlp.fc2.bias"] = rand(d)
    return t


def forward_clip(t, cfg, pixels, mask_patches=(), ablate=()):
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    p, eps, hd = cfg["patch_size"], cfg["layer_norm_eps"], cfg["hidden_size"] // cfg["num_attention_heads"]
    e = "vision_model.embeddings."
    x = torch.from_numpy(pixels).to(D)[None]
    emb = F.conv2d(x, t[e + "patch_embedding.weight"], stride=p).flatten(2).transpose(1, 2)[0]
    h = torch.cat([t[e + "class_embedding"][None], emb]) + t[e + "position_embedding.weight"]
    h = layer_norm(h, t["vision_model.pre_layrnorm.weight"], t["vision_model.pre_layrnorm.bias"], eps)
    T = h.shape[0]
    hidden_keys = torch.zeros(T, dtype=torch.bool)
    for i in mask_patches:
        hidden_keys[1 + i] = True
    weights = []
    for l in range(L):
        b = f"vision_model.encoder.layers.{l}."
        a = layer_norm(h, t[b + "layer_norm1.weight"], t[b + "layer_norm1.bias"], eps)
        q, k, v = ((a @ t[b + f"self_attn.{s_}.weight"].T + t[b + f"self_attn.{s_}.bias"]).view(T, H, hd).transpose(0, 1)
                   for s_ in ("q_proj", "k_proj", "v_proj"))
        s = (q * hd ** -0.5) @ k.transpose(1, 2)
        w = torch.softmax(s.masked_fill(hidden_keys[None, None, :], float("-inf")), -1)
        weights.append(w)
        ctx = w @ v
        for (al, ah) in ablate:
            if al == l:
                ctx[ah] = 0
        ctx = ctx.transpose(0, 1).reshape(T, d)
        h = h + ctx @ t[b + "self_attn.out_proj.weight"].T + t[b + "self_attn.out_proj.bias"]
        m = layer_norm(h, t[b + "layer_norm2.weight"], t[b + "layer_norm2.bias"], eps)
        m = m @ t[b + "mlp.fc1.weight"].T + t[b + "mlp.fc1.bias"]
        m = m * torch.sigmoid(1.702 * m)  # quick_gelu
        h = h + m @ t[b + "mlp.fc2.weight"].T + t[b + "mlp.fc2.bias"]
    return torch.stack(weights), h, None  # last_hidden_state: no post_layernorm


def make_siglip(d, layers, inter, image, patch):
    """SigLIP's vision tower under vision_model. with its pooling head (probe + attention)."""
    t, e = {}, "vision_model.embeddings."
    n = (image // patch) ** 2
    t[e + "patch_embedding.weight"] = rand(d, 3, patch, patch)
    t[e + "patch_embedding.bias"] = rand(d)
    t[e + "position_embedding.weight"] = rand(n, d)
    t["vision_model.post_layernorm.weight"] = 1 + rand(d)
    t["vision_model.post_layernorm.bias"] = rand(d)
    for l in range(layers):
        b = f"vision_model.encoder.layers.{l}."
        for s_ in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t[b + f"self_attn.{s_}.weight"] = rand(d, d)
            t[b + f"self_attn.{s_}.bias"] = rand(d)
        for nm in ("layer_norm1", "layer_norm2"):
            t[b + nm + ".weight"] = 1 + rand(d)
            t[b + nm + ".bias"] = rand(d)
        t[b + "mlp.fc1.weight"] = rand(inter, d)
        t[b + "mlp.fc1.bias"] = rand(inter)
        t[b + "mlp.fc2.weight"] = rand(d, inter)
        t[b + "mlp.fc2.bias"] = rand(d)
    h = "vision_model.head."
    t[h + "probe"] = rand(1, 1, d, std=1.0)
    t[h + "attention.in_proj_weight"] = rand(3 * d, d, std=0.5)
    t[h + "attention.in_proj_bias"] = rand(3 * d)
    t[h + "attention.out_proj.weight"] = rand(d, d)
    t[h + "attention.out_proj.bias"] = rand(d)
    t[h + "layernorm.weight"] = 1 + rand(d)
    t[h + "layernorm.bias"] = rand(d)
    t[h + "mlp.fc1.weight"] = rand(inter, d)
    t[h + "mlp.fc1.bias"] = rand(inter)
    t[h + "mlp.fc2.weight"] = rand(d, inter)
    t[h + "mlp.fc2.bias"] = rand(d)
    return t


def forward_siglip(t, cfg, pixels, mask_patches=(), ablate=(), temperature=1.0):
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    p, eps, hd = cfg["patch_size"], cfg["layer_norm_eps"], cfg["hidden_size"] // cfg["num_attention_heads"]
    e = "vision_model.embeddings."
    x = torch.from_numpy(pixels).to(D)[None]
    emb = F.conv2d(x, t[e + "patch_embedding.weight"], t[e + "patch_embedding.bias"], stride=p)
    h = emb.flatten(2).transpose(1, 2)[0] + t[e + "position_embedding.weight"]
    T = h.shape[0]
    hidden_keys = torch.zeros(T, dtype=torch.bool)
    for i in mask_patches:
        hidden_keys[i] = True
    weights = []
    for l in range(L):
        b = f"vision_model.encoder.layers.{l}."
        a = layer_norm(h, t[b + "layer_norm1.weight"], t[b + "layer_norm1.bias"], eps)
        q, k, v = ((a @ t[b + f"self_attn.{s_}.weight"].T + t[b + f"self_attn.{s_}.bias"]).view(T, H, hd).transpose(0, 1)
                   for s_ in ("q_proj", "k_proj", "v_proj"))
        w = torch.softmax((q @ k.transpose(1, 2) * hd ** -0.5 / temperature).masked_fill(hidden_keys[None, None, :], float("-inf")), -1)
        weights.append(w)
        ctx = w @ v
        for (al, ah) in ablate:
            if al == l:
                ctx[ah] = 0
        ctx = ctx.transpose(0, 1).reshape(T, d)
        h = h + ctx @ t[b + "self_attn.out_proj.weight"].T + t[b + "self_attn.out_proj.bias"]
        m = layer_norm(h, t[b + "layer_norm2.weight"], t[b + "layer_norm2.bias"], eps)
        m = F.gelu(m @ t[b + "mlp.fc1.weight"].T + t[b + "mlp.fc1.bias"], approximate="tanh")
        h = h + m @ t[b + "mlp.fc2.weight"].T + t[b + "mlp.fc2.bias"]
    last = layer_norm(h, t["vision_model.post_layernorm.weight"], t["vision_model.post_layernorm.bias"], eps)
    # the pooling head's attention: the probe is the one query, the last hidden state the keys
    hw, hb = t["vision_model.head.attention.in_proj_weight"], t["vision_model.head.attention.in_proj_bias"]
    pq = (t["vision_model.head.probe"][0] @ hw[:d].T + hb[:d]).view(1, H, hd).transpose(0, 1)
    pk = (last @ hw[d:2 * d].T + hb[d:2 * d]).view(T, H, hd).transpose(0, 1)
    probe = torch.softmax((pq @ pk.transpose(1, 2) * hd ** -0.5 / temperature).masked_fill(hidden_keys[None, None, :], float("-inf")), -1)
    return torch.stack(weights), last, probe  # probe [H, 1, T]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = []
    labels = 5
    id2label = {str(i): f"class {chr(65 + i)}" for i in range(labels)}

    def folder(name, family, arch, prefix, head, d=32, layers=2, heads=4, inter=48, image=32,
               patch=8, **keys):
        cfg = {"model_type": family, "architectures": [arch], "hidden_size": d,
               "num_hidden_layers": layers, "num_attention_heads": heads, "image_size": image,
               "patch_size": patch, "num_channels": 3, "hidden_act": "gelu", "qkv_bias": True,
               "layer_norm_eps": 1e-6 if family.startswith("dinov2") else 1e-12,
               "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
               "torch_dtype": "float32"}
        if family == "dinov2_with_registers":
            cfg["num_register_tokens"] = REGISTERS
        if family.startswith("dinov2"):
            cfg.update({"mlp_ratio": inter / d, "layerscale_value": 1.0, "use_swiglu_ffn": False,
                        "drop_path_rate": 0.0, "use_mask_token": True})
        else:
            cfg["intermediate_size"] = inter
        if head in ("cls", "teacher"):
            cfg["id2label"] = id2label
            cfg["label2id"] = {v: int(k) for k, v in id2label.items()}
        cfg.update(keys)
        t = make_model(family, d, layers, heads, inter, image, patch, labels, prefix, head)
        path = os.path.join(out, name)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        write_safetensors(os.path.join(path, "model.safetensors"), t)
        pre = {"do_resize": True, "size": {"height": image, "width": image}, "resample": 2,
               "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
               "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
        with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
            json.dump(pre, f, indent=1)
        return cfg, t

    def case(name, fold, family, cfg, t, prefix, hw, **iv):
        px = np.random.default_rng(len(cases) + 7).standard_normal((3,) + hw)
        np.save(os.path.join(out, name + "_pixels.npy"), px)  # float64 pixels
        states = []
        w, h, z = forward(family, t, prefix, cfg, px, iv.get("mask_patches", ()),
                          iv.get("ablate", ()), states, iv.get("temperature", 1.0))
        np.save(os.path.join(out, name + "_weights.npy"), np.ascontiguousarray(w.numpy()))
        np.save(os.path.join(out, name + "_hidden.npy"), np.ascontiguousarray(h.numpy()))
        entry = {"name": name, "folder": fold, "pixels": name + "_pixels.npy", "tokens": h.shape[0]}
        np.save(os.path.join(out, name + "_residual.npy"),
                np.ascontiguousarray(torch.stack(states).numpy()))
        entry["residual"] = name + "_residual.npy"
        if z is not None:
            np.save(os.path.join(out, name + "_logits.npy"), np.ascontiguousarray(z.numpy()))
            entry["logits"] = name + "_logits.npy"
            entry["top"] = [int(i) for i in torch.argsort(z, descending=True)]
            entry["probs"] = [float(v) for v in torch.softmax(z, 0)]
        entry.update(iv)
        cases.append(entry)

    cfg, t = folder("vit_cls", "vit", "ViTForImageClassification", "vit.", "cls")
    case("vit_cls", "vit_cls", "vit", cfg, t, "vit.", (32, 32))
    case("vit_mask", "vit_cls", "vit", cfg, t, "vit.", (32, 32), mask_patches=[3, 7])
    case("vit_ablate", "vit_cls", "vit", cfg, t, "vit.", (32, 32), ablate=[[0, 1], [1, 3]])
    vit_cls = (cfg, t)  # for the temperature case, written last (the cases' seeds stay put)
    cfg, t = folder("vit_bare", "vit", "ViTModel", "", "pooler", d=24, heads=3, layers=3)
    case("vit_bare", "vit_bare", "vit", cfg, t, "", (32, 32))
    cfg, t = folder("deit_teacher", "deit", "DeiTForImageClassificationWithTeacher", "deit.",
                    "teacher")
    case("deit_teacher", "deit_teacher", "deit", cfg, t, "deit.", (32, 32))
    case("deit_mask", "deit_teacher", "deit", cfg, t, "deit.", (32, 32), mask_patches=[0, 15],
         ablate=[[1, 0]])
    cfg, t = folder("deit_cls", "deit", "DeiTForImageClassification", "deit.", "cls")
    case("deit_cls", "deit_cls", "deit", cfg, t, "deit.", (32, 32))
    cfg, t = folder("dinov2_cls", "dinov2", "Dinov2ForImageClassification", "dinov2.", "cls",
                    image=28, patch=7)
    case("dinov2_native", "dinov2_cls", "dinov2", cfg, t, "dinov2.", (28, 28))
    case("dinov2_larger", "dinov2_cls", "dinov2", cfg, t, "dinov2.", (35, 49))
    case("dinov2_smaller", "dinov2_cls", "dinov2", cfg, t, "dinov2.", (21, 16))
    case("dinov2_mask", "dinov2_cls", "dinov2", cfg, t, "dinov2.", (42, 42), mask_patches=[5, 6],
         ablate=[[0, 2]])
    cfg, t = folder("dinov2_bare", "dinov2", "Dinov2Model", "", None, image=28, patch=7)
    case("dinov2_bare", "dinov2_bare", "dinov2", cfg, t, "", (28, 28))
    fam = "dinov2_with_registers"
    cfg, t = folder("dinov2_reg_cls", fam, "Dinov2WithRegistersForImageClassification",
                    fam + ".", "cls", image=28, patch=7)
    case("dinov2_reg_native", "dinov2_reg_cls", fam, cfg, t, fam + ".", (28, 28))
    case("dinov2_reg_larger", "dinov2_reg_cls", fam, cfg, t, fam + ".", (35, 49))
    case("dinov2_reg_smaller", "dinov2_reg_cls", fam, cfg, t, fam + ".", (21, 16))
    case("dinov2_reg_mask", "dinov2_reg_cls", fam, cfg, t, fam + ".", (21, 35), mask_patches=[0, 14],
         ablate=[[1, 1]])
    cfg, t = folder("dinov2_reg_bare", fam, "Dinov2WithRegistersModel", "", None, image=28, patch=7)
    case("dinov2_reg_bare", "dinov2_reg_bare", fam, cfg, t, "", (28, 28))
    # CLIP: CLIPModel (vision_config; a text tower's tensors beside, unused) and CLIPVisionModel
    vcfg = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
            "num_attention_heads": 4, "image_size": 32, "patch_size": 8, "num_channels": 3,
            "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5, "model_type": "clip_vision_model"}
    for name, arch in (("clip", "CLIPModel"), ("clip_vision_model", "CLIPVisionModel")):
        t = make_clip(32, 2, 48, 32, 8)
        path = os.path.join(out, name)
        os.makedirs(path, exist_ok=True)
        if name == "clip":
            cfg = {"model_type": "clip", "architectures": [arch], "projection_dim": 16,
                   "text_config": {"hidden_size": 16, "model_type": "clip_text_model"},
                   "vision_config": vcfg}
            t["text_model.embeddings.token_embedding.weight"] = rand(10, 16)
            t["visual_projection.weight"] = rand(16, 32)
            t["logit_scale"] = torch.tensor(2.6592, dtype=D)
        else:
            cfg = dict(vcfg, architectures=[arch])
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        write_safetensors(os.path.join(path, "model.safetensors"), t)
        with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
            json.dump({"crop_size": {"height": 32, "width": 32}, "do_center_crop": True,
                       "do_normalize": True, "do_resize": True, "resample": 3,
                       "size": {"shortest_edge": 32}, "rescale_factor": 1 / 255,
                       "image_mean": [0.48145466, 0.4578275, 0.40821073],
                       "image_std": [0.26862954, 0.26130258, 0.27577711]}, f, indent=1)
        for cname, iv in ((name, {}), (name + "_mask", {"mask_patches": [2, 9], "ablate": [[1, 2]]})):
            px = np.random.default_rng(len(cases) + 7).standard_normal((3, 32, 32))
            np.save(os.path.join(out, cname + "_pixels.npy"), px.astype(np.float32))
            w, h, _ = forward_clip(t, vcfg, px.astype(np.float32).astype(np.float64),
                                   iv.get("mask_patches", ()), iv.get("ablate", ()))
            np.save(os.path.join(out, cname + "_weights.npy"), np.ascontiguousarray(w.numpy()))
            np.save(os.path.join(out, cname + "_hidden.npy"), np.ascontiguousarray(h.numpy()))
            cases.append(dict({"name": cname, "folder": name, "pixels": cname + "_pixels.npy",
                               "tokens": h.shape[0]}, **iv))
    # SigLIP: SiglipModel (vision_config) and SiglipVisionModel, with the pooling head
    scfg = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
            "num_attention_heads": 4, "image_size": 32, "patch_size": 8, "num_channels": 3,
            "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6,
            "model_type": "siglip_vision_model"}
    for name in ("siglip", "siglip_vision_model"):
        t = make_siglip(32, 2, 48, 32, 8)
        path = os.path.join(out, name)
        os.makedirs(path, exist_ok=True)
        if name == "siglip":
            cfg = {"model_type": "siglip", "architectures": ["SiglipModel"],
                   "text_config": {"hidden_size": 16, "model_type": "siglip_text_model"},
                   "vision_config": scfg}
            t["text_model.embeddings.token_embedding.weight"] = rand(10, 16)
            t["logit_scale"] = torch.tensor([2.3], dtype=D)
            t["logit_bias"] = torch.tensor([-10.0], dtype=D)
        else:
            cfg = dict(scfg, architectures=["SiglipVisionModel"])
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        write_safetensors(os.path.join(path, "model.safetensors"), t)
        with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
            json.dump({"do_normalize": True, "do_rescale": True, "do_resize": True, "resample": 3,
                       "size": {"height": 32, "width": 32}, "rescale_factor": 1 / 255,
                       "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}, f, indent=1)
        variants = [(name, {}), (name + "_mask", {"mask_patches": [1, 10], "ablate": [[0, 3]]})]
        if name == "siglip_vision_model":  # the last folder: the earlier cases' seeds stay put
            variants.append(("siglip_temperature", {"temperature": 2.5}))
        for cname, iv in variants:
            px = np.random.default_rng(len(cases) + 7).standard_normal((1, 3, 32, 32))
            np.save(os.path.join(out, cname + "_pixels.npy"), px)
            w, h, pr = forward_siglip(t, scfg, px[0], iv.get("mask_patches", ()), iv.get("ablate", ()),
                                      iv.get("temperature", 1.0))
            np.save(os.path.join(out, cname + "_weights.npy"), np.ascontiguousarray(w.numpy()))
            np.save(os.path.join(out, cname + "_hidden.npy"), np.ascontiguousarray(h.numpy()))
            np.save(os.path.join(out, cname + "_probe.npy"), np.ascontiguousarray(pr.numpy()))
            cases.append(dict({"name": cname, "folder": name, "pixels": cname + "_pixels.npy",
                               "tokens": h.shape[0], "probe": cname + "_probe.npy"}, **iv))
    # A temperature below 1 (sharper rows), with hidden patches, on the ViT classifier.
    case("vit_temperature", "vit_cls", "vit", vit_cls[0], vit_cls[1], "vit.", (32, 32),
         temperature=0.5, mask_patches=[4])
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


if __name__ == "__main__":
    main()
