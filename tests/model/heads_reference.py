#!/usr/bin/python3
"""The head finder's float64 reference (`attnviz heads`, docs/head-finder.md), written from the
contract, not from attnviz's code. heads_test.cpp runs it at test time:

    /usr/bin/python3 tests/model/heads_reference.py OUT_DIR

It writes under OUT_DIR:
  llama/        a random-init LLaMA folder (2 layers, 4 query / 2 KV heads, F32) with a
                Llama-2-style SentencePiece tokenizer.json (make_llama_fixtures.py's)
  bert/         a random-init BERT folder (2 layers, 4 heads) with a WordPiece vocab.txt
                (encoder_reference.py's)
  bart/         config.json of a BART encoder-decoder (refused before any weight is read)
  vit/          config.json of a ViT image model (refused)
  corpus.txt    the decoder's documents, separated by blank lines (some runs of several blank
                lines and whitespace-only lines, multi-line documents, a whitespace-only one)
  corpus.jsonl  the same documents as {"id", "text"} lines (and a blank line)
  corpus_dir/   the same documents as 000.txt, 001.txt, ... (and a README.md, not a .txt)
  bert.jsonl    the encoder's documents in the field "sentence"
  empty.txt     blank lines only; bad.jsonl: line 3 is not JSON
  headvis_tree/ a tree in HeadVis's layout (config.json, scatter_data.json with nulls and a
                metric of its own, heads/) for `attnviz heads --tree DIR --top METRIC`
and cases.json: {"cases": [...]}, one case a run ("decoder", "decoder_jsonl", "decoder_dir",
"encoder") with the command's options and what the contract says the run gives: every head's
seven metrics (null when undefined), mean_max_activation, the warm-up W, the interval
boundaries, the max-activation histogram, and the top interval's kept sequences (ids, order,
seq_len, tokens, sparse indices, values before and after rounding). Plus "headvis_tree": the
expected `--top` lines of that tree.

The attention weights come from float64 torch passes of the published architectures
(llama_reference.forward for LLaMA, encoder_reference.forward for BERT). The metrics (A a head's
weights on one sequence of T ids; sums over every counted sequence):
  self_attention_score  sum A[i,i] / sum T
  prev_token_score      sum_{i>=1} A[i,i-1] / sum (T-1)
  pattern_entropy       sum -A ln A / sum T
  qk_distance           sum A |i-j| / sum T;  qk_distance_variance  sum A (i-j)^2 / sum T - qk^2
  induction_score       per query i, each p < i with id[p] = id[i]: A[i,p+1] if >= threshold;
                        over the number of queries that have such a p
  first_token_share     sum A[i,0] / sum T
  max activation        max A[i,j], i >= 1, j >= 1; mean_max_activation its mean
Sampling: W = max(1, min(2000, max(50, N // 10))); boundaries sorted(warm)[min(round(kW/K), W-1)];
interval min(bisect_right(boundaries, max), K-1); the top interval keeps the top_samples largest
(ties: lower id). Self-checks assert that no decision the test compares (threshold, top-k cut,
rounding to 4 decimals, interval and top-interval cut, histogram bin) sits within float32's
error of its edge, so attnviz's float32 pass must make the same ones.
"""
import bisect
import json
import math
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import encoder_reference as enc  # noqa: E402
import llama_reference as ref  # noqa: E402
from make_gpt2_fixtures import stored  # noqa: E402
from make_llama_fixtures import (base_config, random_weights, spm_encode,  # noqa: E402
                                 spm_tokenizer, write_spm_tokenizer, write_weights)

METRICS = ["self_attention_score", "prev_token_score", "pattern_entropy", "qk_distance",
           "qk_distance_variance", "induction_score", "first_token_share"]
MARGIN = 2e-6  # how far every compared decision must be from its edge (values near 1)
REL = 1e-5     # the same relative to a small edge (float32 weights err relatively)


# ---------------------------------------------------------------------------------------------
# Corpora, read as the contract says (independently of how they were written)


def blank(s):
    return s.strip(" \t\r\n\f\v") == ""


def read_text_corpus(path):
    docs, cur = [], None
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if blank(line):
            if cur is not None:
                docs.append(cur)
            cur = None
        else:
            cur = line if cur is None else cur + "\n" + line
    if cur is not None:
        docs.append(cur)
    return [d for d in docs if not blank(d)]


def read_jsonl_corpus(path, field):
    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if blank(line):
                continue
            d = json.loads(line)[field]
            if not blank(d):
                docs.append(d)
    return docs


def read_dir_corpus(path):
    docs = []
    for name in sorted(n for n in os.listdir(path) if n.endswith(".txt")):
        with open(os.path.join(path, name), encoding="utf-8", newline="") as f:
            d = f.read()
        if not blank(d):
            docs.append(d)
    return docs


# ---------------------------------------------------------------------------------------------
# The head finder, from the contract


def warmup(n):
    return max(1, min(2000, max(50, n // 10)))


def sequences_of(docs, encode, seq_len, limit=None):
    seqs = []
    for d in docs:
        if limit is not None and len(seqs) >= limit:
            break
        ids = encode(d)[:seq_len]
        if len(ids) >= 2:
            seqs.append(ids)
    return seqs


def sparse(A, k, thr):
    """(indices, rounded values, raw values) of a head's weights A [T, T] (float64)."""
    T = A.shape[0]
    idx, vals, raw = [], [], []
    for i in range(T):
        row = [float(v) for v in A[i]]
        cand = sorted((j for j in range(T) if row[j] >= thr), key=lambda j: (-row[j], j))
        # The threshold and the top-k cut must not be within float error of a decision.
        for j in range(T):
            assert abs(row[j] - thr) > REL * thr, ("threshold too close", i, j, row[j])
        if len(cand) > k:
            assert row[cand[k - 1]] - row[cand[k]] > MARGIN, ("top-k tie", i)
        for j in sorted(cand[:k]):
            v = round(row[j], 4)
            idx.append(i * T + j)
            vals.append(v)
            raw.append(row[j])
    return idx, vals, raw


def head_finder(seqs, weights_of, L, H, K, top_samples, sparse_k, sparse_thr, ind_thr,
                pieces=None):
    """Runs the contract on the sequences; weights_of(ids) -> [L, H, T, T] float64."""
    N = len(seqs)
    W = warmup(N)
    sums = {(l, h): {m: 0.0 for m in METRICS} for l in range(L) for h in range(H)}
    maxes = {(l, h): [] for l in range(L) for h in range(H)}
    ind_sum = {(l, h): 0.0 for l in range(L) for h in range(H)}
    sum_t = sum_t1 = ind_queries = 0
    all_weights = []
    for ids in seqs:
        T = len(ids)
        att = weights_of(ids)
        all_weights.append(att)
        sum_t += T
        sum_t1 += T - 1
        earlier = [[p for p in range(i) if ids[p] == ids[i] and p + 1 < T] for i in range(T)]
        ind_queries += sum(1 for e in earlier if e)
        i_idx = torch.arange(T, dtype=torch.float64)[:, None]
        j_idx = torch.arange(T, dtype=torch.float64)[None, :]
        for l in range(L):
            for h in range(H):
                A = att[l, h]
                s = sums[(l, h)]
                s["self_attention_score"] += float(A.diagonal().sum())
                s["prev_token_score"] += float(A.diagonal(-1).sum())
                logs = torch.where(A > 0, A.clamp_min(1e-300).log(), torch.zeros_like(A))
                s["pattern_entropy"] += float(-(A * logs).sum())
                s["qk_distance"] += float((A * (i_idx - j_idx).abs()).sum())
                s["qk_distance_variance"] += float((A * (i_idx - j_idx) ** 2).sum())
                s["first_token_share"] += float(A[:, 0].sum())
                for i in range(T):
                    for p in earlier[i]:
                        v = float(A[i, p + 1])
                        assert abs(v - ind_thr) > REL * ind_thr, ("induction threshold", v)
                        if v >= ind_thr:
                            ind_sum[(l, h)] += v
                maxes[(l, h)].append(float(A[1:, 1:].max()))
    heads = []
    for l in range(L):
        for h in range(H):
            s, mx = sums[(l, h)], maxes[(l, h)]
            m = {k: s[k] / sum_t for k in METRICS}
            m["prev_token_score"] = s["prev_token_score"] / sum_t1
            m["qk_distance_variance"] = s["qk_distance_variance"] / sum_t - m["qk_distance"] ** 2
            m["induction_score"] = ind_sum[(l, h)] / ind_queries if ind_queries else None
            seen = mx[:W]
            srt = sorted(seen)
            n = len(srt)
            bounds = [srt[min(round(k * n / K), n - 1)] for k in range(1, K)]
            hist = [0] * 50
            for v in mx:
                b = min(math.floor(50 * v), 49)
                assert abs(50 * v - round(50 * v)) > MARGIN * 50 or round(50 * v) >= 50, ("histogram edge", v)
                hist[b] += 1
            top = []
            if N > W:
                later = list(range(W, N))
                for i in later:
                    for b in bounds:
                        assert abs(mx[i] - b) > MARGIN or i < W, ("interval edge", l, h, i, mx[i], b, bounds)
                top = [i for i in later if min(bisect.bisect_right(bounds, mx[i]), K - 1) == K - 1]
                top.sort(key=lambda i: (-mx[i], i))
                if len(top) > top_samples:
                    assert mx[top[top_samples - 1]] - mx[top[top_samples]] > MARGIN, "top cut"
                top = top[:top_samples]
            kept = []
            for i in top:
                idx, vals, raw = sparse(all_weights[i][l, h], sparse_k, sparse_thr)
                kept.append({"sequence_id": i, "interval": K, "seq_len": len(seqs[i]),
                             "max_activation": mx[i], "attention_indices": idx,
                             "attention_values": vals, "raw_values": raw,
                             "ids": [int(t) for t in seqs[i]],
                             "tokens": [pieces(t) for t in seqs[i]] if pieces else None})
            heads.append({"layer": l, "head": h, "metrics": m,
                          "mean_max_activation": sum(mx) / len(mx), "boundaries": bounds,
                          "histogram": hist, "top": kept})
    return {"N": N, "W": W, "heads": heads}


def top_lines(values):
    """`--top` lines of [(layer, head, value or None)], largest first, undefined last."""
    order = sorted(values, key=lambda t: (t[2] is None, -(t[2] if t[2] is not None else 0)))
    return ["%d\t%d\t%s" % (l, h, "nan" if v is None else "%.6f" % v) for l, h, v in order]


# ---------------------------------------------------------------------------------------------
# Pieces as `tokenize --pieces` prints them


def printable(b):
    out, i = [], 0
    while i < len(b):
        c = b[i]
        n = 1 if c < 0x80 else 2 if c >> 5 == 6 else 3 if c >> 4 == 14 else 4 if c >> 3 == 30 else 0
        if n > 1:
            try:
                out.append(b[i:i + n].decode("utf-8"))
                i += n
                continue
            except UnicodeDecodeError:
                pass
        if c == 0x0A:
            out.append("\\n")
        elif c == 0x0D:
            out.append("\\r")
        elif c == 0x09:
            out.append("\\t")
        elif c < 0x20 or c == 0x7F or c >= 0x80:
            out.append("\\x%02X" % c)
        else:
            out.append(chr(c))
        i += 1
    return "".join(out)


def spm_piece(token):
    if token.startswith("<0x") and token.endswith(">") and len(token) == 6:
        return printable(bytes([int(token[3:5], 16)]))
    return printable(token.replace("\u2581", " ").encode("utf-8"))


# ---------------------------------------------------------------------------------------------


def decoder_documents(rng, encode):
    """Documents of the LLaMA tokenizer's words, some with a repeated span (induction). No two
    begin with the same two tokens: a causal head's rows 1 and 2 depend on those alone, and a max
    activation found there would tie exactly across documents (ties float32 need not keep)."""
    words = ["the", "cat", "sat", "on", "mat", "hat", "in", "time", "fell", "once", "upon", "a",
             "cafe", "dog", "to", "it", "is", "of", "tea", "fish"]
    single = [w for w in words if len(encode(w)) == 1]
    pairs = [(a, b) for a in single for b in single if a != b]
    rng.shuffle(pairs)
    docs = []
    for d in range(84):
        n = rng.randint(1, 12)
        ws = list(pairs[d]) + [rng.choice(words) for _ in range(n)]
        if d % 3 == 0:
            ws = ws + ws[: rng.randint(2, len(ws))]
        text = " ".join(ws)
        if d % 7 == 3:  # two lines
            sp = text.find(" ", len(text) // 2)
            if sp > 0:
                text = text[:sp] + "\n" + text[sp + 1:]
        if d % 11 == 5:
            text += "."
        docs.append(text)
    return docs


def write_text_corpus(path, docs):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n")
        for i, d in enumerate(docs):
            f.write(d + "\n")
            f.write(["\n", "\n\n", "  \t\n", "\n \n\n"][i % 4])
            if i == 10:
                f.write("   \n\n")  # a whitespace-only stretch between documents


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(20240611)
    cases = []

    # ---- The decoder: a random LLaMA (GQA) with a SentencePiece tokenizer
    vocab, merges = spm_tokenizer()
    V = len(vocab)
    cfg = base_config("llama", 32, 64, 2, 4, 2, V, True, "F32", 10000.0, 1, 2)
    cfg["max_position_embeddings"] = 64
    gen = torch.Generator().manual_seed(7)
    w64 = random_weights(cfg, gen, False)
    for k in w64:  # softer than the fixtures' heads, so max activations spread below 1
        if k.endswith(("q_proj.weight", "k_proj.weight")):
            w64[k] = w64[k] * 0.6
    folder = os.path.join(out, "llama")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_weights(folder, w64, "F32", 1)
    write_spm_tokenizer(folder, vocab, merges)
    w = {k: stored(v, "F32") for k, v in w64.items()}
    inv = {i: t for t, i in vocab.items()}

    # No BOS: the tokenizer adds nothing (post-processor and add_bos_token off), so each
    # document's first two tokens differ (see decoder_documents).
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tj["post_processor"] = None
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, indent=1, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    tc["add_bos_token"] = False
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)

    def encode(d):
        return spm_encode(d, vocab, merges)[1:]

    docs = decoder_documents(rng, encode)
    write_text_corpus(os.path.join(out, "corpus.txt"), docs)
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": i, "text": d}) + "\n")
            if i == 4:
                f.write("\n")
    os.makedirs(os.path.join(out, "corpus_dir"), exist_ok=True)
    for i, d in enumerate(docs):
        with open(os.path.join(out, "corpus_dir", "%03d.txt" % i), "w", encoding="utf-8",
                  newline="") as f:
            f.write(d)
    with open(os.path.join(out, "corpus_dir", "README.md"), "w") as f:
        f.write("not a document\n")
    # The three formats hold the same documents.
    read = read_text_corpus(os.path.join(out, "corpus.txt"))
    assert read == docs, "corpus.txt"
    assert read_jsonl_corpus(os.path.join(out, "corpus.jsonl"), "text") == docs
    assert read_dir_corpus(os.path.join(out, "corpus_dir")) == docs

    def llama_weights(ids):
        att, _ = ref.forward(cfg, w, ids)
        return att

    seq_len = 20
    opts = {"intervals": 3, "samples": 2, "top_samples": 4, "sparse_topk": 3,
            "sparse_threshold": 0.05, "induction_threshold": 0.01, "seed": 5}
    seqs = sequences_of(docs, encode, seq_len)
    assert len(seqs) > warmup(len(seqs)) + 20
    res = head_finder(seqs, llama_weights, 2, 4, opts["intervals"], opts["top_samples"],
                      opts["sparse_topk"], opts["sparse_threshold"], opts["induction_threshold"],
                      pieces=lambda t: spm_piece(inv[t]))
    res.update(name="decoder", model="llama", corpus="corpus.txt", seq_len=seq_len, options=opts,
               top_metric="prev_token_score",
               top_lines=top_lines([(h["layer"], h["head"], h["metrics"]["prev_token_score"])
                                    for h in res["heads"]]))
    cases.append(res)
    # The same documents as .jsonl and as a folder, 12 sequences: all inside the warm-up.
    small = sequences_of(docs, encode, seq_len, limit=12)
    for name, corpus in (("decoder_jsonl", "corpus.jsonl"), ("decoder_dir", "corpus_dir")):
        r = head_finder(small, llama_weights, 2, 4, opts["intervals"], opts["top_samples"],
                        opts["sparse_topk"], opts["sparse_threshold"], opts["induction_threshold"])
        r.update(name=name, model="llama", corpus=corpus, seq_len=seq_len, options=opts,
                 sequences=12)
        cases.append(r)

    # ---- The encoder: BERT with WordPiece
    torch.manual_seed(99)
    d_model, heads, layers, inner, max_pos, eps = 32, 4, 2, 64, 40, 1e-12
    bert = enc.make_params(d_model, inner, layers, enc.V, max_pos, 2)
    bcfg = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": d_model,
            "num_hidden_layers": layers, "num_attention_heads": heads,
            "intermediate_size": inner, "max_position_embeddings": max_pos,
            "vocab_size": enc.V, "type_vocab_size": 2, "layer_norm_eps": eps,
            "hidden_act": "gelu", "position_embedding_type": "absolute", "pad_token_id": 0}
    enc.write_folder(os.path.join(out, "bert"), bcfg, enc.bert_tensors(bert, "bert.", "bert"),
                     "wordpiece")
    bert32 = {k: (v.to(torch.float32).to(torch.float64) if torch.is_tensor(v) else
                  [{n: t.to(torch.float32).to(torch.float64) for n, t in L.items()} for L in v])
              for k, v in bert.items()}
    bwords = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "park", "and", "it",
              "was", "happy", "sun", "is", "bright", "in", "house"]
    bdocs = []
    for d in range(72):
        ws = [rng.choice(bwords) for _ in range(rng.randint(3, 16))]
        if d % 4 == 0:
            ws = ws + ws[:3]
        bdocs.append(" ".join(ws) + ("." if d % 2 else ""))
    with open(os.path.join(out, "bert.jsonl"), "w") as f:
        for d in bdocs:
            f.write(json.dumps({"sentence": d, "text": 0}) + "\n")

    def bert_encode(d):
        return [enc.ID["[CLS]"]] + enc.wordpiece(d) + [enc.ID["[SEP]"]]

    def bert_weights(ids):
        T = len(ids)
        att, _, _ = enc.forward(bert32, ids, [0] * T, list(range(T)), heads, eps)
        return att

    bopts = {"intervals": 2, "samples": 2, "top_samples": 3, "sparse_topk": 4,
             "sparse_threshold": 0.02, "induction_threshold": 0.05, "seed": 0}
    bseq_len = 16
    bseqs = sequences_of(bdocs, bert_encode, bseq_len)
    r = head_finder(bseqs, bert_weights, layers, heads, bopts["intervals"], bopts["top_samples"],
                    bopts["sparse_topk"], bopts["sparse_threshold"], bopts["induction_threshold"])
    r.update(name="encoder", model="bert", corpus="bert.jsonl", field="sentence",
             seq_len=bseq_len, options=bopts, top_metric="self_attention_score",
             top_lines=top_lines([(h["layer"], h["head"], h["metrics"]["self_attention_score"])
                                  for h in r["heads"]]))
    cases.append(r)

    # ---- Models the head finder refuses (config.json alone: refused before the weights)
    os.makedirs(os.path.join(out, "bart"), exist_ok=True)
    with open(os.path.join(out, "bart", "config.json"), "w") as f:
        json.dump({"model_type": "bart", "architectures": ["BartForConditionalGeneration"],
                   "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
                   "encoder_attention_heads": 4, "decoder_attention_heads": 4,
                   "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "vocab_size": 64,
                   "max_position_embeddings": 64, "activation_function": "gelu",
                   "scale_embedding": False, "pad_token_id": 1, "bos_token_id": 0,
                   "eos_token_id": 2, "decoder_start_token_id": 2,
                   "tie_word_embeddings": True}, f)
    os.makedirs(os.path.join(out, "vit"), exist_ok=True)
    with open(os.path.join(out, "vit", "config.json"), "w") as f:
        json.dump({"model_type": "vit", "architectures": ["ViTForImageClassification"],
                   "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "image_size": 32, "patch_size": 16}, f)

    # ---- Bad corpora
    with open(os.path.join(out, "empty.txt"), "w") as f:
        f.write("\n  \n\t\n\n")
    with open(os.path.join(out, "bad.jsonl"), "w") as f:
        f.write('{"text": "the cat"}\n{"text": "a dog"}\n{"text": "broken\n{"text": "x"}\n')

    # ---- A tree in HeadVis's layout: its own metric, nulls, ties, heads not in order
    tree = os.path.join(out, "headvis_tree")
    os.makedirs(os.path.join(tree, "heads"), exist_ok=True)
    entries = [(0, 1, 0.25, 0.5), (0, 0, 0.7512, None), (1, 2, None, 0.1), (1, 0, 0.25, 0.9),
               (2, 3, 0.9, 0.3), (0, 2, -0.125, None), (1, 1, 0.0, 0.2)]
    with open(os.path.join(tree, "config.json"), "w") as f:
        json.dump({"model_name": "gpt2", "dataset_name": "wiki", "n_layers": 3, "n_heads": 4,
                   "n_intervals": 5, "heads": [[l, h] for l, h, _, _ in entries],
                   "metrics": ["prev_token_score", "my_score"],
                   "metric_descriptions": {"prev_token_score": "p", "my_score": "m"},
                   "head_data_pattern": "L{layer}H{head}.json", "has_umap": False,
                   "umap_heads": [], "custom_plots": [], "custom_tables": [],
                   "statistics_display": [], "pipeline_config": {}}, f)
    with open(os.path.join(tree, "scatter_data.json"), "w") as f:
        json.dump([{"layer": l, "head": h, "prev_token_score": a, "my_score": b}
                   for l, h, a, b in entries], f)
    for l, h, _, _ in entries:
        with open(os.path.join(tree, "heads", "L%dH%d.json" % (l, h)), "w") as f:
            json.dump({"sequences": [], "statistics": {"n_samples": 0}}, f)
    # One head file as HeadVis's pipeline writes it (no token ids, no attnviz fields): read back
    # by the app's Head finder (readHeadFile).
    headvis_file = {
        "sequences": [
            {"sequence_id": 7, "interval": 2, "tokens": ["<s>", " The", " cat", "\\n"],
             "attention_indices": [4, 8, 9, 13, 14], "attention_values": [1.0, 0.25, 0.75, 0.5, 0.5],
             "seq_len": 4, "max_activation": 0.75},
            {"sequence_id": 3, "interval": 5, "tokens": ["<s>", " a", " a"],
             "attention_indices": [3, 7], "attention_values": [1.0, 0.9], "seq_len": 3,
             "max_activation": 0.9}],
        "qk_distance_histogram": {"bin_edges": [0, 1, 2, 4], "bin_values": [1.5, 2.25, 0.0]},
        "top_query_tokens": [{"token": " cat", "weight": 1.0}, {"token": " a", "weight": 0.9}],
        "top_key_tokens": [{"token": "<s>", "weight": 2.15}],
        "histogram": {"bin_edges": [0.0, 0.5, 1.0], "bin_values": [0, 2]},
        "statistics": {"n_samples": 2, "mean_max_activation": 0.825}}
    with open(os.path.join(tree, "heads", "L1H0.json"), "w") as f:
        json.dump(headvis_file, f)
    cases.append({"name": "headvis_tree", "head_file": headvis_file,
                  "prev_token_score": top_lines([(l, h, a) for l, h, a, _ in entries]),
                  "my_score": top_lines([(l, h, b) for l, h, _, b in entries])})

    # The boundary index and the warm-up as Python computes them (round: half to even).
    cases.append({"name": "boundary_index",
                  "table": [[k, W, K, min(round(k * W / K), W - 1)]
                            for W in range(1, 121) for K in range(2, 10) for k in range(1, K)],
                  "warmup": [[n, warmup(n)] for n in (0, 1, 49, 500, 509, 510, 999, 1000,
                                                      19999, 20000, 20010, 10 ** 6)]})

    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
