"""Writes the model card (README.md) of a folder that train.py made, from its training_log.json
and head scores measured now (head_scores.py, through torch or through `attnviz model`)."""
import json
import os

import head_scores
import kjv


def lm_head_description(model_dir):
    """How the card describes lm_head, from config.json."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if cfg.get("tie_word_embeddings", True):
        return "`lm_head` is tied to `transformer.wte.weight` and not stored."
    return ("`lm_head.weight` is stored (untied, see stage 2; the config says "
            "`\"tie_word_embeddings\": false`).")


def write(model_dir, attnviz=None):
    with open(os.path.join(model_dir, "training_log.json"), encoding="utf-8") as f:
        log = json.load(f)
    backend = (head_scores.AttnvizBackend(model_dir, attnviz) if attnviz
               else head_scores.TorchBackend(model_dir))
    s = head_scores.measure(backend)
    with open(os.path.join(model_dir, "head_scores.json"), "w", encoding="utf-8") as f:
        json.dump(s, f, indent=1)
        f.write("\n")

    from train import stages
    parts = stages(log)
    r = parts[0]["recipe"]  # stage 1 (the mix, the recipe; stage 2 below)
    final = log["eval"][-1]
    size = os.path.getsize(os.path.join(model_dir, "model.safetensors"))
    il, ih = s["best_induction_head"]
    pl, ph = s["best_previous_token_head"]
    fl, fh = s["best_first_token_head"]
    ablated = s["copy_prob_ablated"][f"{il}:{ih}"]
    name = os.path.basename(os.path.normpath(model_dir))
    # every step sees batch x seq bytes, whatever its sequence length
    def tokens_of(p):
        return p["recipe"]["steps"] * p["recipe"]["batch"] * p["recipe"]["seq"]
    tokens = tokens_of(parts[0])
    all_tokens = sum(tokens_of(p) for p in parts)
    schedule = ("then constant" if r["min_lr_frac"] == 1.0 else
                f"then cosine decay to {r['min_lr_frac']}x")
    seconds = sum(p["train_seconds"] for p in parts)
    minutes = seconds / 60
    cpu = (f"{sum(p['cpu_seconds'] for p in parts) / 60:.1f} minutes of CPU time, "
           if all("cpu_seconds" in p for p in parts) else "")
    if "cpu_note" in parts[0] and len(parts) == 1:
        cpu = f"({parts[0]['cpu_note']}) "
    reproduce = f"    /usr/bin/python3 tools/train/train.py --out assets/models/{name}"
    stage2 = ""
    if len(parts) > 1:
        phases = []
        for p in parts[1:]:
            r2 = p["recipe"]
            warm = (f"after {r2['warmup']} warm-up steps, " if r2["warmup"] else "")
            phases.append(
                f"- **{r2.get('phase', 'stage 2')}:** {r2['steps']} steps of {r2['batch']} "
                f"sequences of {r2['seq'] + 1} bytes, learning rate {r2['lr']} {warm}then "
                f"constant, seed {r2['seed']}; {r2['p_text']:.0%} text, "
                f"{r2['p_text_with_copy']:.0%} text with a span of random bytes written twice, "
                f"{r2['p_random_repeat']:.0%} a random byte sequence repeated to fill the "
                f"window.")
        stage2 = ("\n**Stage 2** continues from stage 1's weights with a fresh AdamW (same betas, "
                  "weight decay and clipping) and `lm_head` untied: from here on it is a matrix "
                  "of its own, starting as a copy of `wte`. Tied, the bytes that never occur in "
                  "the text (>= 128) end up sharing one direction of `wte`, since as outputs they "
                  "only ever need to be unlikely, and a model that cannot tell them apart as "
                  "inputs cannot copy them. Two phases:\n" + "\n".join(phases) + "\n\n"
                  "In the short phase a query has only 32 keys to spread its attention over, so "
                  "the right key gets enough of it for a layer-1 head to learn to attend to the "
                  "byte after the current byte's earlier occurrence, composing with the "
                  "previous-token head: the batch loss (grey) sits for several hundred steps, then "
                  "falls as copying starts. The probe (green: 200 bytes, longer than this "
                  "phase's sequences) only shows it once the long phase begins, which makes the "
                  "copying work at every position and brings the text loss back (the short "
                  "windows let it drift up). All stages: "
                  f"{sum(p['recipe']['steps'] for p in parts)} steps, "
                  f"{all_tokens / 1e6:.1f} M bytes.\n")
    tied = lm_head_description(model_dir)
    found = []
    if s["previous_token"][pl][ph] >= 0.8:
        found.append(f"a previous-token head (layer {pl} head {ph})")
    if s["induction"][il][ih] >= 0.5:
        found.append(f"an induction head (layer {il} head {ih})")
    status = ("It has " + " and ".join(found) + "." if found else "")
    if s["induction"][il][ih] < 0.5:
        status += (f"\n\n**It has no induction head yet:** the best layer-1 induction score is "
                   f"{s['induction'][il][ih]:.3f} and copying a repeated random sequence stays at "
                   "chance. The training budget on the shared machine ran out before the "
                   "layer-1 heads learned to compose with the previous-token head; see the "
                   "scores below.")
    text = f"""# {name}: a byte-level GPT-2 trained by the attnviz project

A small GPT-2 (the Hugging Face `GPT2LMHeadModel` layout) whose vocabulary is the 256 bytes, so
any text tokenizes to its UTF-8 bytes. It was trained on the CPU by `tools/train/train.py`
({minutes:.1f} minutes of wall time on a machine shared with other jobs), so attnviz can show
real learned attention offline.
{status}

**Terms:** the text it was trained on (the King James Bible) is in the public domain; the
weights are the attnviz project's, under the MIT licence (the repository's `LICENSE`).

## Files
- `config.json`: GPT-2 config as HF writes it: {r['n_layer']} layers, {r['n_head']} heads,
  n_embd {r['n_embd']}, n_positions {r['n_positions']}, vocab_size 256, gelu_new.
- `model.safetensors`: F32, {size / 1e6:.2f} MB, {log['params']:,} parameters; {tied}
- `vocab.json`, `merges.txt`: GPT-2's byte-to-unicode alphabet as the vocabulary (token id =
  byte value) and no merges, so the ordinary GPT-2 tokenizer splits text into bytes.
- `training_log.json` (every batch loss, the evaluations, the recipe), `loss_curve.png`,
  `head_scores.json` (the tables below).

## Data
- **Text:** the King James Version of the Bible (1611), as Debian's **`{kjv.PACKAGE}`** package
  prints it (`bible -f "{kjv.RANGE}"`, with the `bible-kjv-text` data). The verse references are
  stripped; one verse a line. The KJV text is in the public domain (its copyright expired; see
  `/usr/share/doc/bible-kjv-text/copyright`: "The copyright for the King James Version text of
  the Bible is expired").
- **Split:** training is Genesis 1:1 to Philemon ({log['train_bytes']:,} bytes); the held-out
  split, never trained on, is Hebrews 1:1 to Revelation 22:21 ({log['heldout_bytes']:,} bytes).
- **Mix per 257-byte sequence (stage 1):** {r['p_text']:.0%} plain text windows; {r['p_text_with_copy']:.0%}
  text windows with one span (4-96 bytes, random bytes or other text) written twice;
  {r['p_random_repeat']:.0%} a random byte sequence of 8-128 bytes repeated to fill the window.
  The repeats are what make an induction head pay off.

## Recipe
**Stage 1.** AdamW (betas {r['betas'][0]}, {r['betas'][1]}; weight decay {r['weight_decay']} on matrices),
learning rate {r['lr']} after {r['warmup']} warm-up steps, {schedule}, gradient clipping at
{r['grad_clip']}, no dropout. The first {r['short_steps']} steps use {r['short_seq']}-byte
sequences ({r['batch'] * r['seq'] // r['short_seq']} a batch), the rest {r['seq']}-byte sequences
({r['batch']} a batch): {r['steps']} steps, {tokens / 1e6:.1f} M bytes. With few keys a query's
attention is not spread thin, so the previous-token head forms early; the long phase then
teaches every position. `wpe` starts from sinusoids (then learned like the rest), which makes
"one position back" an easy direction to find; everything else is GPT-2's initialisation.
Seed {r['seed']} drives the initialisation and the batches; torch runs on {r['threads']} thread
with deterministic algorithms, so a rerun on the same machine gives the same bytes.
{stage2}
Trained with torch {log['machine']['torch']} (Debian's `python3-torch`) on one thread of an
{log['machine']['cpu']} shared with other jobs: {cpu}{minutes:.1f} minutes of wall time in all.

Reproduce (`apt-get install bible-kjv libopenblas0-pthread python3-torch python3-matplotlib`
first):

{reproduce}

## Losses (nats per byte)
| | loss |
|---|---|
| final training text (fixed windows of the training split) | {final['train_text']:.4f} |
| final held-out text (Hebrews-Revelation) | {final['val_text']:.4f} |
| last training batch (text and repeats) | {log['batch_loss'][-1]:.4f} |

![loss curve](loss_curve.png)

## Head scores
Measured by `tools/train/head_scores.py` through {s['backend']}. Layers and heads count from 0.
- **Previous-token score:** the mean of A[t, t-1] over t >= 1, on {s['text_windows']} windows of
  {s['text_T']} held-out bytes. Best: layer {pl} head {ph},
  **{s['previous_token'][pl][ph]:.3f}**.
- **Induction score:** the mean of A[t, t-L+1] over the second copy (t = L .. 2L-1) of a
  uniformly random byte sequence of length L = {s['repeat_len']} repeated twice, averaged over
  {len(s['repeat_seeds'])} seeds. Best in layer >= 1: layer {il} head {ih},
  **{s['induction'][il][ih]:.3f}**.
- **First-token sink:** the mean of A[t, 0] over t >= 1 on the held-out windows. Strongest: layer
  {fl} head {fh}, {s['first_token'][fl][fh]:.3f}.

Previous-token score:

{head_scores.table(s, 'previous_token')}

Induction score:

{head_scores.table(s, 'induction')}

First-token score:

{head_scores.table(s, 'first_token')}

## Ablation
On the same repeated sequences, the probability the model gives the correct next byte on the
second copy (t = L .. 2L-2) is **{s['copy_prob']:.3f}** (chance is 1/256 = 0.004). Zeroing the
best induction head (layer {il} head {ih}) before the output projection drops it to
**{ablated:.3f}**. Zeroing the previous-token head (layer {pl} head {ph}) instead gives
**{s['copy_prob_ablated'][f'{pl}:{ph}']:.3f}**: an induction head in layer 1 finds its key through
what that head wrote there (the byte before each key). Each head ablated alone:

{head_scores.ablation_table(s)}

Regenerate the scores and this card without training (through the attnviz CLI with
`--attnviz build/app/attnviz`):

    /usr/bin/python3 tools/train/train.py --card-only --out assets/models/{name}
"""
    tmp = os.path.join(model_dir, "README.md.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(model_dir, "README.md"))
    return s
