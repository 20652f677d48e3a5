"""Procedurally drawn images for shapes-vit: one large target shape among clutter, labelled by the
target's kind, with the target's pixel mask known.

Each image is SIZE x SIZE RGB, drawn with PIL from a numpy Generator (so a seed gives the same
pixels on every run):
  - a dark background of one random colour (each channel in BG) with faint per-pixel noise;
  - CLUTTER items: thin line segments, dots, and small filled shapes of every kind (4-8 pixels
    across), each of any random colour, anywhere;
  - the target: one filled shape of the class's kind, 16-26 pixels across, of a light random
    colour (each channel in FG), anywhere it fits;
  - 0-2 thin lines drawn over everything (they may cross the target).
The mask is the target's pixels that are still the target's after the last lines (bool, H x W).
Small shapes of every kind, some of them light too, are in the clutter, so the classifier has to
find the large light shape and read its outline. (With the target's colour as random as the
background's, a first trial stayed at chance for 200 steps: the light-on-dark contrast is what
lets a ViT this small learn the task in minutes.)

Held-out sets are drawn from seeds never used in training (train_vit.py: the training batches
come from the recipe's seed, the validation set from seed + 1, the card's held-out set from
HELDOUT_SEED).
"""
import numpy as np
from PIL import Image, ImageDraw

CLASSES = ["circle", "square", "triangle", "cross"]
SIZE = 64
TARGET = (16, 26)  # the target's size in pixels, inclusive
SMALL = (4, 8)  # a clutter shape's size
CLUTTER = (6, 12)  # how many clutter items
BG = (0, 90)  # the background's R, G, B are drawn from [BG[0], BG[1])
FG = (150, 256)  # the target's (clutter colours are drawn from all of 0-255)
HELDOUT_SEED = 20250  # the card's held-out images (never trained on, never used for choices)


def _colour(rng):
    return tuple(int(v) for v in rng.integers(0, 256, 3))


def _light_colour(rng):
    return tuple(int(v) for v in rng.integers(FG[0], FG[1], 3))


def _shape(draw, kind, cx, cy, s, fill, rng):
    """A filled shape of `kind`, s pixels across, centred at (cx, cy)."""
    r = s / 2
    if kind == "circle":
        draw.ellipse([cx - r, cy - r, cx + r - 1, cy + r - 1], fill=fill)
    elif kind == "square":
        draw.rectangle([cx - r, cy - r, cx + r - 1, cy + r - 1], fill=fill)
    elif kind == "triangle":
        # an isosceles triangle pointing up, down, left or right
        d = int(rng.integers(0, 4))
        pts = [(cx, cy - r), (cx + r - 1, cy + r - 1), (cx - r, cy + r - 1)]
        if d == 1:
            pts = [(cx, cy + r - 1), (cx + r - 1, cy - r), (cx - r, cy - r)]
        elif d == 2:
            pts = [(cx - r, cy), (cx + r - 1, cy - r), (cx + r - 1, cy + r - 1)]
        elif d == 3:
            pts = [(cx + r - 1, cy), (cx - r, cy - r), (cx - r, cy + r - 1)]
        draw.polygon(pts, fill=fill)
    elif kind == "cross":
        w = max(1.0, s * float(rng.uniform(0.25, 0.4))) / 2
        draw.rectangle([cx - w, cy - r, cx + w - 1, cy + r - 1], fill=fill)
        draw.rectangle([cx - r, cy - w, cx + r - 1, cy + w - 1], fill=fill)
    else:
        raise ValueError(kind)


def _line(draw, rng, fill):
    x0, y0 = rng.integers(0, SIZE, 2)
    ang = rng.uniform(0, 2 * np.pi)
    ln = rng.uniform(6, 30)
    x1, y1 = x0 + ln * np.cos(ang), y0 + ln * np.sin(ang)
    draw.line([(int(x0), int(y0)), (int(x1), int(y1))], fill=fill, width=int(rng.integers(1, 3)))


def draw(rng, label=None):
    """-> (uint8 [SIZE, SIZE, 3], bool mask [SIZE, SIZE], label). label None: a random class."""
    if label is None:
        label = int(rng.integers(0, len(CLASSES)))
    bg = tuple(int(v) for v in rng.integers(BG[0], BG[1], 3))
    noise = rng.integers(-12, 13, (SIZE, SIZE, 3))
    base = np.clip(np.array(bg, dtype=np.int64)[None, None, :] + noise, 0, 255).astype(np.uint8)
    img = Image.fromarray(base, "RGB")
    d = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(CLUTTER[0], CLUTTER[1] + 1))):
        kind = int(rng.integers(0, 3))
        c = _colour(rng)
        if kind == 0:
            _line(d, rng, c)
        elif kind == 1:
            x, y = rng.integers(0, SIZE, 2)
            rr = int(rng.integers(1, 3))
            d.ellipse([int(x) - rr, int(y) - rr, int(x) + rr, int(y) + rr], fill=c)
        else:
            s = int(rng.integers(SMALL[0], SMALL[1] + 1))
            x, y = rng.integers(s // 2, SIZE - s // 2, 2)
            _shape(d, CLASSES[int(rng.integers(0, len(CLASSES)))], int(x), int(y), s, c, rng)
    s = int(rng.integers(TARGET[0], TARGET[1] + 1))
    cx, cy = (int(v) for v in rng.integers(s // 2, SIZE - s // 2 + 1, 2))
    fill = _light_colour(rng)
    # the target on the picture and, the same geometry, on the mask (the same rng draws: the
    # triangle's direction and the cross's arm width are drawn once and reused)
    state = rng.bit_generator.state
    _shape(d, CLASSES[label], cx, cy, s, fill, rng)
    m = Image.new("L", (SIZE, SIZE), 0)
    rng.bit_generator.state = state
    _shape(ImageDraw.Draw(m), CLASSES[label], cx, cy, s, 255, rng)
    over = Image.new("L", (SIZE, SIZE), 0)
    do = ImageDraw.Draw(over)
    for _ in range(int(rng.integers(0, 3))):
        c = _colour(rng)
        st = rng.bit_generator.state
        _line(d, rng, c)
        rng.bit_generator.state = st
        _line(do, rng, 255)
    mask = (np.asarray(m) > 0) & (np.asarray(over) == 0)
    return np.asarray(img).copy(), mask, label


def batch(rng, n):
    """n images -> (uint8 [n, SIZE, SIZE, 3], bool [n, SIZE, SIZE], int64 [n])."""
    imgs = np.empty((n, SIZE, SIZE, 3), np.uint8)
    masks = np.empty((n, SIZE, SIZE), bool)
    labels = np.empty(n, np.int64)
    for i in range(n):
        imgs[i], masks[i], labels[i] = draw(rng)
    return imgs, masks, labels


def heldout(n, seed=HELDOUT_SEED):
    """The card's held-out images: the first n of the set drawn from `seed`."""
    return batch(np.random.Generator(np.random.PCG64(seed)), n)


def patch_cover(mask, patch):
    """The share of each patch's pixels on the mask, [grid, grid] row-major."""
    g = mask.shape[0] // patch
    return mask[:g * patch, :g * patch].reshape(g, patch, g, patch).mean(axis=(1, 3))
