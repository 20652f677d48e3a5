#!/usr/bin/python3
"""The preprocessing `attnviz model --image` must match, done with PIL and numpy as Hugging Face's
image processors do it (resize with PIL's filter on 8-bit RGB, centre crop, rescale, normalise):

    /usr/bin/python3 tests/model/vision_image_reference.py FOLDER OUT_DIR

Draws OUT_DIR/image.png (97 x 61, procedural: gradients and a disc) and writes OUT_DIR/pixels.npy,
float32 [3, H, W], for FOLDER's preprocessor_config.json (`size` as {height, width} or
{shortest_edge}, `crop_size`, `resample` 2 or 3).
"""
import json
import os
import sys

import numpy as np
from PIL import Image


def main():
    folder, out = sys.argv[1], sys.argv[2]
    h, w = 61, 97
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 255 // (w - 1), y * 255 // (h - 1), ((x - 40) ** 2 + (y - 30) ** 2 < 300) * 200 + 30],
                   axis=-1).astype(np.uint8)
    img = Image.fromarray(rgb, "RGB")
    img.save(os.path.join(out, "image.png"))
    with open(os.path.join(folder, "preprocessor_config.json")) as f:
        p = json.load(f)
    size = p["size"]
    if "shortest_edge" in size:  # the short side to S, the long one truncated (int())
        s = size["shortest_edge"]
        if w <= h:
            nw, nh = s, int(s * h / w)
        else:
            nh, nw = s, int(s * w / h)
    else:
        nh, nw = size["height"], size["width"]
    img = img.resize((nw, nh), resample=p.get("resample", 2))
    a = np.asarray(img).astype(np.float32)
    if p.get("do_center_crop"):
        ch, cw = p["crop_size"]["height"], p["crop_size"]["width"]
        top, left = (nh - ch) // 2, (nw - cw) // 2
        a = a[top:top + ch, left:left + cw]
    a = a * np.float32(p.get("rescale_factor", 1 / 255))
    mean = np.asarray(p["image_mean"], dtype=np.float32)
    std = np.asarray(p["image_std"], dtype=np.float32)
    a = (a - mean) / std
    np.save(os.path.join(out, "pixels.npy"), a.transpose(2, 0, 1).astype(np.float32))


if __name__ == "__main__":
    main()
