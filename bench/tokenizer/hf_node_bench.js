// Encode throughput of Hugging Face `tokenizers` (the Rust library, through its official node
// binding, npm package `tokenizers`) on a corpus file, chunked exactly as build/bench/tokenizer does
// (100000-byte chunks, each extended to the next '\n'). With --ids-out FILE, writes one JSON array
// of ids per chunk (for comparing with `llmr-tokenize --jsonl`).
//   NODE_PATH=$LLMR_CACHE/npm/node_modules node bench/tokenizer/hf_node_bench.js CORPUS TOKENIZER_JSON [--rounds N] [--ids-out FILE]
"use strict";
const fs = require("fs");
const { Tokenizer } = require("tokenizers");

const [corpusPath, tokPath] = process.argv.slice(2);
const arg = (k) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : null; };
const rounds = parseInt(arg("--rounds") || "3", 10);
if (!corpusPath || !tokPath || process.argv.includes("--help")) {
  console.log("usage: node hf_node_bench.js CORPUS TOKENIZER_JSON [--rounds N] [--ids-out FILE]");
  process.exit(corpusPath && tokPath ? 0 : 2);
}
(async () => {
  let t0 = process.hrtime.bigint();
  const tok = Tokenizer.fromFile(tokPath);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const buf = fs.readFileSync(corpusPath);
  const chunks = [];
  for (let at = 0; at < buf.length;) {
    let end = Math.min(at + 100000, buf.length);
    while (end < buf.length && buf[end - 1] !== 0x0a) end++;
    chunks.push(buf.subarray(at, end).toString("utf8"));
    at = end;
  }
  let best = Infinity, all = [];
  for (let r = 0; r < rounds; r++) {
    all = [];
    t0 = process.hrtime.bigint();
    for (const c of chunks) all.push((await tok.encode(c, null, { addSpecialTokens: false })).getIds());
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  console.log(`hf_node_load_ms: ${loadMs.toFixed(1)}`);
  console.log(`hf_node_ids: ${all.reduce((n, x) => n + x.length, 0)}`);
  console.log(`hf_node_encode_MBps: ${(buf.length / 1e6 / best).toFixed(2)} (one call at a time, best of ${rounds}, ${chunks.length} chunks)`);
  const out = arg("--ids-out");
  if (out) fs.writeFileSync(out, all.map((x) => JSON.stringify(Array.from(x))).join("\n") + "\n");
})().catch((e) => { console.error(e); process.exit(1); });
