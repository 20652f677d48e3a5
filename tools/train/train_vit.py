#!/usr/bin/python3
"""Trains shapes-vit, the small ViT image classifier that ships in assets/models/shapes-vit, on
the CPU, on images drawn by shapes.py (one large target shape among clutter; the label is the
target's kind and its pixel mask is known). One command:

    /usr/bin/python3 tools/train/train_vit.py --out assets/models/shapes-vit \\
        --attnviz build/app/attnviz

(python3-torch, python3-numpy and python3-pil from Debian; the card's figures are measured
through the attnviz binary given, by vit_card.py). It writes, into --out:
  config.json               HF ViTConfig (model_type "vit", ViTForImageClassification, id2label)
  model.safetensors         F32, the HF ViTForImageClassification key names (vit.embeddings.*,
                            vit.encoder.layer.N.*, vit.layernorm.*, classifier.*)
  preprocessor_config.json  as ViTImageProcessor writes it (resize to the image size, rescale
                            by 1/255, normalise with mean 0.5 and std 0.5)
  examples/*.png            a few drawn images (not trained on) for the presets, with their masks
  training_log.json         every batch loss, the evaluations, the recipe, the timings
  card.json, README.md      the card (vit_card.py)

The model, written from the published architecture (Dosovitskiy et al. 2020, "An Image is Worth
16x16 Words") as transformers' ViT implements it: a strided convolution cuts the image into
patches, a learned CLS token is put first, learned absolute position embeddings are added; then
pre-norm layers, x = x + O(attention(LN(x))), x = x + down(gelu(up(LN(x)))), exact (erf) GELU,
biases everywhere, no mask; a final LayerNorm; the classifier reads the CLS token.

Deterministic: the seed drives the init (torch.manual_seed) and every drawn image (numpy PCG64);
torch runs on one thread with deterministic algorithms, so a rerun on the same machine gives the
same bytes.
"""
import argparse
import json
import math
import os
import platform
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import shapes  # noqa: E402

NAME = "shapes-vit"

MODEL = {
    "image_size": shapes.SIZE,
    "patch_size": 8,
    "hidden_size": 64,
    "intermediate_size": 256,
    "n_layers": 4,
    "n_heads": 4,
    "layer_norm_eps": 1e-12,
}

RECIPE = {
    "seed": 4242,
    "batch": 64,
    "steps": 1600,
    "pool": 32000,  # pictures drawn once; each epoch visits them in a new random order
    "lr": 2e-3,
    "warmup": 50,
    "min_lr_frac": 0.02,  # cosine decay from lr to lr * this at the last step
    "weight_decay": 0.05,
    "betas": [0.9, 0.999],
    "grad_clip": 1.0,
    "dropout": 0.0,
    "eval_every": 200,
    "eval_images": 512,
    "threads": 1,
}

MEAN, STD = 0.5, 0.5  # ViTImageProcessor's defaults


# ---- the model -----------------------------------------------------------------------------------

class Layer(nn.Module):
    def __init__(self, d, inner, heads, eps):
        super().__init__()
        self.h = heads
        self.ln1 = nn.LayerNorm(d, eps=eps)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln2 = nn.LayerNorm(d, eps=eps)
        self.up, self.down = nn.Linear(d, inner), nn.Linear(inner, d)

    def forward(self, x, keep=None):
        B, T, d = x.shape
        dh = d // self.h
        a = self.ln1(x)
        q, k, v = (f(a).view(B, T, self.h, dh).transpose(1, 2) for f in (self.q, self.k, self.v))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        if keep is not None:
            keep.append(w)
        x = x + self.o((w @ v).transpose(1, 2).reshape(B, T, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, m, labels):
        super().__init__()
        d, p = m["hidden_size"], m["patch_size"]
        n = (m["image_size"] // p) ** 2
        self.m = m
        self.patch = nn.Conv2d(3, d, p, stride=p)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, n + 1, d))
        self.layers = nn.ModuleList(Layer(d, m["intermediate_size"], m["n_heads"],
                                          m["layer_norm_eps"]) for _ in range(m["n_layers"]))
        self.ln = nn.LayerNorm(d, eps=m["layer_norm_eps"])
        self.head = nn.Linear(d, labels)
        # transformers' ViT init: truncated normal(0.02) for the matrices, the convolution, the
        # CLS token and the position embeddings; zero biases; LayerNorm 1 and 0
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Conv2d)):
                nn.init.trunc_normal_(mod.weight, std=0.02)
                nn.init.zeros_(mod.bias)
        nn.init.trunc_normal_(self.cls, std=0.02)
        nn.init.trunc_normal_(self.pos, std=0.02)

    def forward(self, x, keep=None):
        e = self.patch(x).flatten(2).transpose(1, 2)  # [B, N, d]
        h = torch.cat([self.cls.expand(x.shape[0], -1, -1), e], 1) + self.pos
        for layer in self.layers:
            h = layer(h, keep)
        return self.head(self.ln(h)[:, 0])

    def hf_state(self):
        """name -> float32 numpy, under ViTForImageClassification's names."""
        s = {"vit.embeddings.cls_token": self.cls,
             "vit.embeddings.position_embeddings": self.pos,
             "vit.embeddings.patch_embeddings.projection.weight": self.patch.weight,
             "vit.embeddings.patch_embeddings.projection.bias": self.patch.bias,
             "vit.layernorm.weight": self.ln.weight, "vit.layernorm.bias": self.ln.bias,
             "classifier.weight": self.head.weight, "classifier.bias": self.head.bias}
        names = {"q": "attention.attention.query", "k": "attention.attention.key",
                 "v": "attention.attention.value", "o": "attention.output.dense",
                 "ln1": "layernorm_before", "ln2": "layernorm_after",
                 "up": "intermediate.dense", "down": "output.dense"}
        for i, layer in enumerate(self.layers):
            for mine, hf in names.items():
                for p in ("weight", "bias"):
                    s[f"vit.encoder.layer.{i}.{hf}.{p}"] = getattr(getattr(layer, mine), p)
        return {k: v.detach().to(torch.float32).contiguous().numpy() for k, v in s.items()}


def make_config(m):
    """config.json as transformers' ViTConfig writes it for ViTForImageClassification."""
    id2label = {str(i): c for i, c in enumerate(shapes.CLASSES)}
    return {
        "architectures": ["ViTForImageClassification"],
        "attention_probs_dropout_prob": 0.0,
        "encoder_stride": m["patch_size"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0,
        "hidden_size": m["hidden_size"],
        "id2label": id2label,
        "image_size": m["image_size"],
        "initializer_range": 0.02,
        "intermediate_size": m["intermediate_size"],
        "label2id": {c: i for i, c in enumerate(shapes.CLASSES)},
        "layer_norm_eps": m["layer_norm_eps"],
        "model_type": "vit",
        "num_attention_heads": m["n_heads"],
        "num_channels": 3,
        "num_hidden_layers": m["n_layers"],
        "patch_size": m["patch_size"],
        "problem_type": "single_label_classification",
        "qkv_bias": True,
        "torch_dtype": "float32",
    }


def preprocessor_config(m):
    """preprocessor_config.json as ViTImageProcessor writes it."""
    return {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [MEAN] * 3,
        "image_processor_type": "ViTImageProcessor",
        "image_std": [STD] * 3,
        "resample": 2,
        "rescale_factor": 1 / 255,
        "size": {"height": m["image_size"], "width": m["image_size"]},
    }


def pixels(imgs):
    """uint8 [B, H, W, 3] -> float32 [B, 3, H, W] as the processor makes them (no resize: the
    images are drawn at the model's size)."""
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).to(torch.float32) * np.float32(1 / 255)
    return (x - MEAN) / STD


# ---- training ------------------------------------------------------------------------------------

def lr_at(step, r):
    if step < r["warmup"]:
        return r["lr"] * (step + 1) / r["warmup"]
    f = (step - r["warmup"]) / max(1, r["steps"] - r["warmup"])
    lo = r["lr"] * r["min_lr_frac"]
    return lo + (r["lr"] - lo) * 0.5 * (1 + math.cos(math.pi * f))


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def train(model, r, val):
    rng = np.random.Generator(np.random.PCG64(r["seed"]))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and n not in ("pos", "cls")]
    keep = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and
                                                           n not in ("pos", "cls"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": r["weight_decay"]},
                             {"params": keep, "weight_decay": 0.0}],
                            lr=r["lr"], betas=tuple(r["betas"]))
    log = {"recipe": r, "batch_loss": [], "batch_acc": [], "evals": []}
    t0, c0 = time.time(), time.process_time()
    vx, vy = pixels(val[0]), torch.from_numpy(val[2])
    pool_imgs, _, pool_labels = shapes.batch(rng, r["pool"])
    print(f"pool: {r['pool']} pictures ({time.time() - t0:.0f} s)", flush=True)
    order = np.empty(0, np.int64)

    def evaluate(step):
        model.eval()
        with torch.no_grad():
            z = model(vx)
        e = {"step": step, "val_loss": float(F.cross_entropy(z, vy)),
             "val_acc": float((z.argmax(-1) == vy).float().mean()),
             "elapsed_s": time.time() - t0, "cpu_s": time.process_time() - c0}
        log["evals"].append(e)
        print(json.dumps(e), flush=True)
        model.train()

    model.train()
    for step in range(r["steps"]):
        if step % r["eval_every"] == 0:
            evaluate(step)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, r)
        if order.size < r["batch"]:
            order = np.concatenate([order, rng.permutation(r["pool"])])
        pick, order = order[:r["batch"]], order[r["batch"]:]
        imgs, labels = pool_imgs[pick], pool_labels[pick]
        y = torch.from_numpy(labels)
        z = model(pixels(imgs))
        loss = F.cross_entropy(z, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()
        log["batch_loss"].append(round(float(loss), 5))
        log["batch_acc"].append(round(float((z.argmax(-1) == y).float().mean()), 4))
        if step % 50 == 49:
            print(f"step {step + 1}: loss {np.mean(log['batch_loss'][-50:]):.4f} acc "
                  f"{np.mean(log['batch_acc'][-50:]):.3f} ({time.time() - t0:.0f} s)", flush=True)
    evaluate(r["steps"])
    model.eval()
    log["train_seconds"], log["cpu_seconds"] = time.time() - t0, time.process_time() - c0
    log["machine"] = {"cpu": cpu_name(), "torch": torch.__version__,
                      "python": platform.python_version(), "numpy": np.__version__,
                      "threads": r["threads"], "loadavg": os.getloadavg()}
    return log


def write_json(path, obj, indent=2):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


EXAMPLES_SEED = 777  # the examples' images: never trained on


def write_examples(out):
    """One drawn image of each class as examples/<class>.png (with examples/<class>-mask.png),
    the first of each class drawn from EXAMPLES_SEED."""
    from PIL import Image
    d = os.path.join(out, "examples")
    os.makedirs(d, exist_ok=True)
    rng = np.random.Generator(np.random.PCG64(EXAMPLES_SEED))
    for label, name in enumerate(shapes.CLASSES):
        img, mask, _ = shapes.draw(rng, label)
        for suffix, arr in (("", img), ("-mask", (mask * 255).astype(np.uint8))):
            p = os.path.join(d, f"{name}{suffix}.png")
            Image.fromarray(arr).save(p + ".tmp.png")
            os.replace(p + ".tmp.png", p)


def parse_sets(ap, r, sets):
    r = dict(r)
    for s in sets:
        k, _, v = s.partition("=")
        if k not in r:
            ap.error(f"--set: no recipe entry {k!r}")
        r[k] = type(r[k])(v) if not isinstance(r[k], list) else json.loads(v)
    return r


def main():
    ap = argparse.ArgumentParser(description="train the shipped ViT shape classifier")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "assets", "models", NAME))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a recipe entry (for trials), e.g. steps=50")
    ap.add_argument("--card-only", action="store_true",
                    help="remeasure the card's figures and rewrite card.json and README.md")
    ap.add_argument("--no-card", action="store_true", help="train and save only")
    ap.add_argument("--attnviz", default=os.path.join(HERE, "..", "..", "build", "app",
                                                      "attnviz"),
                    help="the attnviz binary the card's figures are measured through")
    args = ap.parse_args()
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)
    t0, c0 = time.time(), time.process_time()
    r = parse_sets(ap, RECIPE, args.set)
    torch.set_num_threads(r["threads"])
    torch.use_deterministic_algorithms(True)
    if not args.card_only:
        val = shapes.batch(np.random.Generator(np.random.PCG64(r["seed"] + 1)),
                           r["eval_images"])
        torch.manual_seed(r["seed"])
        model = ViT(MODEL, len(shapes.CLASSES))
        log = train(model, r, val)
        import bytegpt  # the hand-written safetensors writer
        bytegpt.write_safetensors(os.path.join(out, "model.safetensors"), model.hf_state(),
                                  {"format": "pt", "recipe": "tools/train/train_vit.py"})
        write_json(os.path.join(out, "config.json"), make_config(MODEL))
        write_json(os.path.join(out, "preprocessor_config.json"), preprocessor_config(MODEL))
        write_examples(out)
        log.update({"model": MODEL, "classes": shapes.CLASSES,
                    "data": {"size": shapes.SIZE, "target": shapes.TARGET, "small": shapes.SMALL,
                             "clutter": shapes.CLUTTER, "bg": shapes.BG, "fg": shapes.FG,
                             "train_images": r["pool"], "seen": r["steps"] * r["batch"],
                             "val_images": r["eval_images"], "val_seed": r["seed"] + 1,
                             "heldout_seed": shapes.HELDOUT_SEED,
                             "examples_seed": EXAMPLES_SEED},
                    "params": sum(p.numel() for p in model.parameters())})
        log["total_seconds"] = time.time() - t0
        log["total_cpu_seconds"] = time.process_time() - c0
        write_json(os.path.join(out, "training_log.json"), log, indent=None)
    if args.no_card:
        return
    import vit_card
    vit_card.main_for(out, os.path.abspath(args.attnviz))
    print(f"done: {(time.time() - t0) / 60:.1f} min wall, "
          f"{(time.process_time() - c0) / 60:.1f} min CPU", flush=True)


if __name__ == "__main__":
    main()
