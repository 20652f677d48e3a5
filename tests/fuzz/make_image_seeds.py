#!/usr/bin/python3
"""Writes the seed corpus of fuzz_image (tests/fuzz/corpus/image): tiny PNGs (RGB, RGBA, grey,
grey + alpha, palette, 16-bit), a baseline and a progressive JPEG, and BMPs (24- and 32-bit)."""
import os

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "image")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(1)
rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
Image.fromarray(rgb).save(os.path.join(OUT, "rgb.png"))
Image.fromarray(np.dstack([rgb, rgb[..., :1]]), "RGBA").save(os.path.join(OUT, "rgba.png"))
Image.fromarray(rgb[..., 0]).save(os.path.join(OUT, "grey.png"))
Image.fromarray(rgb[..., :2], "LA").save(os.path.join(OUT, "greyalpha.png"))
Image.fromarray(rgb).convert("P").save(os.path.join(OUT, "palette.png"))
Image.fromarray(rgb[..., 0].astype(np.uint16) * 257).save(os.path.join(OUT, "grey16.png"))
Image.fromarray(rgb).save(os.path.join(OUT, "baseline.jpg"), quality=80)
Image.fromarray(rgb).save(os.path.join(OUT, "progressive.jpg"), quality=80, progressive=True)
Image.fromarray(rgb).save(os.path.join(OUT, "rgb24.bmp"))
Image.fromarray(np.dstack([rgb, rgb[..., :1]]), "RGBA").save(os.path.join(OUT, "rgba32.bmp"))
