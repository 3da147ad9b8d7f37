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
  e = await expectError(client.chat.completions.create({ model: 'nobody/none', messages: msgs }), 404, 'unknown model');
  assert(e.code === 'model_not_found', 'code ' + e.code);
  const nokey = new OpenAI({ baseURL: base + '/v1', apiKey: 'sk-llmr-wrong', maxRetries: 0 });
  await expectError(nokey.chat.completions.create({ model, messages: msgs }), 401, 'wrong key');
  ok('errors: 400 naming temperature / n / messages, 404 model_not_found, 401 wrong key (OpenAI shape)');
})().catch((e) => { console.error('FAIL: ' + (e && e.stack || e)); process.exit(1); });
