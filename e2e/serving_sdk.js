// e2e/serving_sdk.js — the official `openai` npm SDK against llmr-router (issue 9).
// Usage: NODE_PATH=<cache>/npm/node_modules node serving_sdk.js ROUTER_URL API_KEY MODEL
// Prints "ok: ..." per check; exits 1 at the first failure.
const OpenAI = require('openai');
const [base, key, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 60000 });
const assert = (c, m) => { if (!c) { console.error('FAIL: ' + m); process.exit(1); } };
const ok = (m) => console.log('ok: ' + m);

async function expectError(p, status, what) {
  try { await p; } catch (e) {
    assert(e instanceof OpenAI.APIError, `${what}: not an APIError: ${e}`);
    assert(e.status === status, `${what}: status ${e.status}, expected ${status} (${e.message})`);
    assert(e.error && typeof e.error.message === 'string', `${what}: no error.message`);
    return e;
  }
  assert(false, `${what}: no error`);
}

(async () => {
  const models = await client.models.list();
  assert(models.data.some((m) => m.id === model), 'models.list lacks ' + model);
  ok('models.list: ' + models.data.map((m) => m.id).join(','));

  const msgs = [{ role: 'user', content: 'Say hello.' }];
  const full = await client.chat.completions.create({ model, messages: msgs, max_tokens: 12, seed: 11, temperature: 0.7 });
  assert(full.object === 'chat.completion' && /^chatcmpl-/.test(full.id), 'chat shape: ' + JSON.stringify(full));
  const c0 = full.choices[0];
  assert(c0.index === 0 && c0.message.role === 'assistant' && typeof c0.message.content === 'string', 'choice shape');
  assert(['stop', 'length', 'tool_calls'].includes(c0.finish_reason), 'finish_reason ' + c0.finish_reason);
  const u = full.usage;
  assert(u.prompt_tokens > 0 && u.completion_tokens > 0 && u.total_tokens === u.prompt_tokens + u.completion_tokens,
    'usage ' + JSON.stringify(u));
  assert(typeof u.completion_tokens_details.reasoning_tokens === 'number', 'reasoning_tokens');
  ok(`chat: ${JSON.stringify(c0.message.content)} (${c0.finish_reason}, usage ${JSON.stringify(u)})`);

  const again = await client.chat.completions.create({ model, messages: msgs, max_tokens: 12, seed: 11, temperature: 0.7 });
  assert(again.id !== full.id, 'ids are not unique');

  const stream = await client.chat.completions.create({ model, messages: msgs, max_tokens: 12, seed: 11, temperature: 0.7,
    stream: true, stream_options: { include_usage: true } });
  let text = '', chunks = 0, usage = null, finish = null;
  for await (const ch of stream) {
    assert(ch.object === 'chat.completion.chunk' && ch.id.startsWith('chatcmpl-'), 'chunk shape');
    if (ch.usage) usage = ch.usage;
    if (!ch.choices.length) continue;
    chunks++;
    text += ch.choices[0].delta.content || '';
    if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
  }
  assert(text === c0.message.content, `streamed ${JSON.stringify(text)} != ${JSON.stringify(c0.message.content)}`);
  assert(finish === c0.finish_reason, 'stream finish ' + finish);
  assert(usage && usage.completion_tokens === u.completion_tokens, 'include_usage chunk: ' + JSON.stringify(usage));
  ok(`chat stream: ${chunks} chunks concatenate to the non-streamed answer (same seed); usage chunk present`);

  const comp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, seed: 4 });
  assert(comp.object === 'text_completion' && typeof comp.choices[0].text === 'string', 'completion shape');
  let ctext = '', cchunks = 0;
  for await (const ch of await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 10, seed: 4, stream: true })) {
    if (ch.choices.length && ch.choices[0].text) { cchunks++; ctext += ch.choices[0].text; }
  }
  assert(ctext === comp.choices[0].text, `completion stream ${JSON.stringify(ctext)} != ${JSON.stringify(comp.choices[0].text)}`);
  assert(cchunks >= 2, 'completion text came in ' + cchunks + ' chunk(s): not streamed token by token');
  ok(`completions: ${JSON.stringify(comp.choices[0].text)}; streamed in ${cchunks} chunks, same text`);

  // logprobs (greedy, so the chosen token is the most likely one): completions' legacy shape, streamed == not,
  // chat's logprobs.content with top_logprobs alternatives; the probabilities listed never sum above 1.
  const clean = (toks) => !toks.some((t) => t.includes('\uFFFD') || t.startsWith('token_id:'));
  const lpc = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 3 });
  const L = lpc.choices[0].logprobs;
  assert(L && L.tokens.length === lpc.usage.completion_tokens && L.token_logprobs.length === L.tokens.length &&
    L.top_logprobs.length === L.tokens.length && L.text_offset.length === L.tokens.length, 'completion logprobs shape: ' + JSON.stringify(L));
  for (let i = 0; i < L.tokens.length; i++) {
    const alts = Object.values(L.top_logprobs[i]);
    assert(L.token_logprobs[i] <= 0 && alts.length >= 1 && alts.length <= 3, `token ${i}: ${L.token_logprobs[i]}, ${JSON.stringify(L.top_logprobs[i])}`);
    assert(Math.abs(Math.max(...alts) - L.token_logprobs[i]) < 1e-6, `greedy token ${i} is not the most likely: ${JSON.stringify(L.top_logprobs[i])} vs ${L.token_logprobs[i]}`);
    assert(alts.reduce((a, v) => a + Math.exp(v), 0) <= 1 + 1e-5, `token ${i}: alternatives sum above 1`);
    assert(i === 0 || L.text_offset[i] >= L.text_offset[i - 1], 'text_offset decreases');
  }
  if (clean(L.tokens)) assert(L.tokens.join('') === lpc.choices[0].text, `tokens ${JSON.stringify(L.tokens)} != text ${JSON.stringify(lpc.choices[0].text)}`);
  const sl = { tokens: [], token_logprobs: [] };
  for await (const ch of await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 3, stream: true })) {
    const l = ch.choices.length && ch.choices[0].logprobs;
    if (l) { sl.tokens.push(...l.tokens); sl.token_logprobs.push(...l.token_logprobs); }
  }
  assert(JSON.stringify(sl.tokens) === JSON.stringify(L.tokens) && JSON.stringify(sl.token_logprobs) === JSON.stringify(L.token_logprobs),
    `streamed logprobs ${JSON.stringify(sl)} != ${JSON.stringify(L)}`);
  const lpchat = await client.chat.completions.create({ model, messages: msgs, max_tokens: 24, temperature: 0, logprobs: true, top_logprobs: 2 });
  const cl = lpchat.choices[0].logprobs;
  assert(cl && Array.isArray(cl.content), 'chat logprobs shape: ' + JSON.stringify(lpchat.choices[0]));
  for (const e of cl.content) {
    assert(typeof e.token === 'string' && Array.isArray(e.bytes) && e.logprob <= 0 && e.top_logprobs.length === 2, 'chat entry ' + JSON.stringify(e));
    assert(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6 && e.top_logprobs[1].logprob <= e.top_logprobs[0].logprob, 'chat greedy entry ' + JSON.stringify(e));
  }
  const ctoks = cl.content.map((e) => e.token);
  if (clean(ctoks)) assert(ctoks.join('') === (lpchat.choices[0].message.content || ''), `chat tokens ${JSON.stringify(ctoks)} != content ${JSON.stringify(lpchat.choices[0].message.content)}`);
  // streamed chat: the content tokens' entries come with the chunks that carry their text, the same as not streamed
  const sc = { text: '', toks: [] };
  for await (const ch of await client.chat.completions.create({ model, messages: msgs, max_tokens: 24, temperature: 0, logprobs: true,
    top_logprobs: 2, stream: true })) {
    if (!ch.choices.length) continue;
    const c = ch.choices[0];
    sc.text += c.delta.content || '';
    if (c.logprobs && c.logprobs.content) sc.toks.push(...c.logprobs.content.map((e) => e.token));
    if (c.delta.role) assert(!c.logprobs, 'the role chunk carries logprobs: ' + JSON.stringify(c.logprobs));
  }
  assert(sc.text === (lpchat.choices[0].message.content || '') && JSON.stringify(sc.toks) === JSON.stringify(ctoks),
    `streamed chat logprobs ${JSON.stringify(sc)} != ${JSON.stringify(ctoks)}`);
  const nolp = await client.chat.completions.create({ model, messages: msgs, max_tokens: 2, temperature: 0 });
  assert(nolp.choices[0].logprobs === null, 'logprobs without asking: ' + JSON.stringify(nolp.choices[0].logprobs));
  ok(`logprobs: completions ${L.tokens.length} tokens (${L.token_logprobs.map((v) => v.toFixed(3)).join(' ')}), streamed the same; chat ${cl.content.length} content tokens with 2 alternatives each`);

  // A tool round trip: tools offered, the assistant's call and the tool's result sent back.
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const t1 = await client.chat.completions.create({ model, max_tokens: 8, seed: 2, tools, tool_choice: 'auto',
    messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  const call = (t1.choices[0].message.tool_calls || [])[0] ||
    { id: 'call_e2e', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
  const t2 = await client.chat.completions.create({ model, max_tokens: 8, seed: 2, tools, messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: call.id, content: '{"temp_c": 21}' }] });
  assert(t2.choices[0].message.role === 'assistant', 'tool round trip answer');
  ok(`tool round trip: first turn ${t1.choices[0].finish_reason}${t1.choices[0].message.tool_calls ? ' (model called ' + call.function.name + ')' : ''}, answer after the tool result: ${t2.choices[0].finish_reason}`);

  let e = await expectError(client.chat.completions.create({ model, messages: msgs, temperature: 'hot' }), 400, 'bad temperature');
  assert(e.param === 'temperature', 'param ' + e.param);
  e = await expectError(client.chat.completions.create({ model, messages: msgs, n: 2 }), 400, 'n=2');
  assert(e.param === 'n', 'param ' + e.param);
  e = await expectError(client.chat.completions.create({ model, messages: 'hi' }), 400, 'messages string');
  assert(e.param === 'messages', 'param ' + e.param);
  e = await expectError(client.chat.completions.create({ model, messages: msgs, top_logprobs: 2 }), 400, 'top_logprobs alone');
  assert(e.param === 'top_logprobs' && /requires 'logprobs': true/.test(e.message), 'top_logprobs alone: ' + e.param + ' ' + e.message);
  e = await expectError(client.completions.create({ model, prompt: 'x', logprobs: 21 }), 400, 'logprobs 21');
  assert(e.param === 'logprobs', 'param ' + e.param);
  e = await expectError(client.chat.completions.create({ model: 'nobody/none', messages: msgs }), 404, 'unknown model');
  assert(e.code === 'model_not_found', 'code ' + e.code);
  const nokey = new OpenAI({ baseURL: base + '/v1', apiKey: 'sk-llmr-wrong', maxRetries: 0 });
  await expectError(nokey.chat.completions.create({ model, messages: msgs }), 401, 'wrong key');
  ok('errors: 400 naming temperature / n / messages / top_logprobs / logprobs, 404 model_not_found, 401 wrong key (OpenAI shape)');
})().catch((e) => { console.error('FAIL: ' + (e && e.stack || e)); process.exit(1); });
