// Cross-checks llmr-tokenize on the committed corpus, in both special-token modes, against
//  - Hugging Face `tokenizers` itself (the Rust library through its npm binding `tokenizers`),
//    when installed: the authority, llmr must match it exactly;
//  - @lenml/tokenizers (transformers.js port, JavaScript regex): must match except where it is
//    known to split differently from HF (tests/data/tokenizer/hf_semantics.jsonl says which was
//    right and why; with HF present those cases are also checked against HF directly).
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

// The HF binding is optional (npm package `tokenizers`, installed by tools/fixtures.sh).
let hf = null;
try {
  const { Tokenizer } = require("tokenizers");
  hf = { full: Tokenizer.fromFile(path.join(tokDir, "tokenizer.json")) };
  const tmp = path.join(require("os").tmpdir(), `llmr-plain-${process.pid}.json`);
  fs.writeFileSync(tmp, JSON.stringify(plainJSON));
  hf.plain = Tokenizer.fromFile(tmp);
  fs.unlinkSync(tmp);
  console.log("reference: HF tokenizers (Rust, npm binding) and @lenml/tokenizers");
} catch (e) {
  console.log(`reference: @lenml/tokenizers only (HF tokenizers binding unavailable: ${String(e.message).split("\n")[0]})`);
}
const hfEncode = async (t, text) => Array.from((await t.encode(text, null, { addSpecialTokens: false })).getIds());

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

async function main() {
// 1. The corpus: files, one-line cases, extra texts (e.g. a generated mixed corpus).
const texts = [], names = [];
for (const f of fs.readdirSync(dataDir).filter((f) => f.endsWith(".txt")).sort()) {
  texts.push(fs.readFileSync(path.join(dataDir, f), "utf8")); names.push(f);
}
fs.readFileSync(path.join(dataDir, "cases.jsonl"), "utf8").split("\n").filter((l) => l).forEach((l, i) => {
  texts.push(JSON.parse(l)); names.push(`cases.jsonl:${i + 1}`);
});
for (const f of extra) { texts.push(fs.readFileSync(f, "utf8")); names.push(path.basename(f)); }

function mismatch(what, name, mode, ours, theirs, t) {
  const k = ours.findIndex((x, j) => x !== theirs[j]);
  console.log(`MISMATCH vs ${what} ${name} (${mode}) at id ${k}: ` +
              `llmr ${JSON.stringify(ours.slice(Math.max(0, k - 2), k + 4))} ` +
              `${what} ${JSON.stringify(theirs.slice(Math.max(0, k - 2), k + 4))} text ${show(t)}`);
  failures++;
}

let ids = 0, bytes = 0, hfChecked = 0;
for (const noSpecial of [false, true]) {
  const ours = llmr(texts, noSpecial);
  const ref = noSpecial ? lenmlPlain : lenml;
  const mode = noSpecial ? "--no-special" : "specials";
  for (let i = 0; i < texts.length; i++) {
    const t = texts[i];
    const theirs = Array.from(ref.encode(t, { add_special_tokens: false }));
    ids += theirs.length; bytes += Buffer.byteLength(t);
    if (!eq(ours[i], theirs)) mismatch("lenml", names[i], mode, ours[i], theirs, t);
    if (hf) {
      const h = await hfEncode(noSpecial ? hf.plain : hf.full, t);
      if (!eq(ours[i], h)) mismatch("HF", names[i], mode, ours[i], h, t);
      hfChecked++;
    }
  }
}
console.log(`corpus: ${texts.length} texts x 2 modes, ${bytes} bytes, ${ids} ids compared` +
            (hf ? ` (with HF tokenizers too: ${hfChecked} encodings)` : ""));

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
for (let i = 0; i < sem.length; i++) {
  const c = sem[i];
  if (c.hf_pieces.join("") !== c.text) throw new Error(`hf_semantics: pieces do not spell ${show(c.text)}`);
  const want = c.hf_pieces.flatMap((piece) => Array.from(lenmlBpeOnly.encode(piece, { add_special_tokens: false })));
  const theirs = Array.from(lenml.encode(c.text, { add_special_tokens: false }));
  if (!eq(full[i], want)) {
    console.log(`HF-SEMANTICS MISMATCH ${show(c.text)}: llmr ${JSON.stringify(full[i])} want ${JSON.stringify(want)} (${c.why})`);
    failures++;
  }
  if (!eq(theirs, want)) lenmlWrong++;
  let real = "";
  if (hf) {
    const h = await hfEncode(hf.full, c.text);
    real = `, HF tokenizers itself ${eq(h, want) ? "agrees" : "DISAGREES " + JSON.stringify(h)}`;
    if (!eq(h, want) || !eq(full[i], h)) { console.log(`HF-SEMANTICS: the data file is wrong for ${show(c.text)}`); failures++; }
  }
  console.log(`hf-semantics ${show(c.text)}: llmr=HF ${eq(full[i], want) ? "yes" : "NO"}, lenml=HF ${eq(theirs, want) ? "yes" : "no (lenml is wrong here)"}${real}`);
}
console.log(`hf-semantics: ${sem.length} cases, lenml differs from HF on ${lenmlWrong}`);
console.log(failures ? `FAIL: ${failures} mismatches` : "PASS");
return failures;
}

main().then((f) => process.exit(f ? 1 : 0), (e) => { console.error(e); process.exit(1); });
