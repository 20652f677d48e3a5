#!/usr/bin/python3
"""The measurements and the model card of kjv-wp-bert, every figure taken through the attnviz
binary (not through the torch model that trained it):

  - the tokenizer: every held-out verse, every 20th training verse and check_tokenizer_json.py's
    odd texts, encoded by `attnviz tokenize` and by the npm package @huggingface/tokenizers on
    tokenizer.json (encode_tokenizer_json.mjs); the ids must be identical;
  - fill accuracy: every 4th held-out verse as [CLS] verse [SEP], 15% of its pieces (at least
    one; seeded) replaced by [MASK], `attnviz fill --ids ... --top-k 5`; top-1 and top-5 over
    all masked pieces;
  - head shares: PAIRS pairs of consecutive held-out verses (evenly spaced; where a pair is longer than the
    model's positions, the next one), `attnviz model --text A
    --text-pair B --weights W.npy`; for each layer and head the mean over rows (queries) of the
    weight on the [SEP] keys, on [CLS], on the key before (i - 1), after (i + 1), on itself,
    and on every key after the row (j > i); each pair's mean, then the mean over pairs;
  - the two presets' texts (assets/scenes/30-*, 31-*), single verses, the same shares.

Usage: bert_card.py --model DIR [--attnviz build/app/attnviz] [--tokjs .cache/npm]
  (rewrites DIR/head_scores.json and DIR/README.md from DIR/training_log.json)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kjv  # noqa: E402
import wp_tokenizer as wp  # noqa: E402

PAIRS = 64
FILL_EVERY = 4
FILL_SEED = 77
SHARES = ("sep", "cls", "prev", "next", "self", "after")
# The presets' texts: held-out verses (Hebrews 11:1 and 1 John 4:16).
PRESET_TEXTS = {
    "bidirectional": "Now faith is the substance of things hoped for, the evidence of things "
                     "not seen.",
    "sep": "And we have known and believed the love that God hath to us. God is love; and he that "
           "dwelleth in love dwelleth in God, and God in him.",
}
# Fill on single sentences, shown on the card: King James phrasing (the first two held out) and
# plain modern English, which the model never saw.
FILL_EXAMPLES = ["For God is [MASK].",
                 "Grace be with you all. [MASK].",
                 "And the [MASK] of the LORD came unto me, saying,",
                 "The king sat upon his [MASK].",
                 "She opened the [MASK] and walked into the house.",
                 "We will go to the [MASK] tomorrow morning."]
# The model this recipe replaced (8 heads of 16, weight decay 0.01, 1500 steps of a 2400-step
# schedule), measured the same way through the binary; kept so the card can say what the new
# recipe changed. Its layer 1 had sharp previous-, next- and same-token heads (about 0.5 each)
# but no head put more than 0.067 on [SEP] or 0.047 on [CLS].
EARLIER = {"steps": 1500, "heads": 8, "weight_decay": 0.01, "heldout_loss": 3.9999,
           "fill_top1": 0.262, "fill_top5": 0.445, "sep": [3, 1, 0.067], "cls": 0.047}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])}...: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def check_tokenizer(out, attnviz, tokjs):
    import check_tokenizer_json as ctj
    train, heldout = kjv.splits()
    # (a NUL cannot travel in a command line argument: those texts are left out)
    texts = [t for t in heldout.splitlines() + train.splitlines()[::20] + ctj.EXTRA
             if "\0" not in t]
    with tempfile.TemporaryDirectory() as tmp:
        tp, op = os.path.join(tmp, "texts.json"), os.path.join(tmp, "ids.json")
        with open(tp, "w", encoding="utf-8") as f:
            json.dump(texts, f, ensure_ascii=False)
        subprocess.run(["node", os.path.join(HERE, "encode_tokenizer_json.mjs"), tokjs, out, tp,
                        op], check=True)
        with open(op, encoding="utf-8") as f:
            got = json.load(f)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as ex:
        ours = list(ex.map(lambda t: [int(x) for x in run(
            [attnviz, "tokenize", "--model", out, "--text", t]).split()], texts))
    mism = [{"text": t, "attnviz": mine, "tokenizers_js": js}
            for t, mine, js in zip(texts, ours, got["ids"]) if mine != js]
    return {"package": f"@huggingface/tokenizers@{got['version']}", "texts": len(texts),
            "tokens": sum(len(x) for x in got["ids"]), "mismatches": len(mism),
            "examples": mism[:5]}


def fill_items(tok):
    heldout = kjv.splits()[1].splitlines()
    rng = np.random.Generator(np.random.PCG64(FILL_SEED))
    items = []
    for v in heldout[::FILL_EVERY]:
        ids = tok.single(v)
        cand = np.arange(1, len(ids) - 1)
        k = max(1, int(round(0.15 * len(cand))))
        pos = sorted(int(p) for p in rng.choice(cand, size=k, replace=False))
        items.append({"text": v, "ids": ids, "positions": pos})
    return items


def fill(out, attnviz, items):
    from concurrent.futures import ThreadPoolExecutor

    def one(it):
        ids = list(it["ids"])
        for p in it["positions"]:
            ids[p] = wp.MASK
        return run([attnviz, "fill", "--model", out, "--ids", ",".join(map(str, ids)),
                    "--top-k", "5"]).splitlines()
    with ThreadPoolExecutor(4) as ex:
        outputs = list(ex.map(one, items))
    n = top1 = top5 = 0
    for it, lines in zip(items, outputs):
        got = {}
        for line in lines:
            p, i = line.split("\t")[:2]
            got.setdefault(int(p), []).append(int(i))
        for p in it["positions"]:
            want = it["ids"][p]
            n += 1
            top1 += got[p][0] == want
            top5 += want in got[p][:5]
    return {"masked": n, "verses": len(items), "top1": top1 / n, "top5": top5 / n}


def weights(out, attnviz, text, pair=None):
    with tempfile.TemporaryDirectory() as tmp:
        w = os.path.join(tmp, "W.npy")
        cmd = [attnviz, "model", "--model", out, "--text", text, "--weights", w]
        if pair is not None:
            cmd += ["--text-pair", pair]
        run(cmd)
        return np.load(w).astype(np.float64)


def shares(A, ids):
    """A [L, H, T, T], ids -> {name: [L, H]} means over the rows."""
    T = A.shape[-1]
    sep = [j for j, t in enumerate(ids) if t == wp.SEP]
    i = np.arange(T)
    after = np.triu(np.ones((T, T)), 1)
    return {"sep": A[..., sep].sum(-1).mean(-1),
            "cls": A[..., 0].mean(-1),
            "prev": A[..., i[1:], i[1:] - 1].mean(-1),
            "next": A[..., i[:-1], i[:-1] + 1].mean(-1),
            "self": A[..., i, i].mean(-1),
            "after": (A * after).sum(-1).mean(-1)}


def best(table):
    t = np.array(table)
    l, h = np.unravel_index(np.argmax(t), t.shape)
    return [int(l), int(h), float(t[l, h])]


def measure(out, attnviz, tokjs, tokenizer_check=None):
    vocab = open(os.path.join(out, "vocab.txt"), encoding="utf-8").read().split("\n")[:-1]
    tok = wp.WordPiece(vocab)
    s = {"measured_with": "the attnviz binary (tools/train/bert_card.py)"}
    s["tokenizer_check"] = tokenizer_check or check_tokenizer(out, attnviz, tokjs)
    print(f"tokenizer: {s['tokenizer_check']['mismatches']} mismatches in "
          f"{s['tokenizer_check']['texts']} texts", flush=True)
    items = fill_items(tok)
    s["fill"] = dict(fill(out, attnviz, items), every=FILL_EVERY, seed=FILL_SEED, items=items)
    print(f"fill: top-1 {s['fill']['top1']:.3f}, top-5 {s['fill']['top5']:.3f} over "
          f"{s['fill']['masked']} masked pieces", flush=True)
    heldout = kjv.splits()[1].splitlines()
    step = (len(heldout) - 1) // PAIRS
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        max_len = json.load(f)["max_position_embeddings"]
    acc = {k: [] for k in SHARES}
    pairs = []
    for k in range(PAIRS):
        i = k * step
        while True:  # the first pair from here that fits the model's positions
            a, b = heldout[i], heldout[i + 1]
            ids = [wp.CLS] + tok.encode(a) + [wp.SEP] + tok.encode(b) + [wp.SEP]
            if len(ids) <= max_len:
                break
            i += 1
        A = weights(out, attnviz, a, b)
        if A.shape[-1] != len(ids):
            raise SystemExit(f"pair {k}: attnviz ran {A.shape[-1]} tokens, expected {len(ids)}")
        for name, v in shares(A, ids).items():
            acc[name].append(v)
        pairs.append({"a": a, "b": b, "ids": ids})
    tab = {k: np.mean(v, axis=0) for k, v in acc.items()}
    s["pairs"] = {"count": PAIRS, "texts": pairs,
                  "first_pair": {k: v[0].tolist() for k, v in acc.items()}}
    s["shares"] = {k: v.tolist() for k, v in tab.items()}
    s["best"] = {k: best(v) for k, v in tab.items()}
    print(json.dumps(s["best"]), flush=True)
    s["fill_examples"] = []
    for text in FILL_EXAMPLES:
        lines = run([attnviz, "fill", "--model", out, "--text", text, "--top-k", "5"])
        s["fill_examples"].append({"text": text, "top": [
            [ln.split("\t")[3], float(ln.split("\t")[2])] for ln in lines.splitlines()]})
    s["presets"] = {}
    for name, text in PRESET_TEXTS.items():
        ids = tok.single(text)
        A = weights(out, attnviz, text)
        sh = shares(A, ids)
        s["presets"][name] = {"text": text, "ids": ids,
                              "shares": {k: v.tolist() for k, v in sh.items()},
                              "best": {k: best(v) for k, v in sh.items()}}
    return s


# ---- the card ------------------------------------------------------------------------------

def table(t, fmt="{:.3f}"):
    t = np.array(t)
    L, H = t.shape
    rows = ["| layer | " + " | ".join(f"head {h}" for h in range(H)) + " |",
            "|---|" + "---|" * H]
    for l in range(L):
        rows.append(f"| {l} | " + " | ".join(fmt.format(x) for x in t[l]) + " |")
    return "\n".join(rows)


def heads_prose(s, r):
    b = s["best"]
    top = max(b[k][2] for k in ("sep", "next", "prev", "cls", "self"))
    sep = s["shares"]["sep"]
    over = sum(x >= 0.3 for row in sep for x in row)
    first = (f"This recipe replaced a {EARLIER['steps']}-step run of {EARLIER['heads']} heads "
             f"a layer and weight decay {EARLIER['weight_decay']},\nwhich had formed no sink (its "
             f"best [SEP] head, layer {EARLIER['sep'][0]} head {EARLIER['sep'][1]}, put "
             f"{EARLIER['sep'][2]:.3f} there, its best\n[CLS] head {EARLIER['cls']:.3f}; fill top-5 "
             f"{EARLIER['fill_top5']:.3f}; held-out loss {EARLIER['heldout_loss']:.2f}).\n")
    if 0.1 <= b["sep"][2] < 0.3 <= top:
        ps = s["presets"]["sep"]
        return first + f"""After {r.get('stop') or r['steps']} steps its positional heads are sharp: layer {b['next'][0]} head
{b['next'][1]} puts {b['next'][2]:.3f} on the next key, layer {b['prev'][0]} head {b['prev'][1]} {b['prev'][2]:.3f} on the previous one and
layer {b['self'][0]} head {b['self'][1]} {b['self'][2]:.3f} on itself (Clark et al. 2019 found BERT-base heads
that put most of their attention on the previous or the next token). It has one head that parks weight on [SEP],
weaker than BERT-base's: layer {b['sep'][0]} head {b['sep'][1]} puts {b['sep'][2]:.3f} of a row's weight on the
two [SEP] keys of a pair, most of it from the rows in the later part of a verse (on preset 31's verse alone, {len(ps['ids'])} tokens, it puts {ps['shares']['sep'][b['sep'][0]][b['sep'][1]]:.3f} of each
row there); {over} of the {len(sep) * len(sep[0])} heads put 0.3 or more on [SEP] over the pairs, and the best [CLS] head
{b['cls'][2]:.3f}."""
    if b["sep"][2] < 0.3 <= top:
        cls_up = max(max(row) for row in s["shares"]["cls"][1:])
        return first + f"""After {r.get('stop') or r['steps']} steps its positional heads are sharp: layer {b['next'][0]} head
{b['next'][1]} puts {b['next'][2]:.3f} on the next key, layer {b['prev'][0]} head {b['prev'][1]} {b['prev'][2]:.3f} on the previous one and
layer {b['self'][0]} head {b['self'][1]} {b['self'][2]:.3f} on itself (Clark et al. 2019 found BERT-base heads
that put most of their attention on the previous or the next token). But it has formed no sink on the special tokens: no
head puts more than {b['sep'][2]:.3f} on the two [SEP] keys or {b['cls'][2]:.3f} on [CLS], and from
layer 1 up no head puts more than {cls_up:.3f} on [CLS]; where BERT-base's middle layers park
half or more of a row on [SEP], this model's heads look at neighbours. {over} of the
{len(sep) * len(sep[0])} heads put 0.3 or more on [SEP]."""
    if top >= 0.5:
        return first + f"""After {r.get('stop') or r['steps']} steps the strongest head puts
{top:.2f} of its weight on one kind of key below; BERT-base has heads above 0.5 (Clark et al.
2019). {over} of the {len(sep) * len(sep[0])} heads put 0.3 or more on [SEP]."""
    return first + f"""After {r.get('stop') or r['steps']} steps no head puts more than {top:.2f} of its weight on one kind of key
below, where BERT-base has heads above 0.5 (Clark et al. 2019): this model is small and
briefly trained, and what is named here are the strongest of each kind, not BERT-base's sharp
heads. {over} of the {len(sep) * len(sep[0])} heads put 0.3 or more on [SEP]."""


def sep_prose(s):
    v = s["best"]["sep"][2]
    head = ("Clark et al. 2019 found BERT-base's middle-layer heads parking most of their\n"
            "  attention on [SEP] and argued it acts as a no-op; ")
    if v >= 0.5:
        return head + "this head parks more than half of it there, as those do."
    if v >= 0.3:
        return head + (f"this head parks a third or more there, but below\n  BERT-base's 0.5 "
                       f"and more ({v:.2f}).")
    if v >= 0.1:
        return head + (f"this model's head is weaker ({v:.2f} over\n  the pairs) and in layer "
                       f"{s['best']['sep'][0]}, where BERT-base's are in the middle layers.")
    return head + f"this model has not formed such a sink ({v:.2f} < 0.5)."


def fill_examples(s):
    rows = ["| text | top 5 (probability) |", "|---|---|"]
    for e in s["fill_examples"]:
        guesses = ", ".join(f"`{p.strip()}` {q:.3f}" for p, q in e["top"])
        rows.append(f"| {e['text']} | {guesses} |")
    return "\n".join(rows)


def schedule(r):
    ran = r.get("stop") or r["steps"]
    lr = lambda step: (r["lr"] * (step + 1) / r["warmup"] if step < r["warmup"] else r["lr"] * (
        1 - (step - r["warmup"]) / max(1, r["steps"] - r["warmup"]) * (1 - r["min_lr_frac"])))
    text = (f"learning rate {r['lr']} after {r['warmup']} warm-up steps, decaying linearly "
            f"towards {r['lr'] * r['min_lr_frac']:g} at step {r['steps']}")
    if ran == r["steps"]:
        return f"{ran} steps,\n{text}"
    return (f"{ran} steps of a schedule laid out for {r['steps']}\n(`stop` {ran}; {text}, so "
            f"the last step ran at {lr(ran - 1):.2g})")


def rerun(r):
    ran = r.get("stop") or r["steps"]
    if ran == r["steps"]:
        return f"a second full {ran}-step run to compare model.safetensors has not been made."
    return (f"the shipped weights are the state after step {ran} of the run (saved there by\n"
            f"`--checkpoints`; the steps before `stop` do not depend on it, so `stop` {ran} "
            f"gives the same\nloop); a second run to compare model.safetensors has not been made.")


def last_batch(log):
    if "batch_loss" in log:
        return f"last training batch | {log['batch_loss'][-1]:.4f}"
    step, loss = log["batch_loss_means_100"][-1]
    return f"the last 100 training batches (mean, to step {step}) | {loss:.4f}"


def write(out, log, s):
    m, r = log["model"], log["recipe"]
    ev = log["evals"][-1]
    size = os.path.getsize(os.path.join(out, "model.safetensors")) / 1e6
    b, tc, f = s["best"], s["tokenizer_check"], s["fill"]
    pb, ps = s["presets"]["bidirectional"], s["presets"]["sep"]
    nh = b["next"]
    sh = b["sep"]
    text = f"""# kjv-wp-bert: a small BERT trained by the attnviz project

A small masked-language model in the BERT layout (Hugging Face `BertForMaskedLM`, `model_type`
"bert"), trained on the King James Bible on the CPU by `tools/train/train_bert.py`
({log['train_seconds'] / 60:.1f} minutes of wall time for training, one thread of a shared
machine), so that attnviz ships an encoder of its own: attention with no causal mask, where
every row sees every key, [CLS]/[SEP] conventions and sentence pairs with token types.

Why BERT and not ModernBERT: BERT's layout (post-norm, learned absolute positions, token type
embeddings, exact GELU, an MLM head tied to the embeddings) is the one the literature on
attention heads studied (Clark et al. 2019, "What Does BERT Look At?", found heads that park
their attention on [SEP], and heads that attend to the previous or the next token); its input
conventions ([CLS] A [SEP] B [SEP], token types 0 and 1) are the ones most encoders still use;
and it is the layout GGUF's `bert` architecture describes (which attnviz does not read yet), so
one model can serve that reader when it comes. ModernBERT (pre-norm, RoPE, local layers) would
show less that is new next to the shipped decoders.

## Files
- `config.json`: HF `BertConfig`: {m['n_layers']} layers, hidden_size {m['hidden_size']},
  intermediate_size {m['intermediate_size']} (exact GELU), {m['n_heads']} heads of
  {m['hidden_size'] // m['n_heads']}, max_position_embeddings {m['max_positions']},
  type_vocab_size {m['type_vocab_size']}, layer_norm_eps {m['layer_norm_eps']},
  `"tie_word_embeddings": true`.
- `model.safetensors`: F32, {size:.2f} MB, {log['params']:,} parameters, HF key names
  (`bert.embeddings.*`, `bert.encoder.layer.N.*`, `cls.predictions.*`); the decoder is tied to
  `bert.embeddings.word_embeddings.weight` and not stored (as transformers saves a tied model).
- `vocab.txt`, `tokenizer.json`, `tokenizer_config.json`: a WordPiece vocabulary of
  {log['tokenizer']['vocab_size']} pieces learned from the training split by
  `tools/train/wp_tokenizer.py` (lower case, "##" continuations; [PAD] 0, [UNK] 1, [CLS] 2,
  [SEP] 3, [MASK] 4). tokenizer.json: BertNormalizer (lowercase), BertPreTokenizer, the
  WordPiece model, TemplateProcessing `[CLS] $A [SEP]` and `[CLS] $A [SEP] $B:1 [SEP]:1`.
  Checked: `attnviz tokenize` and the npm package {tc['package']} on tokenizer.json give the
  same ids for all {tc['texts']} texts (every held-out verse, every 20th training verse, and
  unicode, whitespace and punctuation cases, less one with a NUL, which a command line cannot
  carry; {tc['tokens']:,} tokens): **{tc['mismatches']} mismatches**.
- `training_log.json` ({'every batch loss' if 'batch_loss' in log else 'the mean loss of every 100 batches'}, the evaluations, the recipe, timings),
  `head_scores.json` (everything below, with the texts and ids it was measured on).

## Recipe
The King James Bible split as for kjv-sp-llama (`tools/train/kjv.py`): training
Genesis-Philemon ({log['train_verses']:,} verses, {log['train_tokens']:,} pieces), held out
Hebrews-Revelation ({log['heldout_verses']:,} verses, {log['heldout_tokens']:,} pieces), never
trained on. Each sequence is a pair of training verses, `[CLS] A [SEP] B [SEP]` with token
types 0 then 1, B the verse after A with probability {1 - r['p_random_b']:.1f} and a random
verse otherwise (BERT's way of drawing pairs; there is no next-sentence loss), cut to
{m['max_positions']} positions longest side first. {r['mask_rate']:.0%} of the non-special
pieces are chosen for the loss; {r['p_mask_token']:.0%} of those become [MASK],
{r['p_random_token']:.0%} a random piece, the rest stay. Batches of {r['batch']} pairs (drawn
{r['bucket']} batches at a time and grouped by length, to pad little), {schedule(r)},
AdamW (betas {r['betas'][0]}, {r['betas'][1]}; weight decay {r['weight_decay']} on the
matrices), gradient clipping {r['grad_clip']}, no dropout; init normal(0,
0.02), seed {r['seed']}. Trained with torch {log['machine']['torch']} on one thread of an
{log['machine']['cpu']} shared with other jobs: {log['train_seconds'] / 60:.1f} minutes wall,
{'about ' if log.get('note') else ''}{log['cpu_seconds'] / 60:.1f} CPU minutes (the wall time is long because the machine's two cores were
shared; the CPU time is what the run needs). Meant to be deterministic (seeded init and batches,
one thread, deterministic algorithms): two 15-step runs of the same loop gave identical weights,
and a second run of the tokenizer trainer the same vocab.txt and tokenizer.json (and the
same files as the first version of this model); {rerun(r)}

    /usr/bin/python3 tools/train/train_bert.py --out assets/models/kjv-wp-bert --attnviz build/app/attnviz

## Losses (masked-LM cross entropy, nats per masked piece)
{r['eval_pairs']} fixed pairs of consecutive verses, fixed masks (80/10/10 as in training):

| | loss | top-1 |
|---|---|---|
| training pairs | {ev['train_loss']:.4f} | {ev['train_top1']:.3f} |
| held-out pairs (Hebrews-Revelation) | {ev['heldout_loss']:.4f} | {ev['heldout_top1']:.3f} |
| {last_batch(log)} | |

(At step 0 both were {log['evals'][0]['train_loss']:.2f}, about ln {m['vocab_size']} =
{np.log(m['vocab_size']):.2f}.)

## Fill accuracy, through `attnviz fill`
Every {f['every']}th held-out verse ({f['verses']} verses) as `[CLS] verse [SEP]`, 15% of its
pieces (at least one, numpy seed {f['seed']}) replaced by [MASK] all at once, then
`attnviz fill --model assets/models/kjv-wp-bert --ids IDS --top-k 5` (the ids and positions
are in head_scores.json under `fill`): over **{f['masked']} masked pieces, top-1
{f['top1']:.3f}, top-5 {f['top5']:.3f}**.

## Heads, through `attnviz model --weights`
{s['pairs']['count']} pairs of consecutive held-out verses, each run as
`attnviz model --model assets/models/kjv-wp-bert --text A --text-pair B --weights W.npy`; for
each head, the mean over rows (queries) of the weight a row puts on a kind of key, per pair,
then the mean over pairs. Layers and heads count from 0.

{heads_prose(s, r)}

- **[SEP]**: the best head puts **{sh[2]:.3f}** of its rows' weight on the two [SEP] keys
  (layer {sh[0]} head {sh[1]}); with some 70 keys a pair, uniform attention would put about
  0.03 there. {sep_prose(s)}
- **Next-token head**: layer {nh[0]} head {nh[1]} puts **{nh[2]:.3f}** on the key after the
  row (i + 1).
- **Previous-token head**: layer {b['prev'][0]} head {b['prev'][1]}, **{b['prev'][2]:.3f}** on
  the key before (i - 1).
- **Looking right**: layer {b['after'][0]} head {b['after'][1]} puts **{b['after'][2]:.3f}**
  of each row's weight on keys after the row (j > i), which a causal model cannot do.
- [CLS]: best layer {b['cls'][0]} head {b['cls'][1]}, {b['cls'][2]:.3f}.

Share on the [SEP] keys:

{table(s['shares']['sep'])}

Share on the next key (i + 1):

{table(s['shares']['next'])}

Share on the previous key (i - 1):

{table(s['shares']['prev'])}

Share on all keys after the row (j > i); a uniform head would put about half there:

{table(s['shares']['after'])}

## Fill on single sentences, through `attnviz fill --text`
`attnviz fill --model assets/models/kjv-wp-bert --text TEXT --top-k 5`, the five most likely
pieces for the [MASK] and their probabilities. The first two are the ends of held-out verses
(1 John 4:8, "love"; Hebrews 13:25, "Amen"), the third a phrase of the training text (Jeremiah,
Ezekiel: "word"); the last three are plain modern English, which the model never saw: it fills
them with King James words.

{fill_examples(s)}

## The presets' figures
Single held-out verses, `attnviz model --model assets/models/kjv-wp-bert --text TEXT
--weights W.npy` (`[CLS] verse [SEP]`, one [SEP]):
- "{pb['text']}" ({len(pb['ids'])} tokens; preset 30): layer {b['after'][0]} head
  {b['after'][1]} puts {pb['shares']['after'][b['after'][0]][b['after'][1]]:.3f} of each row's
  weight on keys after the row; layer {nh[0]} head {nh[1]} puts
  {pb['shares']['next'][nh[0]][nh[1]]:.3f} on the next key.
- "{ps['text']}" ({len(ps['ids'])} tokens; preset 31): the largest [SEP] share on this text
  is layer {ps['best']['sep'][0]} head {ps['best']['sep'][1]}, {ps['best']['sep'][2]:.3f}
  (uniform: 1/{len(ps['ids'])} = {1 / len(ps['ids']):.3f}); layer {sh[0]} head {sh[1]} puts
  {ps['shares']['sep'][sh[0]][sh[1]]:.3f} there.

Tested by `tests/model/shipped_bert_test.cpp` (weights and fill against a float64 torch
reference, the card's figures through the binary).
"""
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--attnviz", default=os.path.join(HERE, "..", "..", "build", "app",
                                                      "attnviz"))
    ap.add_argument("--tokjs", default=os.path.join(HERE, "..", "..", ".cache", "npm"))
    args = ap.parse_args()
    out = os.path.normpath(args.model)
    with open(os.path.join(out, "training_log.json"), encoding="utf-8") as f:
        log = json.load(f)
    s = measure(out, os.path.abspath(args.attnviz), args.tokjs)
    import bert_lm
    bert_lm.write_json(os.path.join(out, "head_scores.json"), s, indent=1)
    write(out, log, s)


if __name__ == "__main__":
    main()
