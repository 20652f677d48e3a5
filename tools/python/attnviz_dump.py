"""Write attention dumps that attnviz opens (`attnviz DUMP.safetensors`,
`attnviz export --dump DUMP --layer L`).

Needs numpy; torch only when given torch tensors or a model to capture. Uses the `safetensors`
package when it is installed and writes the format itself otherwise.

Hugging Face, two lines:

    out = model(**inputs, output_attentions=True)
    attnviz_dump.save("bert.safetensors", out.attentions,
                      tokens=tokenizer.convert_ids_to_tokens(inputs["input_ids"][0]))

Any PyTorch model built on nn.MultiheadAttention, with no change to its code:

    with attnviz_dump.capture(model) as rec:
        model(src, tgt)
    rec.save("transformer.safetensors", tokens=tgt_words, key_tokens=src_words)

The format (see docs/dumps.md): per layer l a tensor attn.<l> of shape
[H, T_q, T_k] (float32 or float16), and __metadata__ with format_version, tokens, key_tokens,
layer_names, layer_axes and model, the lists as JSON text.
"""
import contextlib
import inspect
import json
import os
import struct
import tempfile

import numpy as np

FORMAT_VERSION = "1"
__all__ = ["save", "capture", "Recorder", "FORMAT_VERSION"]


def _to_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    detach = getattr(x, "detach", None)
    if detach is not None:  # a torch tensor
        return detach().to("cpu").float().numpy()
    return np.asarray(x)


def _layer_weights(a, batch):
    """One layer's weights as [H, T_q, T_k]: a [B, H, T_q, T_k] array loses its batch axis
    (index `batch`), a [T_q, T_k] array becomes one head."""
    a = _to_numpy(a)
    if a.ndim == 4:
        if not 0 <= batch < a.shape[0]:
            raise ValueError(f"batch index {batch} is out of range for shape {a.shape}")
        a = a[batch]
    elif a.ndim == 2:
        a = a[None]
    if a.ndim != 3:
        raise ValueError(f"expected [B, H, T_q, T_k], [H, T_q, T_k] or [T_q, T_k], got {a.shape}")
    return a


def _positions(n):
    return [str(i) for i in range(n)]


def _write_safetensors(path, tensors, metadata):
    """tensors: list of (name, C-contiguous float32/float16 array); written atomically."""
    try:
        from safetensors.numpy import save_file
    except ImportError:
        save_file = None
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".attnviz-dump-", dir=folder)
    try:
        if save_file is not None:
            os.close(fd)
            fd = None
            save_file({n: np.ascontiguousarray(a) for n, a in tensors}, tmp, metadata=metadata)
        else:
            dtypes = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}
            header, offset = {"__metadata__": metadata}, 0
            blobs = []
            for name, a in tensors:
                raw = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
                header[name] = {"dtype": dtypes[a.dtype], "shape": list(a.shape),
                                "data_offsets": [offset, offset + len(raw)]}
                blobs.append(raw)
                offset += len(raw)
            text = json.dumps(header, ensure_ascii=False).encode("utf-8")
            text += b" " * ((8 - len(text) % 8) % 8)  # the data starts 8-aligned
            with os.fdopen(fd, "wb") as f:
                fd = None
                f.write(struct.pack("<Q", len(text)))
                f.write(text)
                for b in blobs:
                    f.write(b)
        os.replace(tmp, path)
    except BaseException:
        if fd is not None:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(path, attentions, tokens=None, key_tokens=None, names=None, model=None, batch=0,
         axes=None, dtype=np.float32):
    """Write an attention dump.

    attentions: a Hugging Face `attentions` tuple (per layer [B, H, T_q, T_k]; `batch` picks the
        sequence), a list of arrays or tensors ([H, T_q, T_k] or [T_q, T_k]), or the per-head
        weights of nn.MultiheadAttention (need_weights=True, average_attn_weights=False), one
        per layer.
    tokens: the query tokens (default: positions "0", "1", ...).
    key_tokens: the other sequence, for cross-attention (and an encoder's self-attention in an
        encoder-decoder); default: positions when some layer's keys do not fit `tokens`.
    names: one name per layer (default "0", "1", ...). axes: one of "self", "cross",
        "key_self" per layer (default: attnviz infers it from the shapes).
    model: the model's name. dtype: np.float32 (default) or np.float16.
    """
    if hasattr(attentions, "detach") or isinstance(attentions, np.ndarray):
        attentions = [attentions]
    layers = [_layer_weights(a, batch).astype(dtype) for a in attentions]
    if not layers:
        raise ValueError("no attention layers given")
    if tokens is None:
        square = [a for a in layers if a.shape[1] == a.shape[2]]
        tokens = _positions((square[0] if square else layers[0]).shape[2 if square else 1])
    tokens = [str(t) for t in tokens]
    if key_tokens is None:
        others = [a.shape[2] for a in layers if a.shape[2] != len(tokens)]
        key_tokens = _positions(others[0]) if others else None
    meta = {"format_version": FORMAT_VERSION, "tokens": json.dumps(tokens, ensure_ascii=False)}
    if key_tokens is not None:
        meta["key_tokens"] = json.dumps([str(t) for t in key_tokens], ensure_ascii=False)
    if names is not None:
        if len(names) != len(layers):
            raise ValueError(f"{len(names)} names for {len(layers)} layers")
        meta["layer_names"] = json.dumps([str(n) for n in names], ensure_ascii=False)
    if axes is not None:
        if len(axes) != len(layers):
            raise ValueError(f"{len(axes)} axes for {len(layers)} layers")
        meta["layer_axes"] = json.dumps(list(axes))
    if model is not None:
        meta["model"] = str(model)
    _write_safetensors(path, [(f"attn.{i}", a) for i, a in enumerate(layers)], meta)


def _pretty_name(path):
    """'decoder.layers.1.multihead_attn' -> 'decoder.1.cross'; 'encoder.layers.0.self_attn' ->
    'encoder.0'; other module paths stay as they are."""
    name = path.replace(".layers.", ".")
    if name.endswith(".self_attn"):
        name = name[: -len(".self_attn")]
    elif name.endswith(".multihead_attn"):
        name = name[: -len(".multihead_attn")] + ".cross"
    return name or "attn"


class Recorder:
    """What capture() saw: one entry per call of an nn.MultiheadAttention, in call order."""

    def __init__(self, model_name=None):
        self.records = []  # dicts: path, name, weights [B?, H, T_q, T_k] numpy, cross (bool)
        self.model_name = model_name  # the captured model's class, unless save() names it

    def layers(self, batch=0):
        """(name, axes, [H, T_q, T_k]) per recorded call, axes as in the dump format."""
        counts = {}
        for r in self.records:
            counts[r["name"]] = counts.get(r["name"], 0) + 1
        seen, out = {}, []
        any_cross = any(r["cross"] for r in self.records)
        for r in self.records:
            name = r["name"]
            if counts[name] > 1:
                seen[name] = seen.get(name, 0) + 1
                name = f"{name}.call{seen[name]}"
            if r["cross"]:
                axes = "cross"
            elif any_cross and "encoder" in r["path"].split("."):
                axes = "key_self"
            else:
                axes = "self"
            out.append((name, axes, _layer_weights(r["weights"], batch)))
        return out

    def save(self, path, tokens=None, key_tokens=None, model=None, batch=0, dtype=np.float32):
        """Write the dump; without tokens the positions label the axes."""
        layers = self.layers(batch)
        if not layers:
            raise ValueError("capture() recorded no nn.MultiheadAttention call")
        if tokens is None:
            for _, axes, a in layers:
                if axes in ("self", "cross"):
                    tokens = _positions(a.shape[1] if axes == "cross" else a.shape[2])
                    break
            else:
                tokens = _positions(layers[0][2].shape[2])
        if key_tokens is None:
            for _, axes, a in layers:
                if axes in ("cross", "key_self"):
                    key_tokens = _positions(a.shape[2])
                    break
        save(path, [a for _, _, a in layers], tokens=tokens, key_tokens=key_tokens,
             names=[n for n, _, _ in layers], axes=[x for _, x, _ in layers],
             model=model if model is not None else self.model_name,
             dtype=dtype)


@contextlib.contextmanager
def capture(model):
    """Record the per-head weights of every nn.MultiheadAttention inside `model` while the block
    runs, whatever its callers ask for: need_weights=False callers (nn.TransformerEncoderLayer,
    nn.TransformerDecoderLayer) still get what they asked for, while the recorder gets
    [B, H, T_q, T_k]. The encoder layers' fused fast path, which skips nn.MultiheadAttention, is
    switched off for the duration. Yields a Recorder."""
    import torch.nn as nn

    rec = Recorder(type(model).__name__)
    patched, fastpath = [], []
    for path, module in model.named_modules():
        if isinstance(module, nn.MultiheadAttention):
            patched.append(module)
            module.forward = _recording_forward(module, path, rec)
        elif isinstance(getattr(module, "activation_relu_or_gelu", None), (bool, int)):
            # TransformerEncoderLayer / TransformerEncoder take the fused kernel only when this
            # flag is set; the non-fused path computes the same thing through self_attn.
            fastpath.append((module, module.activation_relu_or_gelu))
            module.activation_relu_or_gelu = 0
    try:
        yield rec
    finally:
        for module in patched:
            del module.forward  # back to the class's forward
        for module, flag in fastpath:
            module.activation_relu_or_gelu = flag


def _recording_forward(module, path, rec):
    original = module.forward  # the bound class method
    signature = inspect.signature(original)

    def forward(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        want_weights = bound.arguments.get("need_weights", True)
        want_average = bound.arguments.get("average_attn_weights", True)
        bound.arguments["need_weights"] = True
        bound.arguments["average_attn_weights"] = False
        out, weights = original(*bound.args, **bound.kwargs)
        q, k = bound.arguments["query"], bound.arguments["key"]
        w = weights.detach().to("cpu").float().numpy()
        w[np.isnan(w)] = 0.0  # a fully masked row: torch gives NaN, attnviz zeros
        rec.records.append({"path": path, "name": _pretty_name(path), "weights": w,
                            "cross": q is not k})
        if not want_weights:
            return out, None
        return out, weights.mean(dim=-3) if want_average else weights

    return forward
