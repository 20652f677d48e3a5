"""Writes the model card (README.md) of the folder train_llama.py made, from its
training_log.json and the head scores (llama_scores.py)."""
import json
import os

import kjv
import llama_scores

NAME = "kjv-sp-llama"


def _ids(ids):
    return ",".join(str(i) for i in ids)


def write(model_dir, log, s):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    ph = log["phases"]
    r1 = ph[0]["recipe"]
    size = os.path.getsize(os.path.join(model_dir, "model.safetensors"))
    final = ph[-1]["eval"][-1]
    pl, phd = s["best_previous_token_head"]
    il, ih = s["best_induction_head"]
    el, eh = s["best_induction_head_english"]
    fl, fh = s["best_first_token_head"]
    ind_r = s["induction_random"][il][ih]
    ind_e = s["induction_english"][il][ih]
    cp, ca = s["copy_prob"], s["copy_prob_ablated"]
    key = f"{il}:{ih}"
    pkey = f"{pl}:{phd}"
    tokens = sum(p["tokens"] for p in ph)
    first = next((e for e in ph[0]["eval"] if e["induction_random_best"] >= 0.5), None)
    formed = (f"(the evaluation at step {first['step']} is the first to show an induction "
              f"score of {first['induction_random_best']:.2f}, layer:head "
              f"{first['induction_head']}, on the 201-token probe)" if first else
              "(it shows on the 201-token probes only in the later phases)")
    steps = sum(p["recipe"]["steps"] for p in ph)
    wall = log.get("total_seconds", log["train_seconds"]) / 60
    cpu = log.get("total_cpu_seconds", log["train_cpu_seconds"]) / 60
    check = log.get("tokenizer_json_check")
    rl, rh = s["best_induction_head_random"]
    nl, nh = len(s["previous_token"]), len(s["previous_token"][0])
    prev_heads = [(l, h) for l in range(nl) for h in range(nh) if s["previous_token"][l][h] >= 0.8]
    group = s["induction_heads"]

    def heads_text(pairs, table):
        return ", ".join(f"{l}:{h} ({s[table][l][h]:.3f})" for l, h in pairs)
    found = []
    if prev_heads:
        found.append(f"previous-token heads (layer:head, score on held-out text: "
                     f"{heads_text(prev_heads, 'previous_token')})")
    if group:
        found.append(f"induction heads (on repeated random ids: "
                     f"{heads_text([tuple(map(int, g.split(':'))) for g in group], 'induction_random')}"
                     f"; the best, layer {il} head {ih}, scores {ind_e:.3f} on a repeated "
                     f"held-out English verse)")
    status = "It has " + " and ".join(found) + "." if found else ""
    gr, ge = (s["copy_prob_induction_heads_ablated"]["random"],
              s["copy_prob_induction_heads_ablated"]["english"])
    if check is None:
        check_text = ("Not checked in this run (node or the npm package "
                      "`@huggingface/tokenizers` was missing).")
    else:
        sp_ex = check["special_token_text"][0] if check["special_token_text"] else None
        check_text = (
            f"`tools/train/check_tokenizer_json.py` encodes {check['texts']:,} texts (every "
            f"held-out verse, every 20th training verse and {check['extra_texts']} unicode, "
            f"digit, whitespace and control-character strings; {check['tokens']:,} tokens, "
            f"{check['byte_fallback_texts']} texts needing byte fallback) with SentencePiece "
            f"(`tokenizer.model`, BOS added) and with {check['package']} (a pure-JS "
            f"implementation of HF tokenizers) on `tokenizer.json` + `tokenizer_config.json`: "
            f"**{check['mismatches']} mismatches**.")
        if sp_ex:
            check_text += (
                " One difference is by design and left out of that count: text that spells a "
                "special token, such as `<s>`, is one added token (id 1) to HF tokenizers but "
                "the characters `<`, `s`, `>` (byte fallback) to SentencePiece, as for every "
                "Llama-2 `tokenizer.json`.")
    eng_rows = "\n".join(
        f"| {i} | {llama_scores.BOS} + S + S, {t!r} | {v:.3f} |"
        for i, (t, v) in enumerate(zip(s["english_sentences"],
                                       s["induction_english_per_sentence"])))
    probe0 = llama_scores.repeated_random(0, cfg["vocab_size"])
    text = f"""# {NAME}: a small LLaMA trained by the attnviz project

A small model in the LLaMA layout (Hugging Face `LlamaForCausalLM`: RMSNorm, rotary positions,
a gated SiLU MLP, grouped-query attention with {cfg['num_attention_heads']} query heads over
{cfg['num_key_value_heads']} key/value heads, an untied `lm_head`) with a SentencePiece BPE
vocabulary of {cfg['vocab_size']} pieces and byte fallback, so any text tokenizes. It was trained
on the CPU by `tools/train/train_llama.py` ({wall:.1f} minutes of wall time, {cpu:.1f} of CPU
time, one thread, tokenizer and scores included) on the King James Bible, so attnviz can show
real learned attention in a Llama-family model offline. {status}

## Files
- `config.json`: HF `LlamaConfig`: {cfg['num_hidden_layers']} layers, hidden_size
  {cfg['hidden_size']}, intermediate_size {cfg['intermediate_size']}, {cfg['num_attention_heads']}
  query heads and {cfg['num_key_value_heads']} KV heads of head_dim {cfg['head_dim']},
  max_position_embeddings {cfg['max_position_embeddings']}, rope_theta {cfg['rope_theta']:g}
  (no scaling), rms_norm_eps {cfg['rms_norm_eps']:g}, vocab_size {cfg['vocab_size']},
  `"tie_word_embeddings": false`, bos/eos ids 1/2.
- `model.safetensors`: F32, {size / 1e6:.2f} MB, {log['params']:,} parameters, HF key names
  (`model.embed_tokens.weight`, `model.layers.N.self_attn.{{q,k,v,o}}_proj.weight`,
  `model.layers.N.mlp.{{gate,up,down}}_proj.weight`, `model.layers.N.input_layernorm.weight`,
  `model.layers.N.post_attention_layernorm.weight`, `model.norm.weight`, `lm_head.weight`);
  q/k rows in HF's rotate-half RoPE order.
- `tokenizer.model`: the SentencePiece model; `tokenizer.json`: the same tokenizer in HF's
  Llama-2 layout; `tokenizer_config.json`: `add_bos_token` true, `<s>`, `</s>`, `<unk>`.
- `training_log.json` (every batch loss, the evaluations, the recipe, timings, the tokenizer
  check), `loss_curve.png`, `head_scores.json` (the tables below).

## Data
- **Text:** the King James Version of the Bible (1611), as Debian's **`{kjv.PACKAGE}`** package
  prints it (`bible -f "{kjv.RANGE}"`, with the `bible-kjv-text` data), the verse references
  stripped (`tools/train/kjv.py`, shared with `kjv-byte-2l`). The KJV text is in the public
  domain (its copyright expired; see `/usr/share/doc/bible-kjv-text/copyright`: "The copyright
  for the King James Version text of the Bible is expired").
- **Split:** training is Genesis 1:1 to Philemon ({log['train_chars']:,} characters,
  {log['train_tokens']:,} tokens); the held-out split, never trained on (neither by the
  tokenizer nor the model), is Hebrews 1:1 to Revelation 22:21 ({log['heldout_chars']:,}
  characters, {log['heldout_tokens']:,} tokens).
- The model sees the verses tokenized one by one and concatenated, which reads as running text
  with a space between verses; every training sequence starts with BOS (`<s>`, id 1).

## Tokenizer
SentencePiece 0.1.97 BPE trained on the training verses (one a line, in order, all of them,
one thread): vocab_size {cfg['vocab_size']}, `byte_fallback` true (the 256 pieces `<0x00>` ..
`<0xFF>`, ids 3-258), `character_coverage` 1.0, identity normalization, `add_dummy_prefix` true,
`remove_extra_whitespaces` false, `split_digits` true, unk/bos/eos ids 0/1/2, no pad: Llama 2's
settings. The KJV text is ASCII without digits, so digits and every non-ASCII character fall back
to bytes. About {log['train_chars'] / log['train_tokens']:.2f} characters a token.

`tokenizer.json` is converted from `tokenizer.model` as transformers' `LlamaConverter` does it
(`tools/train/sp_tokenizer.py`): model BPE with `byte_fallback` and `fuse_unk`, the vocabulary
in id order, and as merges every split (a, b) of a piece into two pieces, ordered by the merged
piece's score (SentencePiece's merge order), ties by the ids of a and b; normalizer Prepend "▁"
then Replace " " -> "▁", no pre-tokenizer, decoder Replace "▁" -> " ", ByteFallback, Fuse,
Strip one leading space; a TemplateProcessing post-processor that adds `<s>`.

**Check:** {check_text}

## Recipe
The recipe of `kjv-byte-2l` (`tools/train/train.py`) in tokens, reordered (see below), with
natural-text copies added. Every sequence is BOS and then one of:
- **text:** a window of the training text;
- **text with a copy:** a window in which a span of 4 to min(48, T/2) tokens is written again
  later; half of the spans are random ids, half are the window's own text (a passage repeated
  later, as English repeats itself);
- **random repeat:** random ids (uniform over 3-{cfg['vocab_size'] - 1}) of min(8, T/4) to
  min(128, T/2) tokens, repeated to fill the window;
- **text repeat:** a passage of training text of the same lengths, repeated to fill the window.

AdamW (betas {r1['betas'][0]}, {r1['betas'][1]}; weight decay {r1['weight_decay']} on matrices),
restarted at each phase, gradient clipping at {r1['grad_clip']}, no dropout, constant learning
rate after a linear warm-up. Init: normal(0, 0.02), the residual-stream writers (`o_proj`,
`down_proj`) scaled by 1/sqrt(2 x layers), RMSNorm weights 1; `lm_head` is a matrix of its own
from the start.

| phase | steps | sequences (batch x positions) | lr (warm-up steps) | text / text with a copy / random repeat / text repeat | seed |
|---|---|---|---|---|---|
""" + "\n".join(
        f"| {p['recipe']['phase']} | {p['recipe']['steps']} | "
        f"{p['recipe']['batch']} x {p['recipe']['seq']} | {p['recipe']['lr']} "
        f"({p['recipe']['warmup']}) | {p['recipe']['p_text']:.0%} / "
        f"{p['recipe']['p_text_with_copy']:.0%} / {p['recipe']['p_random_repeat']:.0%} / "
        f"{p['recipe']['p_text_repeat']:.0%} | {p['recipe']['seed']} |" for p in ph) + f"""

In all {steps} steps, {tokens / 1e6:.1f} M tokens. **Short copies** comes first, from the
initialisation: with 32 keys the right key holds a large share of a query's attention, so one
head learns to attend to the previous token and a head of a later layer to the token after the
current token's earlier occurrence, reading what the previous-token head wrote there. The batch
loss sits on a plateau, then falls within ~100 steps as both heads appear together
{formed}. **Medium context** (64 positions, half text) then trains the text cheaply, and **long
context** (256 positions) makes both heads work at every position of the full context.

The first two attempts followed `train.py`'s order: a stage 1 of 1000-1200 steps (tied
embeddings, 64 then 256 positions; 40% plain text, 30% text with a copied span, 30% repeats)
that gave a previous-token head (0.8-0.9), then `lm_head` untied, a fresh AdamW and a
short-copies phase (70-80% repeats, learning rate 0.01). With 16-dimensional heads (rope_theta
10000) and then 32-dimensional ones (rope_theta 500000), no induction head had formed after
750-900 short-copy steps, and the previous-token head was decaying. The same short-copies mix run from the initialisation at
learning rate 0.005 formed both heads near step 500, so that is the recipe.

The model sees BOS at position 0 of every sequence. The first phase's seed drives the
initialisation (torch.manual_seed), each phase's seed its batches (numpy PCG64); torch runs on
one thread with deterministic algorithms, so a rerun on the same machine gives the same bytes.

Trained with torch {ph[0]['machine']['torch']} (Debian's `python3-torch`) on one thread of an
{ph[0]['machine']['cpu']} shared with other jobs (C++ builds): training {log['train_seconds'] / 60:.1f}
minutes of wall time ({log['train_cpu_seconds'] / 60:.1f} of CPU time); the whole command,
tokenizer, check and scores included, {wall:.1f} minutes ({cpu:.1f} of CPU time).

Reproduce (`apt-get install bible-kjv python3-torch python3-sentencepiece python3-protobuf
python3-matplotlib`; for the tokenizer check `npm install --prefix /tmp/tokjs
@huggingface/tokenizers@0.2.0`):

    /usr/bin/python3 tools/train/train_llama.py --out assets/models/{NAME}

## Losses (nats per token)
| | loss |
|---|---|
| final training text (16 fixed windows of the training split) | {final['train_text']:.4f} |
| final held-out text (16 windows, Hebrews-Revelation) | {final['val_text']:.4f} |
| second copy of repeated random ids ({log['probe_counts']['random']} probes, L = 100) | {final['repeat_random_second_copy']:.4f} |
| second copy of a repeated held-out verse ({log['probe_counts']['english']} probes, at most 60 tokens) | {final['repeat_english_second_copy']:.4f} |
| last training batch (text and repeats) | {ph[-1]['batch_loss'][-1]:.4f} |

![loss curve](loss_curve.png)

## Head scores
Measured by `tools/train/llama_scores.py` through {s['backend']}. Layers and heads count from 0;
a head is a query head (query heads 0-3 share KV head 0, 4-7 KV head 1). Every probe starts
with BOS (id 1).
- **Previous-token score:** the mean of A[t, t-1] over t >= 1 on {s['text_windows']} windows
  (BOS + {s['text_T'] - 1} tokens) of held-out text. Best: **layer {pl} head {phd},
  {s['previous_token'][pl][phd]:.3f}**.
- **Induction score, random ids:** on BOS + S + S with S {s['repeat_len']} random ids
  (uniform over 3-{cfg['vocab_size'] - 1}, numpy `default_rng(1000 + seed)`, seeds 0-7), the
  mean over the second copy (t = L+1 .. 2L) of A[t, t-L+1], the token after the current
  token's first occurrence. Best in layer >= 1: layer {rl} head {rh},
  {s['induction_random'][rl][rh]:.3f}.
- **Induction score, English:** the same on BOS + S + S with S a held-out verse (8 verses of
  20-60 tokens, listed below). Best in layer >= 1: layer {el} head {eh},
  {s['induction_english'][el][eh]:.3f}. A verse repeats some tokens
  ("the", "of", ",") within itself, and such a token's query splits its attention between the
  tokens after each earlier occurrence, so this score is lower than on random ids by
  construction.
- **The best induction head** is the head of layer >= 1 (layer 0 has no earlier head to
  compose with) with the highest mean of the two induction scores: **layer {il} head {ih},
  {ind_r:.3f} on random ids and {ind_e:.3f} on English** (on random ids alone several heads
  are within a few thousandths of each other).
- **First-token (BOS) score:** the mean of A[t, 0] over t >= 1 on the held-out windows.
  Strongest: layer {fl} head {fh}, {s['first_token'][fl][fh]:.3f}. A head with nothing to
  copy parks its attention on BOS.

Previous-token score:

{llama_scores.table(s['previous_token'])}

Induction score, random ids:

{llama_scores.table(s['induction_random'])}

Induction score, repeated held-out verse:

{llama_scores.table(s['induction_english'])}

First-token score:

{llama_scores.table(s['first_token'])}

The English probes (layer {il} head {ih}'s induction score on each):

| # | sequence | score |
|---|---|---|
{eng_rows}

## Ablation
The probability the model gives the correct next token on the second copy (t = L+1 .. 2L-1):
- random ids: **{cp['random']:.3f}** (chance 1/{cfg['vocab_size'] - 3}); zeroing the best induction
  head (layer {il} head {ih}) before `o_proj` drops it to **{ca['random'][key]:.3f}**
  (a drop of {cp['random'] - ca['random'][key]:.3f}); zeroing the previous-token head
  (layer {pl} head {phd}) instead gives {ca['random'][pkey]:.3f}.
- English: **{cp['english']:.3f}**; with layer {il} head {ih} zeroed **{ca['english'][key]:.3f}**
  (a drop of {cp['english'] - ca['english'][key]:.3f}); with layer {pl} head {phd} zeroed
  {ca['english'][pkey]:.3f}.
- The induction heads back each other up: zeroing all of them together ({', '.join(group)})
  gives **{gr:.3f}** on random ids and **{ge:.3f}** on English.

Each head ablated alone, random ids:

{llama_scores.table(llama_scores.ablation_rows(s, 'random'))}

Each head ablated alone, English:

{llama_scores.table(llama_scores.ablation_rows(s, 'english'))}

## Measuring through attnviz
`attnviz model --weights A.npy` writes float32 [L, H, T, T] (H = 8 query heads; each KV head is
repeated for its group), `--logits Z.npy` float32 [T, V], `--ablate L:H` zeroes query head H's
output in layer L before `o_proj`. The scores above, through the CLI instead of torch (the same
probes, the same numbers to about 1e-4):

    /usr/bin/python3 tools/train/llama_scores.py --model assets/models/{NAME} --attnviz build/app/attnviz
    /usr/bin/python3 tools/train/train_llama.py --card-only --attnviz build/app/attnviz --out assets/models/{NAME}

(the second also rewrites head_scores.json and this card). By hand, for one probe: the random
probe of seed 0 is BOS + S + S with L = {s['repeat_len']}, T = {len(probe0)}
(`head_scores.json` has its ids under `probe_random_seed0` and its scores):

    attnviz model --model assets/models/{NAME} --ids "$(/usr/bin/python3 -c 'import json; print(",".join(map(str, json.load(open("assets/models/{NAME}/head_scores.json"))["probe_random_seed0"]["ids"])))')" --weights A.npy --logits Z.npy
    /usr/bin/python3 -c 'import numpy as np; A = np.load("A.npy"); L = {s['repeat_len']}; t = np.arange(L + 1, 2 * L + 1); print(A[{il}, {ih}, t, t - L + 1].mean(), A[{pl}, {phd}, np.arange(1, 2 * L + 1), np.arange(0, 2 * L)].mean())'

The first number is layer {il} head {ih}'s induction score on that probe
({s['probe_random_seed0']['induction']:.4f} in torch), the second layer {pl} head {phd}'s previous-token
score on it ({s['probe_random_seed0']['previous_token']:.4f}). For the English probe, the ids of the
first held-out verse are `attnviz tokenize --model assets/models/{NAME} --text
{json.dumps(s['probe_english0']['text'])}` (BOS included):
`{' '.join(map(str, s['probe_english0']['tokenize']))}`; the probe is those ids and then the
same ids without the BOS again (`probe_english0` in `head_scores.json`; layer {il} head {ih}:
{s['probe_english0']['induction']:.4f}). Adding `--ablate {il}:{ih}` changes the logits so the
second copy's next-token probability drops as in the ablation section.

## Licence
The text is in the public domain. The weights, the tokenizer and this card are the attnviz
project's, under the project's MIT licence.
"""
    tmp = os.path.join(model_dir, "README.md.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(model_dir, "README.md"))
