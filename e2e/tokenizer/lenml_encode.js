// Encodes texts with @lenml/tokenizers (a port of transformers.js) for the conformance test.
//   node lenml_encode.js TOKENIZER_DIR [--no-special] < cases.jsonl > ids.jsonl
// Each stdin line is a JSON string (the text); each stdout line is the JSON array of ids, encoded
// like Hugging Face encode(text, add_special_tokens=False). --no-special: special tokens in the
// text are plain text (transformers.js split_special_tokens).
// NODE_PATH must reach the cached node_modules (see e2e/test_tokenizer_conformance.sh).
"use strict";
const fs = require("fs");
const path = require("path");
const { TokenizerLoader } = require("@lenml/tokenizers");

const dir = process.argv[2];
const noSpecial = process.argv.includes("--no-special");
if (!dir || process.argv.includes("--help")) {
  console.error("usage: node lenml_encode.js TOKENIZER_DIR [--no-special] < texts.jsonl");
  process.exit(dir ? 0 : 2);
}
const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const cfgPath = path.join(dir, "tokenizer_config.json");
const tokenizerConfig = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

const lines = fs.readFileSync(0, "utf8").split("\n").filter((l) => l.length > 0);
const out = [];
for (const line of lines) {
  const text = JSON.parse(line);
  const ids = tok.encode(text, { add_special_tokens: false, split_special_tokens: noSpecial });
  out.push(JSON.stringify(Array.from(ids)));
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
