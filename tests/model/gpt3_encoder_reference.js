// Encodes every string of a JSON array with gpt-3-encoder's own JS encoder (the reference for
// attnviz's tokenizer) and prints a JSON array of id arrays.
//   NODE_PATH=<prefix>/node_modules node gpt3_encoder_reference.js corpus.json
const fs = require('fs');
const { encode } = require('gpt-3-encoder');
const corpus = JSON.parse(fs.readFileSync(process.argv[2], 'utf-8'));
process.stdout.write(JSON.stringify(corpus.map((text) => encode(text))));
