#!/usr/bin/python3
"""The measurements and the model card of shapes-vit, every figure taken through the attnviz
binary (not through the torch model that trained it):

  - accuracy: the card's held-out images (shapes.heldout: drawn from a seed never trained on),
    each written as a PNG and run as `attnviz model --model DIR --image IMG.png --weights W.npy
    --logits Z.npy`; the prediction is the largest logit;
  - where CLS looks: from the same W [L, H, T, T], the CLS row (query 0) of every layer and head;
    its share on the object is the weight on each patch times the share of that patch's pixels
    on the object's mask, summed (the attention spread evenly over each patch's pixels, as the
    overlay upsamples it, counted where the object is); "touching" counts the whole weight of
    every patch that holds at least one object pixel. Uniform attention (1/T on every token,
    CLS included) gives (N/T) * the mask's share of the image, and (touching patches)/T;
  - the rollout (per layer 0.5 * mean over heads + 0.5 * I, rows renormalised, multiplied up to
    the last layer, as `attnviz export --rollout` draws it), from the same W: its CLS row's share;
  - a patch's row: for query patches at least half on the object, the share of their row on the
    object (pixel share as above), against query patches with no object pixel;
  - the examples (examples/*.png, the presets' images): the same figures one image at a time.

Usage: vit_card.py --model DIR [--attnviz build/app/attnviz] [--images N]
  (rewrites DIR/card.json and DIR/README.md from DIR/training_log.json)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import shapes  # noqa: E402

IMAGES = 1000  # held-out images the card is measured on
ROW_MIN_COVER = 0.5  # a query patch "on the object": at least this share of its pixels


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])}...: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def through_attnviz(model_dir, attnviz, png, tmp, tag):
    w, z = os.path.join(tmp, tag + "_w.npy"), os.path.join(tmp, tag + "_z.npy")
    run([attnviz, "model", "--model", model_dir, "--image", png, "--weights", w, "--logits", z])
    W, Z = np.load(w).astype(np.float64), np.load(z).astype(np.float64)
    os.remove(w)
    os.remove(z)
    return W, Z


def rollout(W):
    """[L, H, T, T] -> the rollout to each layer [L, T, T] (attnviz's definition)."""
    L, _, T, _ = W.shape
    out, R = [], np.eye(T)
    for l in range(L):
        A = 0.5 * W[l].mean(0) + 0.5 * np.eye(T)
        A = A / A.sum(-1, keepdims=True)
        R = A @ R
        out.append(R)
    return np.stack(out)


def image_figures(W, Z, mask, patch):
    """The figures of one image from attnviz's weights and logits."""
    cover = shapes.patch_cover(mask, patch).reshape(-1)  # [N]
    touch = (cover > 0).astype(np.float64)
    T = W.shape[-1]
    lead = T - cover.size  # CLS
    cls = W[:, :, 0, lead:]  # [L, H, N]
    R = rollout(W)[:, 0, lead:]  # [L, N]
    on = np.nonzero(cover >= ROW_MIN_COVER)[0]
    off = np.nonzero(cover == 0)[0]
    rows = W[:, :, lead:, lead:]  # [L, H, N(query), N(key)]
    return {
        "pred": int(np.argmax(Z)),
        "cls_pixel": (cls @ cover).tolist(),  # [L][H]
        "cls_touch": (cls @ touch).tolist(),
        "rollout_pixel": (R @ cover).tolist(),  # [L]
        "uniform_pixel": float(cover.sum() / T),
        "uniform_touch": float(touch.sum() / T),
        "mask_share": float(mask.mean()),
        "object_patches": int((cover > 0).sum()),
        "row_on": (rows[:, :, on] @ cover).mean(-1).tolist() if on.size else None,  # [L][H]
        "row_off": (rows[:, :, off] @ cover).mean(-1).tolist() if off.size else None,
    }


def measure(model_dir, attnviz, n=IMAGES):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    patch = cfg["patch_size"]
    imgs, masks, labels = shapes.heldout(n)
    from PIL import Image
    with tempfile.TemporaryDirectory() as tmp:
        def one(i):
            png = os.path.join(tmp, f"{i:04d}.png")
            Image.fromarray(imgs[i]).save(png)
            W, Z = through_attnviz(model_dir, attnviz, png, tmp, f"{i:04d}")
            fig = image_figures(W, Z, masks[i], patch)
            fig["label"] = int(labels[i])
            return fig
        with ThreadPoolExecutor(3) as ex:
            per = list(ex.map(one, range(n)))
        examples = {}
        for c in shapes.CLASSES:
            png = os.path.join(model_dir, "examples", c + ".png")
            mask = np.asarray(Image.open(os.path.join(model_dir, "examples",
                                                      c + "-mask.png"))) > 0
            W, Z = through_attnviz(model_dir, attnviz, png, tmp, "ex_" + c)
            fig = image_figures(W, Z, mask, patch)
            fig["label"] = shapes.CLASSES.index(c)
            fig["probs"] = (np.exp(Z - Z.max()) / np.exp(Z - Z.max()).sum()).tolist()
            # the patch on the object the "one patch's row" preset shows: the most covered one
            # nearest the mask's centroid
            cover = shapes.patch_cover(mask, patch)
            ys, xs = np.nonzero(mask)
            cy, cx = ys.mean() / patch - 0.5, xs.mean() / patch - 0.5
            g = cover.shape[0]
            best = max(((cover[r, q], -((r - cy) ** 2 + (q - cx) ** 2), r, q)
                        for r in range(g) for q in range(g)))
            fig["object_patch"] = [int(best[2]), int(best[3])]
            fig["object_patch_token"] = 1 + int(best[2]) * g + int(best[3])
            fig["object_patch_cover"] = float(best[0])
            examples[c] = fig
    L, H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    acc = float(np.mean([p["pred"] == p["label"] for p in per]))
    per_class = {c: float(np.mean([p["pred"] == p["label"] for p in per if p["label"] == k]))
                 for k, c in enumerate(shapes.CLASSES)}
    confusion = [[sum(1 for p in per if p["label"] == a and p["pred"] == b)
                  for b in range(len(shapes.CLASSES))] for a in range(len(shapes.CLASSES))]
    cls_pixel = np.mean([p["cls_pixel"] for p in per], 0)  # [L, H]
    cls_touch = np.mean([p["cls_touch"] for p in per], 0)
    rows_on = np.mean([p["row_on"] for p in per if p["row_on"] is not None], 0)
    rows_off = np.mean([p["row_off"] for p in per if p["row_off"] is not None], 0)
    last = L - 1
    bh = int(np.argmax(cls_pixel[last]))
    return {
        "attnviz": "attnviz model --model DIR --image IMG.png --weights W.npy --logits Z.npy",
        "heldout_seed": shapes.HELDOUT_SEED, "images": n, "patch": patch,
        "layers": L, "heads": H,
        "accuracy": acc, "correct": int(sum(p["pred"] == p["label"] for p in per)),
        "per_class_accuracy": per_class, "confusion": confusion,
        "cls_pixel_share": cls_pixel.tolist(), "cls_touch_share": cls_touch.tolist(),
        "last_layer": {"head_mean_pixel": float(cls_pixel[last].mean()),
                       "head_mean_touch": float(cls_touch[last].mean()),
                       "best_head": bh, "best_head_pixel": float(cls_pixel[last, bh]),
                       "best_head_touch": float(cls_touch[last, bh])},
        "uniform_pixel": float(np.mean([p["uniform_pixel"] for p in per])),
        "uniform_touch": float(np.mean([p["uniform_touch"] for p in per])),
        "mask_share": float(np.mean([p["mask_share"] for p in per])),
        "object_patches": float(np.mean([p["object_patches"] for p in per])),
        "rollout_pixel": np.mean([p["rollout_pixel"] for p in per], 0).tolist(),
        "row_on_pixel": rows_on.tolist(), "row_off_pixel": rows_off.tolist(),
        "row_min_cover": ROW_MIN_COVER,
        "examples": examples,
        "per_image": [{"label": p["label"], "pred": p["pred"],
                       "cls_pixel_last": [round(v, 6) for v in p["cls_pixel"][last]],
                       "uniform_pixel": round(p["uniform_pixel"], 6)} for p in per],
    }


def table(t, fmt="{:.3f}"):
    t = np.asarray(t)
    head = "| layer | " + " | ".join(f"head {h}" for h in range(t.shape[1])) + " | mean |"
    rows = [head, "|" + "---|" * (t.shape[1] + 2)]
    for l in range(t.shape[0]):
        rows.append(f"| {l} | " + " | ".join(fmt.format(v) for v in t[l]) +
                    f" | {fmt.format(t[l].mean())} |")
    return "\n".join(rows)


def write(out, log, s):
    name = os.path.basename(os.path.normpath(out))
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    r, m, d = log["recipe"], log["model"], log["data"]
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    last = s["last_layer"]
    L = s["layers"]
    g = cfg["image_size"] // cfg["patch_size"]
    final = log["evals"][-1]
    cp = np.asarray(s["cls_pixel_share"])
    tl, th = np.unravel_index(int(np.argmax(cp)), cp.shape)
    top = (int(tl), int(th), float(cp[tl, th]))
    ex_rows = []
    for c, e in s["examples"].items():
        ex_rows.append(
            f"| `examples/{c}.png` | {c} | {shapes.CLASSES[e['pred']]} "
            f"({max(e['probs']):.3f}) | {e['mask_share']:.3f} | "
            f"{np.mean(e['cls_pixel'][L - 1]):.3f} | {e['cls_pixel'][L - 1][last['best_head']]:.3f} "
            f"| {e['rollout_pixel'][L - 1]:.3f} | {e['object_patch'][0]},{e['object_patch'][1]} "
            f"(token {e['object_patch_token']}) |")
    confusion = "\n".join(
        f"| {c} | " + " | ".join(str(v) for v in s["confusion"][k]) + " |"
        for k, c in enumerate(shapes.CLASSES))
    text = f"""# {name}: a small ViT trained by the attnviz project

A small image classifier in the ViT layout (Hugging Face `ViTForImageClassification`,
`model_type` "vit"), trained from scratch on the CPU by `tools/train/train_vit.py`
({log['train_seconds'] / 60:.1f} minutes of wall time, one thread of a shared machine) on
pictures the script draws itself: one large shape among clutter, labelled by the shape's kind.
Since the drawing knows which pixels are the object, what the classifier attends to can be scored:
the card gives the share of the CLS token's attention that falls on the object, measured through
`attnviz model`. So attnviz ships an image model whose attention maps have a ground truth.

**Terms:** the images are drawn by the script; the weights are the attnviz project's, under the
MIT licence (the repository's `LICENSE`).

## Files
- `config.json`: HF `ViTConfig`: {m['n_layers']} layers, hidden_size {m['hidden_size']},
  intermediate_size {m['intermediate_size']} (exact GELU), {m['n_heads']} heads of
  {m['hidden_size'] // m['n_heads']}, image_size {m['image_size']}, patch_size {m['patch_size']}
  ({g} x {g} = {g * g} patches and CLS: {g * g + 1} tokens), layer_norm_eps {m['layer_norm_eps']},
  `id2label` {{{", ".join(f'{i}: "{c}"' for i, c in enumerate(shapes.CLASSES))}}}.
- `model.safetensors`: F32, {size / 1e6:.2f} MB, {log['params']:,} parameters, the HF key names
  (`vit.embeddings.*`, `vit.encoder.layer.N.*`, `vit.layernorm.*`, `classifier.*`).
- `preprocessor_config.json`: as `ViTImageProcessor` writes it: resize to {m['image_size']} x
  {m['image_size']} (bilinear), rescale by 1/255, normalise with mean 0.5 and std 0.5. The
  images are drawn at {m['image_size']} x {m['image_size']}, so the resize keeps them as they are.
- `examples/`: one drawn image of each class ({", ".join(f"`{c}.png`" for c in shapes.CLASSES)}),
  never trained on, and its object's mask (`*-mask.png`, white on the object); the presets open
  them.
- `training_log.json` (every batch loss and accuracy, the evaluations, the recipe, timings),
  `card.json` (everything below, per held-out image too).

## The pictures
`tools/train/shapes.py` draws each {shapes.SIZE} x {shapes.SIZE} picture from a numpy PCG64
generator: a dark background of one random colour (each channel in {d['bg'][0]}-{d['bg'][1] - 1})
with faint noise; {d['clutter'][0]}-{d['clutter'][1]} clutter items (thin line segments, dots, and
small filled circles, squares, triangles and crosses {d['small'][0]}-{d['small'][1]} pixels across,
each of any random colour); the target, one filled shape of the class's kind
{d['target'][0]}-{d['target'][1]} pixels across (triangles point up, down, left or right; a cross's
arms are 25-40% of its size thick), of a light random colour (each channel in
{d['fg'][0]}-{d['fg'][1] - 1}); then 0-2 thin lines of any colour over everything. The mask is the
target's pixels that no later line covers. Small shapes of every kind, light ones among them, are
in the clutter, so the classifier has to find the large light shape and read its outline. (A
first trial with the target's colour as random as the background's stayed at chance for 200
steps: the light-on-dark contrast is what lets a ViT this small learn the task in minutes.)
The object covers {s['mask_share']:.1%} of a picture on average and touches
{s['object_patches']:.1f} of its {g * g} patches.

## Recipe
A pool of {d['train_images']:,} pictures drawn once (seed {r['seed']}), visited in a new random
order each epoch, {r['batch']} a batch, {r['steps']} steps ({d['seen']:,} pictures seen, about
{d['seen'] / d['train_images']:.1f} epochs), cross entropy on the CLS token's logits,
AdamW (betas {r['betas'][0]}, {r['betas'][1]}; weight decay {r['weight_decay']} on the matrices
and the patch convolution, none on biases, LayerNorms, CLS and positions), learning rate
{r['lr']} after {r['warmup']} warm-up steps, cosine decay to {r['lr'] * r['min_lr_frac']:.2g},
gradient clipping {r['grad_clip']}, no dropout, no augmentation; transformers' ViT init
(truncated normal 0.02). Validation: {r['eval_images']} pictures drawn from seed {d['val_seed']}
(accuracy {final['val_acc']:.3f} at the end; these pictures steer nothing). Trained with torch
{log['machine']['torch']} on one thread of an {log['machine']['cpu']} shared with other jobs:
{log['train_seconds'] / 60:.1f} minutes wall, {log['cpu_seconds'] / 60:.1f} CPU (the wall time is long because
the machine's two cores were shared: load average {log['machine']['loadavg'][0]:.0f} at the end; the CPU time is
what the run needs). Meant to be deterministic (seeded init and pictures, one thread,
deterministic algorithms): two 15-step runs of the same loop gave identical weights, and the
examples redrawn are byte for byte the same; a second full run to compare model.safetensors has
not been made.

    /usr/bin/python3 tools/train/train_vit.py --out assets/models/{name} --attnviz build/app/attnviz

Regenerate this card without training:

    /usr/bin/python3 tools/train/vit_card.py --model assets/models/{name} --attnviz build/app/attnviz

## Held-out accuracy, through `attnviz model`
{s['images']} pictures drawn from seed {s['heldout_seed']} (never trained on), each written as a
PNG and run as `attnviz model --model assets/models/{name} --image IMG.png --weights W.npy
--logits Z.npy`: **{s['correct']} of {s['images']} right, accuracy {s['accuracy']:.3f}** (chance
0.25). Per class: {", ".join(f"{c} {v:.3f}" for c, v in s['per_class_accuracy'].items())}.

| label \\ predicted | {" | ".join(shapes.CLASSES)} |
|---|{"---|" * len(shapes.CLASSES)}
{confusion}

## Where the classifier looks, through `attnviz model --weights`
From the same runs' weights: the CLS token's row (query 0) in each layer and head. **Share on the
object** = the weight on each patch times the share of that patch's pixels on the object's mask,
summed (each patch's weight spread evenly over its pixels, then counted where the object is).
Uniform attention (1/{g * g + 1} on every token) would put **{s['uniform_pixel']:.3f}** there.

- **Last layer ({L - 1}), heads averaged: {last['head_mean_pixel']:.3f}** of CLS's attention
  lies on the object, {last['head_mean_pixel'] / s['uniform_pixel']:.1f} times uniform.
- **Best head of the last layer ({L - 1}:{last['best_head']}): {last['best_head_pixel']:.3f}**.
- The strongest head of any layer: **{top[0]}:{top[1]}, {top[2]:.3f}** ({top[2] / s['uniform_pixel']:.1f}
  times uniform).
- Counting every patch that holds any object pixel whole ("touching"): heads averaged
  {last['head_mean_touch']:.3f}, head {last['best_head']} {last['best_head_touch']:.3f}; uniform
  {s['uniform_touch']:.3f}.
- **Rollout** to the last layer (heads averaged, + I; what `--rollout` draws): CLS's row puts
  {s['rollout_pixel'][L - 1]:.3f} on the object (per layer: {", ".join(f"{v:.3f}" for v in s['rollout_pixel'])}).

Share on the object of the CLS row, per layer and head (mean over the {s['images']} pictures):

{table(s['cls_pixel_share'])}

## A patch's row
Query patches with at least {s['row_min_cover']:.0%} of their pixels on the object: the share of
their row on the object (as above), against query patches with no object pixel:

On-object queries:

{table(s['row_on_pixel'])}

Off-object queries:

{table(s['row_off_pixel'])}

## The examples (the presets' pictures)
Each through `attnviz model --image examples/NAME.png --weights --logits`: the prediction, the
mask's share of the picture, the last layer's CLS share on the object (heads averaged and head
{last['best_head']}), the rollout's, and the on-object patch the "one patch's row" preset picks
(most covered, nearest the object's centre).

| image | label | predicted (p) | mask | CLS share, mean | head {last['best_head']} | rollout | patch (row,col) |
|---|---|---|---|---|---|---|---|
{chr(10).join(ex_rows)}
"""
    tmp = os.path.join(out, "README.md.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(out, "README.md"))


def write_json(path, obj, indent=1):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent)
        f.write("\n")
    os.replace(tmp, path)


def main_for(out, attnviz, n=IMAGES):
    with open(os.path.join(out, "training_log.json"), encoding="utf-8") as f:
        log = json.load(f)
    s = measure(out, attnviz, n)
    write_json(os.path.join(out, "card.json"), s)
    write(out, log, s)
    return s


def main():
    ap = argparse.ArgumentParser(description="measure shapes-vit through attnviz, write its card")
    ap.add_argument("--model", default=os.path.join(HERE, "..", "..", "assets", "models",
                                                    "shapes-vit"))
    ap.add_argument("--attnviz", default=os.path.join(HERE, "..", "..", "build", "app",
                                                      "attnviz"))
    ap.add_argument("--images", type=int, default=IMAGES)
    ap.add_argument("--readme-only", action="store_true",
                    help="rewrite README.md from card.json, measuring nothing")
    args = ap.parse_args()
    out = os.path.normpath(args.model)
    if args.readme_only:
        with open(os.path.join(out, "training_log.json"), encoding="utf-8") as f:
            log = json.load(f)
        with open(os.path.join(out, "card.json"), encoding="utf-8") as f:
            s = json.load(f)
        write(out, log, s)
    else:
        s = main_for(out, os.path.abspath(args.attnviz), args.images)
    last = s["last_layer"]
    print(f"accuracy {s['accuracy']:.3f} ({s['correct']}/{s['images']}); last-layer CLS on the "
          f"object: mean {last['head_mean_pixel']:.3f}, head {last['best_head']} "
          f"{last['best_head_pixel']:.3f}, uniform {s['uniform_pixel']:.3f}")


if __name__ == "__main__":
    main()
