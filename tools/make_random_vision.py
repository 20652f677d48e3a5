#!/usr/bin/python3
"""Writes the two random-init image models the "High-norm tokens and registers" and "SigLIP's
probe" presets open, with a procedurally drawn picture each:

    tools/make_random_vision.py [assets/models]

    dinov2-registers-random/  DINOv2 with registers (Dinov2WithRegistersModel): d 64, 4 layers,
                              4 heads, 4 registers, 112 x 112 pixels in 8 x 8 patches of 14
    siglip-random/            SigLIP's vision tower with its pooling head (SiglipVisionModel):
                              d 64, 4 layers, 4 heads, 112 x 112 pixels in 7 x 7 patches of 16

Each folder: config.json, model.safetensors (float32), preprocessor_config.json, README.md and
examples/shapes.png. The weights are random (torch.manual_seed, the tensor names and shapes of
tests/model/vision_reference.py's writers): nothing here was trained, and what the presets show
is how the views read a model, not what a trained DINOv2 or SigLIP learns. The script is
deterministic: rerunning it rewrites the same bytes.
"""
import json
import os
import sys

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "model"))
import vision_reference as vr  # noqa: E402

PRE = {"do_resize": True, "resample": 3, "do_center_crop": False, "do_rescale": True,
       "rescale_factor": 1 / 255, "do_normalize": True,
       "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
       "size": {"height": 112, "width": 112}}


def picture():
    """A disc, a bar and a triangle on a gradient, 160 x 120."""
    h, w = 120, 160
    y, x = np.mgrid[0:h, 0:w]
    disc = (x - 45) ** 2 + (y - 40) ** 2 < 600
    bar = (x > 95) & (x < 150) & (y > 70) & (y < 95)
    tri = (y > 60) & (y < 115) & (np.abs(x - 50) < (y - 60) * 0.6)
    rgb = np.stack([40 + x * 150 // (w - 1), 60 + y * 120 // (h - 1),
                    150 + 0 * x], axis=-1)
    rgb[disc] = (230, 200, 40)
    rgb[bar] = (200, 50, 60)
    rgb[tri] = (40, 170, 90)
    return Image.fromarray(rgb.clip(0, 255).astype(np.uint8), "RGB")


def write(path, cfg, tensors, readme):
    os.makedirs(os.path.join(path, "examples"), exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    vr.write_safetensors(os.path.join(path, "model.safetensors"),
                         {k: v.to(torch.float32) for k, v in tensors.items()})
    with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
        json.dump(PRE, f, indent=1)
        f.write("\n")
    with open(os.path.join(path, "README.md"), "w") as f:
        f.write(readme)
    picture().save(os.path.join(path, "examples", "shapes.png"), optimize=False)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "assets", "models")
    vr.REGISTERS = 4
    torch.manual_seed(2024)
    fam = "dinov2_with_registers"
    cfg = {"model_type": fam, "architectures": ["Dinov2WithRegistersModel"], "hidden_size": 64,
           "num_hidden_layers": 4, "num_attention_heads": 4, "mlp_ratio": 2.0, "image_size": 112,
           "patch_size": 14, "num_channels": 3, "hidden_act": "gelu", "qkv_bias": True,
           "layer_norm_eps": 1e-6, "layerscale_value": 1.0, "use_swiglu_ffn": False,
           "drop_path_rate": 0.0, "use_mask_token": True, "num_register_tokens": 4,
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
           "torch_dtype": "float32"}
    t = vr.make_model(fam, 64, 4, 4, 128, 112, 14, 0, "", None)
    write(os.path.join(out, "dinov2-registers-random"), cfg, t, """# dinov2-registers-random

A **random-init** DINOv2 with registers (`Dinov2WithRegistersModel`: hidden size 64, 4 layers,
4 heads, 4 registers, 112 x 112 pixels in 8 x 8 patches of 14), written by
`tools/make_random_vision.py` with the tensor names and shapes of the Hugging Face layout. Nothing
in it was trained: the preset "High-norm tokens and registers" opens it to show how the image
view's token norms, high-norm marks and the registers' own rows are read, not what a trained
DINOv2 learns (Darcet et al. 2023 find the high-norm tokens in trained ViTs).

`examples/shapes.png` is a procedurally drawn picture (the same script).
""")
    torch.manual_seed(2025)
    cfg = {"model_type": "siglip_vision_model", "architectures": ["SiglipVisionModel"],
           "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
           "num_attention_heads": 4, "image_size": 112, "patch_size": 16, "num_channels": 3,
           "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6}
    t = vr.make_siglip(64, 4, 128, 112, 16)
    write(os.path.join(out, "siglip-random"), cfg, t, """# siglip-random

A **random-init** SigLIP vision tower with its pooling head (`SiglipVisionModel`: hidden size 64,
4 layers, 4 heads, 112 x 112 pixels in 7 x 7 patches of 16, no CLS token), written by
`tools/make_random_vision.py` with the tensor names and shapes of the Hugging Face layout.
Nothing in it was trained: the preset "SigLIP's probe" opens it to show how the image view draws
the pooling probe's attention over the patches, not where a trained SigLIP looks.

`examples/shapes.png` is a procedurally drawn picture (the same script).
""")


if __name__ == "__main__":
    main()
