"""The Gemma-2 measurements and the model card (README.md) of kjv-sp-gemma2 (train_gemma2.py).

measure() adds to llama_scores.py's head scores what the Gemma 2 layout brings:
  window     per head, on the random probe of seed 0 (BOS + S + S, L = 100) and on the two preset
             texts: the share of each query's weight on keys more than W - 1 back (j <= i - W,
             the keys a local layer cannot see), averaged over the queries i >= W. Local layers
             must give 0 exactly; a global head that copies from far back gives most of it.
  softcap    per head, on the preset texts: the scaled scores s = q.k / sqrt(32) of the allowed
             cells (causal, and the window in local layers) before the cap c tanh(s / c): the
             share with |s| > 0.8 c, the largest |s|, the largest change |s - c tanh(s / c)|.
The preset texts are the ones assets/scenes/24-local-and-global-layers.json and
25-soft-capping.json open on.
"""
import json
import os

import numpy as np

import gemma2_lm
import llama_scores

NAME = "kjv-sp-gemma2"
BOS = 1
# assets/scenes/24-local-and-global-layers.json: a held-out verse (Hebrews 11:1) said twice,
# its second copy more than the window after the first
LOCAL_GLOBAL_TEXT = ("Now faith is the substance of things hoped for, the evidence of things not "
                     "seen. Now faith is the substance of things hoped for, the evidence of "
                     "things not seen.")
# assets/scenes/25-soft-capping.json: a held-out verse (Revelation 21:4)
SOFTCAP_TEXT = ("And God shall wipe away all tears from their eyes; and there shall be no more "
                "death, neither sorrow, nor crying.")


def encode(model_dir, text):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    return [BOS] + sp.encode(text)


def beyond_window(A, W):
    """A [L, H, T, T] -> [L, H]: mean over queries i >= W of the weight on keys j <= i - W."""
    T = A.shape[-1]
    out = np.zeros(A.shape[:2])
    for i in range(W, T):
        out += A[:, :, i, :i - W + 1].sum(-1)
    return out / max(1, T - W)


def cap_stats(S, c):
    """S [L, H, T, T] scaled scores, -inf where masked -> dict of [L, H] arrays."""
    ok = np.isfinite(S)
    s = np.where(ok, S, 0.0).astype(np.float64)
    n = ok.sum(axis=(-1, -2))
    change = np.abs(s - c * np.tanh(s / c)) * ok
    return {"saturated": ((np.abs(s) > 0.8 * c) & ok).sum(axis=(-1, -2)) / n,
            "max_abs": np.abs(s).max(axis=(-1, -2)),
            "max_change": change.max(axis=(-1, -2))}


def measure(model, model_dir, scores):
    cfg = model.cfg
    W, c = cfg["sliding_window"], cfg["attn_logit_softcapping"]
    local = gemma2_lm.local_layers(cfg)
    texts = {"local_global": LOCAL_GLOBAL_TEXT, "softcap": SOFTCAP_TEXT}
    out = {"sliding_window": W, "attn_logit_softcapping": c,
           "local_layers": [l for l, x in enumerate(local) if x],
           "global_layers": [l for l, x in enumerate(local) if not x], "texts": {}}
    probes = {"random_seed0": scores["probe_random_seed0"]["ids"],
              "english0": scores["probe_english0"]["ids"]}
    for name, text in texts.items():
        probes[name] = encode(model_dir, text)
    for name, ids in probes.items():
        A, S, _ = gemma2_lm.weights_and_scores(model, ids)
        e = {"ids": ids, "T": len(ids), "beyond_window": beyond_window(A, W).round(4).tolist()}
        if name in texts:
            e["text"] = texts[name]
            e.update({k: v.round(4).tolist() for k, v in cap_stats(S, c).items()})
        out["texts"][name] = e
    # the global head that reaches back furthest on the local/global text, and the head whose
    # scores saturate most on the soft-capping text
    bw = np.array(out["texts"]["local_global"]["beyond_window"])
    g = out["global_layers"]
    gl, gh = np.unravel_index(np.argmax(bw[g]), bw[g].shape)
    sat = np.array(out["texts"]["softcap"]["saturated"])
    sl, sh = np.unravel_index(np.argmax(sat), sat.shape)
    pl, ph = scores["best_previous_token_head"]  # the soft-capping preset's head
    out["summary"] = {
        "long_range_head": [int(g[gl]), int(gh)],
        "long_range_beyond_window": float(bw[g[gl], gh]),
        "local_layers_beyond_window_max": float(max(
            np.array(e["beyond_window"])[out["local_layers"]].max()
            for e in out["texts"].values())),
        "softcap_head": [int(sl), int(sh)],
        "softcap_saturated": float(sat[sl, sh]),
        "softcap_max_abs": out["texts"]["softcap"]["max_abs"][sl][sh],
        "softcap_max_change": out["texts"]["softcap"]["max_change"][sl][sh],
        "softcap_preset_head": [int(pl), int(ph)],
        "softcap_preset_saturated": out["texts"]["softcap"]["saturated"][pl][ph],
        "softcap_preset_max_abs": out["texts"]["softcap"]["max_abs"][pl][ph],
        "softcap_preset_max_change": out["texts"]["softcap"]["max_change"][pl][ph],
    }
    return out


def write(model_dir, log, s):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    g = s["gemma2"]
    sm = g["summary"]
    ph = log["phases"]
    final = ph[-1]["eval"][-1]
    size = os.path.getsize(os.path.join(model_dir, "model.safetensors"))
    pl, phd = s["best_previous_token_head"]
    il, ih = s["best_induction_head"]
    ll, lh = sm["long_range_head"]
    sl, sh = sm["softcap_head"]
    W, c = g["sliding_window"], g["attn_logit_softcapping"]
    lg, sc = g["texts"]["local_global"], g["texts"]["softcap"]
    wall = log.get("total_seconds", log["train_seconds"]) / 60
    cpu = log.get("total_cpu_seconds", log["train_cpu_seconds"]) / 60
    steps = sum(p["recipe"]["steps"] for p in ph)
    tokens = sum(p["tokens"] for p in ph)
    cp, ca = s["copy_prob"], s["copy_prob_ablated"]
    key = f"{il}:{ih}"
    T = llama_scores.table
    curve = os.path.exists(os.path.join(model_dir, "loss_curve.png"))
    curve_file = ", `loss_curve.png`" if curve else ""
    curve_img = ("![loss curve](loss_curve.png)\n" if curve else
                 "(No loss curve: matplotlib was missing when it was trained; the batch losses and "
                 "evaluations are in `training_log.json`.)\n")
    phases = "\n".join(
        f"| {p['recipe']['phase']} | {p['recipe']['steps']} | {p['recipe']['batch']} x "
        f"{p['recipe']['seq']} | {p['recipe']['lr']} ({p['recipe']['warmup']}) | "
        f"{p['recipe']['p_text']:.0%} / {p['recipe']['p_text_with_copy']:.0%} / "
        f"{p['recipe']['p_random_repeat']:.0%} / {p['recipe']['p_text_repeat']:.0%} | "
        f"{p['recipe']['seed']} |" for p in ph)
    text = f"""# {NAME}: a small Gemma 2 trained by the attnviz project

A small model in the Gemma 2 layout (Hugging Face `Gemma2ForCausalLM`, `model_type` "gemma2"),
trained on the King James Bible on the CPU by `tools/train/train_gemma2.py` ({wall:.1f} minutes
of wall time, {cpu:.1f} of CPU time, one thread, scores included), so that attnviz can show the
two things Gemma 2 adds to a LLaMA-style decoder on real learned attention: **local and global
layers** and **soft-capped attention scores**. It is the sibling of `kjv-sp-llama` and uses its
SentencePiece tokenizer unchanged (the three tokenizer files are copies; vocabulary
{cfg['vocab_size']}, byte fallback; see that card for how it was made and checked).

- **Layers {', '.join(map(str, g['local_layers']))} are local, layers
  {', '.join(map(str, g['global_layers']))} global** (Gemma 2's rule: even layers slide, odd
  layers see the whole context; `layer_types` in config.json spells it out). A local layer's
  query i sees the keys i - {W - 1} .. i (`sliding_window` {W}, the last {W} tokens); a global
  layer's sees 0 .. i.
- **Attention scores are soft-capped at c = {c:g}**: the scaled score s = q.k / sqrt({cfg['query_pre_attn_scalar']})
  (`query_pre_attn_scalar` {cfg['query_pre_attn_scalar']} = head_dim) becomes c tanh(s / c)
  before the mask and the softmax. Real Gemma 2 uses c = 50, sized for scores of a large model;
  a tiny model has no reason to go near it, and a cap it never reaches would change nothing
  visible. So a cap of {c:g} was trained in from the first step instead (the model learns
  under it, as Gemma 2 learns under its 50), and on text most heads push their scores far
  into it: once a score saturates nothing pulls it back, and the raw scores grew to many times
  the cap (below). The final logits are capped at {cfg['final_logit_softcapping']:g} as in
  Gemma 2.

## Files
- `config.json`: HF `Gemma2Config`: {cfg['num_hidden_layers']} layers, hidden_size
  {cfg['hidden_size']}, intermediate_size {cfg['intermediate_size']} (GeGLU, tanh GELU),
  {cfg['num_attention_heads']} query heads over {cfg['num_key_value_heads']} key/value heads of
  head_dim {cfg['head_dim']}, max_position_embeddings {cfg['max_position_embeddings']},
  rope_theta {cfg['rope_theta']:g}, rms_norm_eps {cfg['rms_norm_eps']:g}, sliding_window {W},
  attn_logit_softcapping {c:g}, final_logit_softcapping {cfg['final_logit_softcapping']:g},
  query_pre_attn_scalar {cfg['query_pre_attn_scalar']}, `"tie_word_embeddings": false`.
- `model.safetensors`: F32, {size / 1e6:.2f} MB, {log['params']:,} parameters, HF key names
  (the four norms of a layer: `input_layernorm`, `post_attention_layernorm`,
  `pre_feedforward_layernorm`, `post_feedforward_layernorm`, each applied as (1 + w)).
- `tokenizer.model`, `tokenizer.json`, `tokenizer_config.json`: kjv-sp-llama's.
- `training_log.json` (every batch loss, the evaluations, the recipe, timings),
  `head_scores.json` (the tables below; the Gemma measurements under `gemma2`){curve_file}.

## Architecture, as `tools/train/gemma2_lm.py` writes it
Embeddings times sqrt({cfg['hidden_size']}); per layer x += post_attn_norm(attention(input_norm(x)))
and x += post_ffw_norm(down(gelu_tanh(gate(n)) * up(n))) with n = pre_ffw_norm(x); rotate-half
RoPE; logits = {cfg['final_logit_softcapping']:g} tanh(z / {cfg['final_logit_softcapping']:g}). Written from the Gemma 2 report and
the HF model description; checked against an independent float64 reference
(`tests/model/decoder_families_reference.py`) by `tests/model/shipped_gemma2_test.cpp`.

## Recipe
`train_llama.py`'s data and phases (imported, not copied): the King James Bible split as for
kjv-sp-llama (training Genesis-Philemon, {log['train_tokens']:,} tokens; held out
Hebrews-Revelation, {log['heldout_tokens']:,} tokens), every sequence BOS + text, text with a
copied span, repeated random ids or a repeated passage; AdamW restarted each phase, gradient
clipping 1.0, weight decay 0.01 on matrices. The last two phases are shortened to fit 12
minutes on one thread with four layers. Init: normal(0, 0.02) matrices, embeddings normal(0, 1/sqrt(d)) (so
that after the sqrt(d) factor they are about 1 a component), the pre-norms' weights 0 (a scale
of 1) and the post-norms' scales 1/sqrt(2 x layers) = 0.354 (w = -0.646): a post-norm writes
into the residual stream at unit RMS whatever the projection before it holds, so this plays
the part of GPT-2's scaled-down residual writers. A first run with every scale at 1 had formed
no induction head after 600 short-copy steps (previous-token score 0.22) and was stopped.

| phase | steps | sequences (batch x positions) | lr (warm-up steps) | text / text with a copy / random repeat / text repeat | seed |
|---|---|---|---|---|---|
{phases}

In the short-copies phase the repeats have periods of 8 to 16 tokens, which a local layer can
reach too: the batch loss (means of 50 steps) fell from 5.4 to 3.2 between steps 450 and 750,
while the evaluations on 256-token held-out text and on the 201-token probes (copies 100 back,
out of any window) showed neither a previous-token head (at most 0.17) nor induction (at most
0.02). Both appeared in the medium and long phases, where copies lie further back than the
window: the best induction score on the probes was 0.16 after the medium phase, 0.43 and then
0.80 (layer 3 head 6) in the long one, the previous-token score 0.98 by its step 100
(evaluations in `training_log.json`). With 1300 steps rather than
kjv-sp-llama's 2000 it copies less surely than that model (below).

In all {steps} steps, {tokens / 1e6:.1f} M tokens. Trained with torch {ph[0]['machine']['torch']}
on one thread of an {ph[0]['machine']['cpu']} shared with other jobs: training
{log['train_seconds'] / 60:.1f} minutes of wall time ({log['train_cpu_seconds'] / 60:.1f} of CPU
time). Deterministic (seeded init and batches, one thread, deterministic algorithms): a second
run of the command on the same machine wrote the same `model.safetensors` bytes.

    /usr/bin/python3 tools/train/train_gemma2.py --out assets/models/{NAME}

## Losses (nats per token)
| | loss |
|---|---|
| final training text (16 windows of 256 positions) | {final['train_text']:.4f} |
| final held-out text (16 windows, Hebrews-Revelation) | {final['val_text']:.4f} |
| second copy of repeated random ids (L = 100) | {final['repeat_random_second_copy']:.4f} |
| second copy of a repeated held-out verse | {final['repeat_english_second_copy']:.4f} |
| last training batch | {ph[-1]['batch_loss'][-1]:.4f} |

(kjv-sp-llama, 3 layers and 2000 steps: 3.66 / 4.29 on the same text windows.)

{curve_img}
## Head scores
Measured by `tools/train/llama_scores.py` (the same probes and definitions as kjv-sp-llama's
card) through {s['backend']}. Layers and heads count from 0; query heads 0-3 share KV head 0,
4-7 KV head 1.
- **Previous-token** (mean A[t, t-1], 8 held-out windows of 256): best **layer {pl} head {phd},
  {s['previous_token'][pl][phd]:.3f}**.
- **Induction** (BOS + S + S, mean A[t, t-L+1] over the second copy): best of layers >= 1
  **layer {il} head {ih}, {s['induction_random'][il][ih]:.3f} on random ids (L = 100) and
  {s['induction_english'][il][ih]:.3f} on repeated held-out verses**.
- Copy probability of the second copy's next token: random ids {cp['random']:.3f}, English
  {cp['english']:.3f}; with layer {il} head {ih} zeroed {ca['random'][key]:.3f} and
  {ca['english'][key]:.3f}; with every induction head ({', '.join(s['induction_heads']) or 'none'})
  zeroed {s['copy_prob_induction_heads_ablated']['random']:.3f} and
  {s['copy_prob_induction_heads_ablated']['english']:.3f}.

Previous-token score:

{T(s['previous_token'])}

Induction score, random ids:

{T(s['induction_random'])}

Induction score, repeated held-out verse:

{T(s['induction_english'])}

## Local and global layers
The share of a query's weight on keys at least {W} back (j <= i - {W}, out of a local layer's
reach), averaged over the queries i >= {W}, on {json.dumps(LOCAL_GLOBAL_TEXT)} ({lg['T']}
tokens with BOS; the preset `24-local-and-global-layers.json`). The local layers give
exactly 0 (largest over every probe: {sm['local_layers_beyond_window_max']:g}); in the global
layers **layer {ll} head {lh} puts {sm['long_range_beyond_window']:.3f}** of its weight that far
back: its second-copy queries find their token's first occurrence, more than {W} tokens back.

{T(lg['beyond_window'])}

The same on the random probe of seed 0 (L = 100, so every induction target is 99 back):

{T(g['texts']['random_seed0']['beyond_window'])}

## Soft-capping
On {json.dumps(SOFTCAP_TEXT)} ({sc['T']} tokens with BOS; the preset `25-soft-capping.json`),
the scaled scores of the allowed cells before the cap. Share with |s| > 0.8 c = {0.8 * c:g}:

{T(sc['saturated'])}

Largest |s| (the cap then gives at most {c:g}):

{T(sc['max_abs'], '{:.2f}')}

Largest change |s - c tanh(s / c)|:

{T(sc['max_change'], '{:.2f}')}

The head that saturates most, layer {sl} head {sh}: {sm['softcap_saturated']:.1%} of its
scores beyond 0.8 c, scores up to |s| = {sm['softcap_max_abs']:.2f}, which the cap moves by up to
{sm['softcap_max_change']:.2f}. The preset shows the previous-token head, **layer {sm['softcap_preset_head'][0]}
head {sm['softcap_preset_head'][1]}: {sm['softcap_preset_saturated']:.1%} of its scores beyond 0.8 c, up to
|s| = {sm['softcap_preset_max_abs']:.2f}, moved by the cap by up to
{sm['softcap_preset_max_change']:.2f}**: before the cap its previous-token scores stand far
above the rest; after it they sit against +{c:g} and most of the others against -{c:g}. The cap
binds hard in this model: with nothing to stop them, the raw scores grew well past it during
training, and the softmax only sees the capped values (a gap of at most {2 * c:g}).

## Licence
The text is in the public domain. The weights and this card are the attnviz project's, under the
project's MIT licence; the tokenizer is kjv-sp-llama's.
"""
    tmp = os.path.join(model_dir, "README.md.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(model_dir, "README.md"))
