// Tokenizes each case's rendered chat prompt (chat_reference.py) with @huggingface/tokenizers, as
// apply_chat_template(tokenize=True) does: the case's tokenizer.json, no special tokens added
// (those the template wrote are matched in the text as added tokens).
//
//   node chat_tokenize.mjs NODE_MODULES OUT_DIR
//
// Writes OUT_DIR/reference.json: {"<case>": [ids] or null when the template raised}.
import fs from 'node:fs';
import path from 'node:path';

const [modules, outDir] = process.argv.slice(2);
const { Tokenizer } = await import(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.mjs'));
const cases = JSON.parse(fs.readFileSync(path.join(outDir, 'cases.json'), 'utf-8'));
const reference = {};
for (const [name, c] of Object.entries(cases)) {
  if (c.rendered === null) { reference[name] = null; continue; }
  const dir = path.join(outDir, name);
  const json = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf-8'));
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf-8'));
  const tok = new Tokenizer(json, config);
  reference[name] = tok.encode(c.rendered, { add_special_tokens: false }).ids;
}
fs.writeFileSync(path.join(outDir, 'reference.json'), JSON.stringify(reference));
