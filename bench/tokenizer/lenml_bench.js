// Encode throughput of @lenml/tokenizers (transformers.js port) on a corpus file, chunked exactly
// as build/bench/tokenizer does (100000-byte chunks, each extended to the next '\n').
//   NODE_PATH=$LLMR_CACHE/npm/node_modules node bench/tokenizer/lenml_bench.js CORPUS TOKENIZER_DIR [--rounds N]
"use strict";
const fs = require("fs");
const path = require("path");
const { TokenizerLoader } = require("@lenml/tokenizers");

const [corpusPath, dir] = process.argv.slice(2);
const ri = process.argv.indexOf("--rounds");
const rounds = ri > 0 ? parseInt(process.argv[ri + 1], 10) : 1;
if (!corpusPath || !dir || process.argv.includes("--help")) {
  console.log("usage: node lenml_bench.js CORPUS TOKENIZER_DIR [--rounds N]");
  process.exit(corpusPath && dir ? 0 : 2);
}
let t0 = process.hrtime.bigint();
const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const cfgPath = path.join(dir, "tokenizer_config.json");
const tokenizerConfig = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

const buf = fs.readFileSync(corpusPath);
const chunks = [];
for (let at = 0; at < buf.length;) {
  let end = Math.min(at + 100000, buf.length);
  while (end < buf.length && buf[end - 1] !== 0x0a) end++;
  chunks.push(buf.subarray(at, end).toString("utf8"));
  at = end;
}
let best = Infinity, ids = 0;
for (let r = 0; r < rounds; r++) {
  ids = 0;
  t0 = process.hrtime.bigint();
  for (const c of chunks) ids += tok.encode(c, { add_special_tokens: false }).length;
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
console.log(`lenml_load_ms: ${loadMs.toFixed(1)}`);
console.log(`lenml_ids: ${ids}`);
console.log(`lenml_encode_MBps: ${(buf.length / 1e6 / best).toFixed(2)} (single thread, best of ${rounds}, ${chunks.length} chunks)`);
