// The shipped BERT's tokenizer (assets/models/kjv-wp-bert/tokenizer.json) through
// @huggingface/tokenizers (the JS port of Hugging Face's tokenizers): each text alone and each
// pair (texts[i], texts[i + 1]) with its token type ids, special tokens added.
//
//   node shipped_wordpiece_reference.mjs NODE_MODULES MODEL_DIR TEXTS.json OUT.json
//
// OUT.json: {"single": [[ids]...], "pair": [{"ids": [...], "types": [...]}...]}
import fs from 'node:fs';
import path from 'node:path';

const [modules, modelDir, textsPath, outPath] = process.argv.slice(2);
const { Tokenizer } = await import(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.mjs'));
const json = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf-8'));
const config = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer_config.json'), 'utf-8'));
const tok = new Tokenizer(json, config);
const texts = JSON.parse(fs.readFileSync(textsPath, 'utf-8'));
const num = (a) => Array.from(a, Number);
const single = texts.map((t) => num(tok.encode(t).ids));
const pair = texts.slice(0, -1).map((a, i) => {
  const e = tok.encode(a, { text_pair: texts[i + 1], return_token_type_ids: true });
  return { ids: num(e.ids), types: num(e.token_type_ids) };
});
fs.writeFileSync(outPath, JSON.stringify({ single, pair }));
