// e2e/lib/dashboard_cdp.js — drives the router dashboard in headless chromium over the DevTools
// protocol, as an operator would, and prints what it saw as one JSON object (e2e/test_dashboard.sh
// asserts on it). No npm package: node 20's WebSocket (--experimental-websocket) speaks to chromium.
//   node --experimental-websocket e2e/lib/dashboard_cdp.js CHROMIUM DASHBOARD_URL ADMIN_KEY OUTDIR NEW_REPO
// Scenario: a wrong key is refused with the router's message; the right key typed into the key form
// shows the nodes and models; screenshot OUTDIR/dashboard.png; registering an unknown repo shows the
// router's message verbatim; registering NEW_REPO succeeds and its row appears; its Delete button
// (confirm dialog accepted) removes it; Sign out forgets the key.
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");

const [chromium, url, adminKey, outDir, newRepo] = process.argv.slice(2);
if (!newRepo) { console.error("usage: dashboard_cdp.js CHROMIUM URL ADMIN_KEY OUTDIR NEW_REPO"); process.exit(2); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const profile = path.join(outDir, "cdp-profile");
fs.rmSync(profile, { recursive: true, force: true });
// Flags known to work on these machines: no sandbox as root, no GPU, no background networking.
const chrome = spawn(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
  "--user-data-dir=" + profile, "--window-size=1280,1000", "--remote-debugging-port=0", "about:blank"],
  { stdio: ["ignore", "ignore", fs.openSync(path.join(outDir, "chrome-cdp.log"), "w")] });
const result = { steps: [] };
let ws = null;
function finish(code) {
  try { if (ws) ws.close(); } catch (e) { /* closing anyway */ }
  chrome.kill("SIGKILL");
  console.log(JSON.stringify(result, null, 1));
  process.exit(code);
}
setTimeout(() => { result.error = "timed out after 100 s"; finish(1); }, 100000);

let nextId = 1;
const pending = new Map();
const dialogs = [];
function send(method, params = {}) {
  const id = nextId++;
  ws.send(JSON.stringify({ id, method, params }));
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}
async function evaluate(expr) {
  const r = await send("Runtime.evaluate", { expression: expr, awaitPromise: true, returnByValue: true });
  if (r.exceptionDetails) throw new Error("page threw: " + JSON.stringify(r.exceptionDetails).slice(0, 400));
  return r.result.value;
}
// Polls a page expression until it is truthy; returns its value, or null after ms.
async function until(expr, ms = 15000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
    const v = await evaluate(expr);
    if (v) return v;
  }
  return null;
}
async function typeInto(selector, text) {
  await evaluate(`(() => { const e = document.querySelector(${JSON.stringify(selector)}); e.value = ""; e.focus(); })()`);
  await send("Input.insertText", { text });
}
const click = (selector) => evaluate(`document.querySelector(${JSON.stringify(selector)}).click()`);
const visible = (id) => `(() => { const e = document.getElementById(${JSON.stringify(id)}); return !!e && !e.hidden && e.offsetParent !== null; })()`;
const text = (id) => `document.getElementById(${JSON.stringify(id)}).textContent`;
function step(name, value) { result.steps.push(name); result[name] = value; }

async function main() {
  const portFile = path.join(profile, "DevToolsActivePort");
  for (let i = 0; i < 300 && !fs.existsSync(portFile); i++) await sleep(100);
  const port = fs.readFileSync(portFile, "utf8").split("\n")[0];
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  const page = targets.find((t) => t.type === "page");
  ws = new WebSocket(page.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = () => reject(new Error("websocket error")); });
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.id && pending.has(m.id)) {
      const p = pending.get(m.id); pending.delete(m.id);
      if (m.error) p.reject(new Error(p.method + ": " + m.error.message)); else p.resolve(m.result);
    } else if (m.method === "Page.javascriptDialogOpening") {
      dialogs.push(m.params.message);
      send("Page.handleJavaScriptDialog", { accept: true });
    }
  };
  await send("Page.enable");
  await send("Runtime.enable");
  await send("Page.navigate", { url });
  step("login_form_shown", await until(visible("key-form")));

  // A wrong key: the router's own message, and the key form again.
  await typeInto("#key-input", "not-the-admin-key-0000000");
  await click("#key-form button");
  step("wrong_key_message", await until(`${visible("login-error")} && ${text("login-error")}`));
  step("wrong_key_forgotten", await evaluate(`sessionStorage.getItem("llmr-admin-key") === null`));

  // The right key, typed into the form.
  await typeInto("#key-input", adminKey);
  await click("#key-form button");
  step("nodes_shown", await until(`(() => { const rows = Array.from(document.querySelectorAll("#nodes tbody tr"));
    return rows.length && rows.map((r) => ({ id: r.dataset.nodeId, online: r.className === "node-online",
      text: r.innerText })); })()`));
  step("models_shown", await until(`(() => { const rows = Array.from(document.querySelectorAll("#models tbody tr"));
    return rows.length && rows.map((r) => ({ id: r.dataset.modelId, ready: r.dataset.ready === "true",
      states: Array.from(r.querySelectorAll(".ns")).map((n) => ({ node: n.dataset.nodeId, state: n.dataset.state,
        bar: (n.querySelector("[role=progressbar]") || { getAttribute: () => null }).getAttribute("aria-valuenow") })) })); })()`));
  step("gpu_bars", await evaluate(`Array.from(document.querySelectorAll("#nodes .gpu")).map((g) => g.innerText)`));
  step("key_input_cleared", await evaluate(`document.getElementById("key-input").value === ""`));
  step("status_line", await evaluate(text("status")));
  const shot = await send("Page.captureScreenshot", { format: "png" });
  fs.writeFileSync(path.join(outDir, "dashboard.png"), Buffer.from(shot.data, "base64"));

  // Registering a repo the hub does not have: the router's message, verbatim.
  await typeInto("#reg-repo", "no/such-model");
  await click("#reg-submit");
  step("register_error", await until(`${visible("register-error")} && ${text("register-error")}`, 30000));

  // Registering a real repo: success message, then its row.
  await typeInto("#reg-repo", newRepo);
  await evaluate(`document.getElementById("reg-format").value = "safetensors"`);
  await click("#reg-submit");
  step("register_ok", await until(`${visible("register-ok")} && ${text("register-ok")}`, 30000));
  step("new_row", await until(`!!document.querySelector('#models tr[data-model-id="${newRepo.toLowerCase()}"]')`));

  // Delete it: the confirm dialog is accepted, the row goes away.
  await click(`button[data-delete="${newRepo.toLowerCase()}"]`);
  step("deleted_row_gone", await until(`!document.querySelector('#models tr[data-model-id="${newRepo.toLowerCase()}"]')`));
  step("confirm_dialogs", dialogs.slice());

  // Sign out: the key is forgotten.
  await click("#signout");
  step("signed_out", await until(`${visible("key-form")} && sessionStorage.getItem("llmr-admin-key") === null`));
  finish(0);
}
main().catch((e) => { result.error = String(e && e.stack || e); finish(1); });
