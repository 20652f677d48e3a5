#!/usr/bin/python3
"""Seeds for attnviz_fuzz_chat and attnviz_fuzz_model_names (committed with this script):

    /usr/bin/python3 tests/fuzz/make_chat_seeds.py

chat: each template of tests/tokenizers/chat/ behind a 0 byte (the Jinja source), and one
tokenizer_config.json holding the ChatML template behind a 1 byte.
model_names: an Ollama manifest naming the blob the target makes (0 byte), one naming none, and
three typed names (1 byte).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CHAT = os.path.join(HERE, "..", "tokenizers", "chat")


def write(folder, name, first, body):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(bytes([first]) + body.encode("utf-8"))


def main():
    out = os.path.join(HERE, "corpus", "chat")
    for name in sorted(os.listdir(CHAT)):
        with open(os.path.join(CHAT, name), encoding="utf-8") as f:
            write(out, name.replace(".jinja", ""), 0, f.read())
    with open(os.path.join(CHAT, "qwen2_5.jinja"), encoding="utf-8") as f:
        config = {"chat_template": f.read(), "bos_token": None, "eos_token": "<|im_end|>"}
    write(out, "tokenizer_config", 1, json.dumps(config))

    out = os.path.join(HERE, "corpus", "model_names")
    layer = {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "a" * 64,
             "size": 0}
    write(out, "manifest", 0, json.dumps({"schemaVersion": 2, "layers": [layer]}))
    write(out, "manifest_other", 0, json.dumps({"layers": [{"mediaType": "text/plain"}]}))
    for i, name in enumerate(["ollama:llama3.2:1b", "google/flan-t5-small", "t5-small"]):
        write(out, "name%d" % i, 1, name)


if __name__ == "__main__":
    main()
