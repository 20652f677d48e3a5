// Encodes texts with a tokenizer.json through the npm package @huggingface/tokenizers (the
// pure-JS port of Hugging Face tokenizers), for check_tokenizer_json.py.
// Usage: node encode_tokenizer_json.mjs PACKAGE_DIR MODEL_DIR TEXTS.json OUT.json
//   PACKAGE_DIR: where `npm install --prefix DIR @huggingface/tokenizers@0.2.0` put it
//   TEXTS.json: a JSON list of strings; OUT.json receives a list of id lists (special tokens
//   included, as Tokenizer.encode gives them).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkgDir, modelDir, textsPath, outPath] = process.argv.slice(2);
const pkgRoot = join(pkgDir, "node_modules", "@huggingface", "tokenizers");
const pkg = JSON.parse(readFileSync(join(pkgRoot, "package.json"), "utf8"));
const { Tokenizer } = await import(pathToFileURL(join(pkgRoot, pkg.exports["."].node.import)).href);
const json = JSON.parse(readFileSync(join(modelDir, "tokenizer.json"), "utf8"));
const config = JSON.parse(readFileSync(join(modelDir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(json, config);
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
const out = texts.map((t) => Array.from(tok.encode(t).ids, Number));
writeFileSync(outPath, JSON.stringify({ version: pkg.version, ids: out }));
