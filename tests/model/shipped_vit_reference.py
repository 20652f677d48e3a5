#!/usr/bin/env python3
"""Float64 reference for the shipped ViT (assets/models/shapes-vit) on the first held-out pictures
of its card and on its examples.

Usage: shipped_vit_reference.py OUTDIR [N]

Draws the card's first N held-out pictures (tools/train/shapes.py, the card's seed), writes each
as a PNG with its object's mask, and runs them through vision_reference.py's float64 ViT
(written from the published architecture; transformers is not used) on pixels preprocessed here
from the PNG's bytes (the folder's preprocessor_config.json: the pictures are drawn at the
model's size, so no resize; rescale, then normalise). Writes, under OUTDIR:
  NAME.png, NAME_mask.npy (float64 [H, W], 1 on the object), NAME_pixels.npy (float64 [3, H, W]),
  NAME_weights.npy [L, H, T, T], NAME_logits.npy [labels]
and cases.json: each case's label, the reference's prediction, and the card's figures computed
here from the reference's weights: the last layer's CLS share on the object per head (the weight
on each patch times the share of its pixels on the mask, summed) and the rollout's (per layer
0.5 * head mean + 0.5 * I, rows renormalised, multiplied up).
"""
import json
import os
import struct
import sys

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import shapes  # noqa: E402
from vision_reference import forward  # noqa: E402

MODEL = os.path.join(ROOT, "assets", "models", "shapes-vit")


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", name
        a, b = t["data_offsets"]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").reshape(t["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float64))
    return out


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(MODEL, "preprocessor_config.json")) as f:
        pre = json.load(f)
    t = read_safetensors(os.path.join(MODEL, "model.safetensors"))
    p = cfg["patch_size"]
    mean = np.array(pre["image_mean"], np.float64)[:, None, None]
    std = np.array(pre["image_std"], np.float64)[:, None, None]

    def case(name, img, mask, label):
        png = os.path.join(out, name + ".png")
        Image.fromarray(img).save(png)
        rgb = np.asarray(Image.open(png).convert("RGB"), np.float64)  # the file's own bytes
        assert rgb.shape[:2] == (cfg["image_size"], cfg["image_size"])
        px = (rgb.transpose(2, 0, 1) * pre["rescale_factor"] - mean) / std
        np.save(os.path.join(out, name + "_pixels.npy"), px)
        np.save(os.path.join(out, name + "_mask.npy"), mask.astype(np.float64))
        w, _, z = forward("vit", t, "vit.", cfg, px)
        w, z = w.numpy(), z.numpy()
        np.save(os.path.join(out, name + "_weights.npy"), w)
        np.save(os.path.join(out, name + "_logits.npy"), z)
        g = cfg["image_size"] // p
        cover = mask.reshape(g, p, g, p).mean(axis=(1, 3)).reshape(-1)
        L, H, T, _ = w.shape
        cls_last = w[L - 1, :, 0, 1:] @ cover
        R = np.eye(T)
        for l in range(L):
            A = 0.5 * w[l].mean(0) + 0.5 * np.eye(T)
            R = (A / A.sum(-1, keepdims=True)) @ R
        return {"name": name, "png": name + ".png", "mask": name + "_mask.npy",
                "pixels": name + "_pixels.npy", "weights": name + "_weights.npy",
                "logits": name + "_logits.npy", "label": int(label),
                "pred": int(np.argmax(z)), "top2_gap": float(np.sort(z)[-1] - np.sort(z)[-2]),
                "cls_pixel_last": cls_last.tolist(),
                "rollout_pixel_last": float(R[0, 1:] @ cover),
                "uniform_pixel": float(cover.sum() / T)}

    cases = []
    imgs, masks, labels = shapes.heldout(n)
    for i in range(n):
        cases.append(case(f"heldout{i}", imgs[i], masks[i], labels[i]))
    for k, c in enumerate(shapes.CLASSES):
        img = np.asarray(Image.open(os.path.join(MODEL, "examples", c + ".png")).convert("RGB"))
        mask = np.asarray(Image.open(os.path.join(MODEL, "examples", c + "-mask.png"))) > 0
        cases.append(case("example_" + c, img, mask, k))
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


if __name__ == "__main__":
    main()
