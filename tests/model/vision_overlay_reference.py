#!/usr/bin/python3
"""The overlay figure `attnviz export --overlay` must draw, computed here with numpy from the
model's own outputs (whose weights the VisionModels tests hold to the torch reference):

    vision_overlay_reference.py OUT_DIR
        Random-init folders in the Hugging Face layout (vision_reference.py's writer): OUT_DIR/vit
        (3 layers, 4 heads, 48 x 48 pixels in 6 x 6 patches), OUT_DIR/dinov2_reg (CLS, 3
        registers, then 5 x 7 patches of a 40 x 56 image: a grid that is not square) and
        OUT_DIR/siglip (no CLS token), and OUT_DIR/image.png (97 x 61, procedural).

    vision_overlay_reference.py expect --folder F --image I --pixels P.npy --weights W.npy
            --colormap C.npy --layer L --head H --token cls|mean|probe|N [--rollout]
            [--rollout-heads mean|max] [--rollout-discard F] [--probe PROBE.npy] --opacity A
            --out E.npy
        E.npy: float32 [H, W, 3] of whole 0..255 values, the image as the model sees it with the map blended over it.

The image: the pixels `--pixels-out` wrote, normalisation undone (x * std + mean) / rescale and
rounded, checked against PIL's resize of the file. The map: row N (cls: 0; mean: the mean of the
patch queries' rows) of head H's weights in layer L, or of the rollout to layer L (per layer
A' = 0.5 * mean over heads + 0.5 * I, rows renormalised, R = A'_L ... A'_0), over the patch
columns, as a grid. Upsampled with this file's own bilinear code, align_corners=False (as
torch's F.interpolate, which checks it): pixel x samples (x + 0.5) * n / W - 0.5, clamped at 0.
Colour: the colormap table C.npy [256, 3] at round(v / max * 255); blend
round(A * colour + (1 - A) * pixel).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vision_reference as vr  # noqa: E402


def write_folder(path, cfg, tensors, pre):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    vr.write_safetensors(os.path.join(path, "model.safetensors"), tensors)
    with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=1)


def make(out):
    torch.manual_seed(4321)
    os.makedirs(out, exist_ok=True)
    base = {"hidden_size": 32, "num_attention_heads": 4, "num_channels": 3, "hidden_act": "gelu",
            "qkv_bias": True, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    pre = {"do_resize": True, "resample": 2, "do_center_crop": False, "do_rescale": True,
           "rescale_factor": 1 / 255,
           "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    # ViT: 48 x 48 pixels, 6 x 6 patches of 8
    cfg = dict(base, model_type="vit", architectures=["ViTModel"], num_hidden_layers=3,
               intermediate_size=48, image_size=48, patch_size=8, layer_norm_eps=1e-12)
    t = vr.make_model("vit", 32, 3, 4, 48, 48, 8, 0, "", None)
    write_folder(os.path.join(out, "vit"), cfg, t, dict(pre, size={"height": 48, "width": 48}))
    # DINOv2 with registers: positions for 4 x 4 patches interpolated to a 5 x 7 grid
    cfg = dict(base, model_type="dinov2_with_registers", architectures=["Dinov2WithRegistersModel"],
               num_hidden_layers=2, image_size=32, patch_size=8, layer_norm_eps=1e-6,
               num_register_tokens=vr.REGISTERS, mlp_ratio=1.5, layerscale_value=1.0,
               use_swiglu_ffn=False, drop_path_rate=0.0, use_mask_token=True)
    t = vr.make_model("dinov2_with_registers", 32, 2, 4, 48, 32, 8, 0, "", None)
    write_folder(os.path.join(out, "dinov2_reg"), cfg, t,
                 dict(pre, resample=3, size={"height": 40, "width": 56}))
    # SigLIP's vision tower: no CLS token
    cfg = {"model_type": "siglip_vision_model", "architectures": ["SiglipVisionModel"],
           "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
           "num_attention_heads": 4, "image_size": 32, "patch_size": 8, "num_channels": 3,
           "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6}
    t = vr.make_siglip(32, 2, 48, 32, 8)
    write_folder(os.path.join(out, "siglip"), cfg, t,
                 dict(pre, resample=3, size={"height": 32, "width": 32}))
    # The image: gradients, a disc and a bar, 97 x 61
    h, w = 61, 97
    y, x = np.mgrid[0:h, 0:w]
    disc = (x - 30) ** 2 + (y - 25) ** 2 < 220
    bar = (x > 60) & (x < 85) & (y > 35) & (y < 50)
    rgb = np.stack([x * 255 // (w - 1), 255 - y * 255 // (h - 1),
                    disc * 190 + bar * 60 + 5], axis=-1).astype(np.uint8)
    Image.fromarray(rgb, "RGB").save(os.path.join(out, "image.png"))
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"folders": ["vit", "dinov2_reg", "siglip"], "image": "image.png"}, f)


def upsample(grid, height, width):
    """Bilinear, align_corners=False, with this file's own indexing."""
    gh, gw = grid.shape

    def taps(n_out, n_in):
        s = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
        s = np.maximum(s, 0.0)
        i0 = np.minimum(np.floor(s).astype(int), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, s - i0

    y0, y1, fy = taps(height, gh)
    x0, x1, fx = taps(width, gw)
    top = grid[y0][:, x0] * (1 - fx) + grid[y0][:, x1] * fx
    bottom = grid[y1][:, x0] * (1 - fx) + grid[y1][:, x1] * fx
    return top * (1 - fy)[:, None] + bottom * fy[:, None]


def rollout(w, layer, heads="mean", discard=0.0):
    """Abnar & Zuidema's rollout as vit-explain writes it: the heads fused (mean or max), the
    lowest int(T * T * discard) entries of the fused matrix zeroed (a stable argsort: ties by
    flat index) except flat index 0 (CLS to CLS), then (A + I) / 2 with rows renormalised,
    R = A'_L ... A'_0."""
    T = w.shape[-1]
    r = None
    for l in range(layer + 1):
        fused = w[l].max(axis=0) if heads == "max" else w[l].mean(axis=0)
        if discard > 0:
            flat = fused.reshape(-1).copy()
            idx = np.argsort(flat, kind="stable")[:int(flat.size * discard)]
            flat[idx[idx != 0]] = 0
            fused = flat.reshape(T, T)
        a = (fused + np.eye(T)) / 2
        a = a / a.sum(axis=-1, keepdims=True)
        r = a if r is None else a @ r
    return r


def expect(a):
    with open(os.path.join(a.folder, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(a.folder, "preprocessor_config.json")) as f:
        pre = json.load(f)
    px = np.load(a.pixels).astype(np.float64)  # [3, H, W]
    _, H, W = px.shape
    mean = np.asarray(pre["image_mean"])[:, None, None]
    std = np.asarray(pre["image_std"])[:, None, None]
    seen = np.rint((px * std + mean) / pre["rescale_factor"]).clip(0, 255).astype(np.uint8)
    seen = seen.transpose(1, 2, 0)
    pil = np.asarray(Image.open(a.image).convert("RGB").resize((W, H), resample=pre["resample"]))
    if np.abs(pil.astype(int) - seen.astype(int)).max() > 1:
        sys.exit("the pixels do not undo to PIL's resize of the image")

    w = np.load(a.weights).astype(np.float64)  # [L, H, T, T]
    T = w.shape[-1]
    p = cfg["patch_size"]
    gh, gw = H // p, W // p
    prefix = T - gh * gw
    m = rollout(w, a.layer, a.rollout_heads, a.rollout_discard) if a.rollout else w[a.layer, a.head]
    if a.token == "probe":  # the pooling probe's row [H, 1, T]
        m = np.load(a.probe).astype(np.float64)[a.head]
        row = m[0, prefix:]
    elif a.token == "mean":
        row = m[prefix:, prefix:].mean(axis=0)
    else:
        row = m[0 if a.token == "cls" else int(a.token), prefix:]
    grid = row.reshape(gh, gw)
    up = upsample(grid, H, W)
    ref = F.interpolate(torch.from_numpy(grid)[None, None], size=(H, W), mode="bilinear",
                        align_corners=False)[0, 0].numpy()
    if np.abs(up - ref).max() > 1e-12:
        sys.exit("the bilinear upsampling differs from torch's")
    top = grid.max() if grid.max() > 0 else 1.0
    table = np.load(a.colormap).astype(np.float64)[:, :3]
    colour = table[np.rint(np.clip(up / top, 0, 1) * 255).astype(int)]
    out = np.rint(a.opacity * colour + (1 - a.opacity) * seen).clip(0, 255).astype(np.uint8)
    np.save(a.out, out.astype(np.float32))


def main():
    if len(sys.argv) == 2:
        make(sys.argv[1])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["expect"])
    for k in ("folder", "image", "pixels", "weights", "colormap", "token", "out"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--layer", type=int, required=True)
    ap.add_argument("--head", type=int, default=0)
    ap.add_argument("--opacity", type=float, default=0.6)
    ap.add_argument("--rollout", action="store_true")
    ap.add_argument("--rollout-heads", default="mean", choices=["mean", "max"])
    ap.add_argument("--rollout-discard", type=float, default=0.0)
    ap.add_argument("--probe")
    expect(ap.parse_args())


if __name__ == "__main__":
    main()
