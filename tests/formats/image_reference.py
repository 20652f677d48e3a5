#!/usr/bin/python3
"""Reference for image_test.cpp: draws test images, writes model folders whose
preprocessor_config.json follows each image family's, and preprocesses every image with Pillow
and numpy the way transformers' image processors do (Pillow's resize on the 8-bit RGB image,
centre crop, rescale in float64 stored as float32, normalise in float32).

Usage: /usr/bin/python3 image_reference.py OUT_DIR
Writes OUT_DIR/images/*.{png,jpg,bmp}, OUT_DIR/models/<family>/{config,preprocessor_config}.json
and, per image and family, OUT_DIR/expected/<image>__<family>.seen.npy (the 8-bit image after
resize and crop, as float32 [H, W, 3]) and .pixels.npy (float32 [3, H, W]), plus the decoded RGB
image OUT_DIR/expected/<image>.rgb.npy (float32 [H, W, 3]) and a manifest.json.
"""
import json
import math
import os
import sys

import numpy as np
from PIL import Image

OUT = sys.argv[1]
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# Each family's config as its hub checkpoints write it.
FAMILIES = {
    "vit": ("vit", {"do_resize": True, "size": {"height": 224, "width": 224}, "resample": 2,
                    "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
                    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                    "image_processor_type": "ViTImageProcessor"}),
    "vit_bare": ("vit", {"size": 96, "resample": 2, "image_mean": [0.5, 0.5, 0.5],
                         "image_std": [0.5, 0.5, 0.5]}),
    "deit": ("deit", {"do_resize": True, "size": {"height": 256, "width": 256}, "resample": 3,
                      "do_center_crop": True, "crop_size": {"height": 224, "width": 224},
                      "rescale_factor": 1 / 255, "image_mean": IMAGENET_MEAN,
                      "image_std": IMAGENET_STD}),
    "clip": ("clip", {"do_resize": True, "size": {"shortest_edge": 224}, "resample": 3,
                      "do_center_crop": True, "crop_size": {"height": 224, "width": 224},
                      "do_rescale": True, "rescale_factor": 0.00392156862745098,
                      "do_normalize": True, "image_mean": CLIP_MEAN, "image_std": CLIP_STD,
                      "do_convert_rgb": True}),
    "clip_bare": ("clip_vision_model", {"size": 224, "crop_size": 224, "resample": 3,
                                        "do_center_crop": True, "image_mean": CLIP_MEAN,
                                        "image_std": CLIP_STD}),
    "dinov2": ("dinov2", {"do_resize": True, "size": {"shortest_edge": 256}, "resample": 3,
                          "do_center_crop": True, "crop_size": {"height": 224, "width": 224},
                          "do_rescale": True, "rescale_factor": 0.00392156862745098,
                          "do_normalize": True, "image_mean": IMAGENET_MEAN,
                          "image_std": IMAGENET_STD, "image_processor_type": "BitImageProcessor"}),
    "siglip": ("siglip", {"do_resize": True, "size": {"height": 224, "width": 224}, "resample": 3,
                          "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
                          "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}),
    # Bilinear up- and downscaling to a non-square size, crop larger than the image (padding).
    "odd": ("vit", {"size": {"height": 37, "width": 300}, "resample": 2, "do_center_crop": True,
                    "crop_size": {"height": 41, "width": 250}, "do_rescale": False,
                    "do_normalize": True, "image_mean": 127.5, "image_std": 64.0}),
}
BARE_SHORTEST = {"clip", "clip_vision_model", "dinov2", "dinov2_with_registers", "bit"}


def pattern(w, h, seed):
    """Smooth gradients, a checkerboard and noise: exercises over- and undershoot."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 127.5 + 127.5 * np.sin(x / max(w, 1) * 6.3 + seed)
    g = 255.0 * y / max(h - 1, 1)
    b = np.where(((x // 7) + (y // 5)) % 2 == 0, 230.0, 20.0)
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, 18, (h, w, 3))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def make_images():
    d = os.path.join(OUT, "images")
    os.makedirs(d, exist_ok=True)
    out = {}
    for name, (w, h) in {"land_640x480": (640, 480), "port_333x517": (333, 517),
                         "small_50x40": (50, 40), "tall_13x301": (13, 301),
                         "square_224": (224, 224), "wide_1000x97": (1000, 97)}.items():
        p = os.path.join(d, name + ".png")
        Image.fromarray(pattern(w, h, len(name))).save(p)
        out[name] = p
    rgba = np.concatenate([pattern(300, 200, 3), pattern(300, 200, 4)[..., :1]], axis=-1)
    out["rgba_300x200"] = os.path.join(d, "rgba_300x200.png")
    Image.fromarray(rgba, "RGBA").save(out["rgba_300x200"])
    out["grey_257x129"] = os.path.join(d, "grey_257x129.png")
    Image.fromarray(pattern(257, 129, 5)[..., 1], "L").save(out["grey_257x129"])
    la = np.stack([pattern(90, 120, 6)[..., 0], pattern(90, 120, 7)[..., 2]], axis=-1)
    out["greyalpha_90x120"] = os.path.join(d, "greyalpha_90x120.png")
    Image.fromarray(la, "LA").save(out["greyalpha_90x120"])
    out["bmp_161x99"] = os.path.join(d, "bmp_161x99.bmp")
    Image.fromarray(pattern(161, 99, 8)).save(out["bmp_161x99"])
    out["jpeg_320x240"] = os.path.join(d, "jpeg_320x240.jpg")
    Image.fromarray(pattern(320, 240, 9)).save(out["jpeg_320x240"], quality=92, subsampling=0)
    return out


def resized_size(pre, model_type, h, w):
    size = pre.get("size")
    if isinstance(size, int):
        size = {"shortest_edge": size} if model_type in BARE_SHORTEST else {"height": size,
                                                                            "width": size}
    if "shortest_edge" in size:
        # transformers' get_resize_output_image_size
        short, long = (w, h) if w <= h else (h, w)
        s = size["shortest_edge"]
        if short == s:
            return h, w
        new_short, new_long = s, int(s * long / short)
        return (new_long, new_short) if w <= h else (new_short, new_long)
    return size["height"], size["width"]


def center_crop(a, ch, cw):
    """transformers.image_transforms.center_crop on [H, W, C]."""
    oh, ow = a.shape[:2]
    top, left = (oh - ch) // 2, (ow - cw) // 2
    bottom, right = top + ch, left + cw
    if top >= 0 and bottom <= oh and left >= 0 and right <= ow:
        return a[top:bottom, left:right]
    nh, nw = max(ch, oh), max(cw, ow)
    padded = np.zeros((nh, nw) + a.shape[2:], dtype=a.dtype)
    tp, lp = math.ceil((nh - oh) / 2), math.ceil((nw - ow) / 2)
    padded[tp:tp + oh, lp:lp + ow] = a
    top, bottom, left, right = top + tp, bottom + tp, left + lp, right + lp
    return padded[max(0, top):min(nh, bottom), max(0, left):min(nw, right)]


def preprocess(img, model_type, pre):
    rgb = img.convert("RGB")
    if pre.get("do_resize", True):
        h, w = resized_size(pre, model_type, rgb.height, rgb.width)
        rgb = rgb.resize((w, h), resample=pre["resample"])
    a = np.array(rgb)
    if pre.get("do_center_crop", False):
        cs = pre["crop_size"]
        cs = {"height": cs, "width": cs} if isinstance(cs, int) else cs
        a = center_crop(a, cs["height"], cs["width"])
    seen = a
    x = a
    if pre.get("do_rescale", True):
        x = (x.astype(np.float64) * pre.get("rescale_factor", 1 / 255)).astype(np.float32)
    if pre.get("do_normalize", True):
        x = x.astype(np.float32)
        mean = np.array(pre["image_mean"], dtype=np.float32)
        std = np.array(pre["image_std"], dtype=np.float32)
        x = (x - mean) / std
    return seen, np.ascontiguousarray(x.transpose(2, 0, 1).astype(np.float32))


def main():
    images = make_images()
    exp = os.path.join(OUT, "expected")
    os.makedirs(exp, exist_ok=True)
    cases = []
    for fam, (model_type, pre) in FAMILIES.items():
        md = os.path.join(OUT, "models", fam)
        os.makedirs(md, exist_ok=True)
        with open(os.path.join(md, "config.json"), "w") as f:
            json.dump({"model_type": model_type}, f)
        with open(os.path.join(md, "preprocessor_config.json"), "w") as f:
            json.dump(pre, f, indent=2)
    for name, path in images.items():
        img = Image.open(path)
        img.load()
        np.save(os.path.join(exp, name + ".rgb.npy"), np.array(img.convert("RGB")).astype(np.float32))
        for fam, (model_type, pre) in FAMILIES.items():
            seen, pixels = preprocess(img, model_type, pre)
            stem = os.path.join(exp, name + "__" + fam)
            np.save(stem + ".seen.npy", seen.astype(np.float32))
            np.save(stem + ".pixels.npy", pixels)
            cases.append({"image": path, "name": name, "family": fam,
                          "model": os.path.join(OUT, "models", fam),
                          "filter": pre["resample"], "jpeg": path.endswith(".jpg"),
                          "seen": stem + ".seen.npy", "pixels": stem + ".pixels.npy",
                          "rgb": os.path.join(exp, name + ".rgb.npy")})
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(cases, f, indent=1)


if __name__ == "__main__":
    main()
