// Cross-checks llmr-tokenize against @lenml/tokenizers (transformers.js port) on the committed
// corpus, in both special-token modes, and checks the cases where the two are known to disagree
// against Hugging Face semantics (tests/data/tokenizer/hf_semantics.jsonl).
//   node conformance.js LLMR_TOKENIZE TOKENIZER_DIR DATA_DIR [EXTRA_TEXT_FILE...]
// Exit 0 when everything agrees (or disagrees only as documented), 1 otherwise.
"use strict";
const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { TokenizerLoader } = require("@lenml/tokenizers");

const [bin, tokDir, dataDir, ...extra] = process.argv.slice(2);
if (!bin || !tokDir || !dataDir) {
  console.error("usage: node conformance.js LLMR_TOKENIZE TOKENIZER_DIR DATA_DIR [TEXT_FILE...]");
  process.exit(2);
}
const tokJSON = JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer.json"), "utf8"));
const cfgPath = path.join(tokDir, "tokenizer_config.json");
const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
const lenml = TokenizerLoader.fromPreTrained({ tokenizerJSON: tokJSON, tokenizerConfig: cfg });
// transformers.js has no split_special_tokens: a copy without the special added tokens gives the
// same semantics (they are then ordinary text, BPE-encoded).
const plainJSON = { ...tokJSON, added_tokens: tokJSON.added_tokens.filter((t) => !t.special) };
const lenmlPlain = TokenizerLoader.fromPreTrained({ tokenizerJSON: plainJSON, tokenizerConfig: {} });
// And one without the split regex: it BPE-encodes its whole input as one piece, independently of
// any regex engine (used to compute the ids of the pieces HF produces).
const bpeOnlyJSON = { ...plainJSON, pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false } };
const lenmlBpeOnly = TokenizerLoader.fromPreTrained({ tokenizerJSON: bpeOnlyJSON, tokenizerConfig: {} });

function llmr(texts, noSpecial) {
  const args = ["--tokenizer", path.join(tokDir, "tokenizer.json"), "--jsonl"];
  if (noSpecial) args.push("--no-special");
  const input = texts.map((t) => JSON.stringify(t)).join("\n") + "\n";
  const r = spawnSync(bin, args, { input, maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`llmr-tokenize failed (${r.status}): ${r.stderr}`);
  const lines = r.stdout.toString("utf8").split("\n").filter((l) => l.length);
  if (lines.length !== texts.length) throw new Error(`llmr-tokenize: ${lines.length} lines for ${texts.length} texts`);
  return lines.map((l) => JSON.parse(l));
}

function llmrDecode(ids) {
  const r = spawnSync(bin, ["--tokenizer", path.join(tokDir, "tokenizer.json"), "--decode"],
                      { input: JSON.stringify(ids), maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`llmr-tokenize --decode failed: ${r.stderr}`);
  return r.stdout;
}

const eq = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const show = (s) => JSON.stringify(s.length > 70 ? s.slice(0, 70) + "…" : s);
let failures = 0;

// 1. The corpus: files, one-line cases, extra texts (e.g. a generated mixed corpus).
const texts = [], names = [];
for (const f of fs.readdirSync(dataDir).filter((f) => f.endsWith(".txt")).sort()) {
  texts.push(fs.readFileSync(path.join(dataDir, f), "utf8")); names.push(f);
}
fs.readFileSync(path.join(dataDir, "cases.jsonl"), "utf8").split("\n").filter((l) => l).forEach((l, i) => {
  texts.push(JSON.parse(l)); names.push(`cases.jsonl:${i + 1}`);
});
for (const f of extra) { texts.push(fs.readFileSync(f, "utf8")); names.push(path.basename(f)); }

let ids = 0, bytes = 0;
for (const noSpecial of [false, true]) {
  const ours = llmr(texts, noSpecial);
  const ref = noSpecial ? lenmlPlain : lenml;
  texts.forEach((t, i) => {
    const theirs = Array.from(ref.encode(t, { add_special_tokens: false }));
    ids += theirs.length; bytes += Buffer.byteLength(t);
    if (!eq(ours[i], theirs)) {
      const k = ours[i].findIndex((x, j) => x !== theirs[j]);
      console.log(`MISMATCH ${names[i]} (${noSpecial ? "--no-special" : "specials"}) at id ${k}: ` +
                  `llmr ${JSON.stringify(ours[i].slice(Math.max(0, k - 2), k + 4))} ` +
                  `lenml ${JSON.stringify(theirs.slice(Math.max(0, k - 2), k + 4))} text ${show(t)}`);
      failures++;
    }
  });
}
console.log(`corpus: ${texts.length} texts x 2 modes, ${bytes} bytes, ${ids} ids compared`);

// 2. Decoding: llmr-tokenize --decode of lenml's ids gives the original bytes (files only).
for (let i = 0; i < texts.length; i++) {
  if (names[i].startsWith("cases.jsonl")) continue;
  const out = llmrDecode(Array.from(lenml.encode(texts[i], { add_special_tokens: false })));
  if (!out.equals(Buffer.from(texts[i], "utf8"))) { console.log(`DECODE MISMATCH ${names[i]}`); failures++; }
}

// 3. Documented disagreements: llmr must split as HF (Oniguruma) does. The expected ids are the
//    BPE of each HF piece (written in the data file with the reason), computed without any regex.
const sem = fs.readFileSync(path.join(dataDir, "hf_semantics.jsonl"), "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l));
const full = llmr(sem.map((c) => c.text), false);
let lenmlWrong = 0;
sem.forEach((c, i) => {
  if (c.hf_pieces.join("") !== c.text) throw new Error(`hf_semantics: pieces do not spell ${show(c.text)}`);
  const want = c.hf_pieces.flatMap((piece) => Array.from(lenmlBpeOnly.encode(piece, { add_special_tokens: false })));
  const theirs = Array.from(lenml.encode(c.text, { add_special_tokens: false }));
  if (!eq(full[i], want)) {
    console.log(`HF-SEMANTICS MISMATCH ${show(c.text)}: llmr ${JSON.stringify(full[i])} want ${JSON.stringify(want)} (${c.why})`);
    failures++;
  }
  if (!eq(theirs, want)) lenmlWrong++;
  console.log(`hf-semantics ${show(c.text)}: llmr=HF ${eq(full[i], want) ? "yes" : "NO"}, lenml=HF ${eq(theirs, want) ? "yes" : "no (lenml is wrong here)"}`);
});
console.log(`hf-semantics: ${sem.length} cases, lenml differs from HF on ${lenmlWrong}`);
console.log(failures ? `FAIL: ${failures} mismatches` : "PASS");
process.exit(failures ? 1 : 0);
