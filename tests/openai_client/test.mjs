// tests/openai_client/test.mjs PORT WANT_REPLY N_TOKENS EMBED_GOLDEN - run
// serve through the official openai npm package (a client no one here
// wrote): a chat completion, the same streamed, a completion, the model
// list, embeddings (as the SDK asks for them by default, base64, and as
// floats) against the numpy reference's vectors (EMBED_GOLDEN,
// tests/data/embed_golden.json), and errors surfaced as the SDK's
// APIError; then tool calls (required and streamed, a named function)
// whose arguments zod must accept, and structured output with
// zodResponseFormat and beta.chat.completions.parse (the SDK parses the
// reply with zod, and throws when it does not fit). Prints one "ok ..." or
// "FAIL ..." line per check.
import fs from "node:fs";
import OpenAI from "openai";
import { zodFunction, zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";

const [port, want, nTokens] = [process.argv[2], process.argv[3], Number(process.argv[4])];
const golden = JSON.parse(fs.readFileSync(process.argv[5], "utf8"));
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "k3y", maxRetries: 0 });
const messages = [{ role: "user", content: "hi" }];
let failed = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok" : "FAIL"} ${what}`);
  if (!ok) failed++;
};

const reply = await client.chat.completions.create({ model: "model", messages, max_tokens: nTokens, temperature: 0 });
check(reply.choices[0].message.content === want, `chat: the reference's reply (got ${JSON.stringify(reply.choices[0].message.content)})`);
check(reply.usage.completion_tokens === nTokens, "chat: usage");

const stream = await client.chat.completions.create({
  model: "model", messages, max_tokens: nTokens, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = "", usage = null, finish = null;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? "";
  finish = chunk.choices[0]?.finish_reason ?? finish;
  usage = chunk.usage ?? usage;
}
check(text === want && finish === "length" && usage?.completion_tokens === nTokens, "chat streamed: the same text, finish_reason, usage");

const completion = await client.completions.create({ model: "model", prompt: "Hello world", max_tokens: 3 });
check(typeof completion.choices[0].text === "string" && completion.usage.completion_tokens === 3, "completions");

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === "model", "models.list");

try {
  await client.chat.completions.create({ model: "model", messages: [{ role: "wizard", content: "x" }] });
  check(false, "an unknown role: an error");
} catch (e) {
  check(e instanceof OpenAI.APIError && e.status === 400 && /unknown role/.test(e.message), `an unknown role: APIError 400 (${e.message})`);
}
// Embeddings: the SDK asks for base64 unless told otherwise, and decodes it.
const near = (got, wanted) => got.length === wanted.length && got.every((x, d) => Math.abs(x - wanted[d]) < 1e-4);
const texts = [0, 3].map((i) => golden.texts[i]);
const embedded = await client.embeddings.create({ model: "model", input: texts });
check(embedded.data.length === 2 && embedded.data.every((d, k) => d.index === k && near(d.embedding, golden.last[[0, 3][k]])),
      "embeddings.create, two texts (base64 on the wire): the reference's vectors within 1e-4");
check(embedded.usage.prompt_tokens === golden.inputs[0].length + golden.inputs[3].length &&
      embedded.usage.total_tokens === embedded.usage.prompt_tokens && embedded.model === "model", "embeddings: usage and model");
const floats = await client.embeddings.create({ model: "model", input: golden.inputs[1], encoding_format: "float" });
check(floats.data.length === 1 && near(floats.data[0].embedding, golden.last[1]), "embeddings.create, token ids as floats: the reference's vector");
const raw = await client.embeddings.create({ model: "model", input: golden.inputs[1], encoding_format: "base64" });
const bytes = Buffer.from(raw.data[0].embedding, "base64");
const decoded = Array.from({ length: bytes.length / 4 }, (_, d) => bytes.readFloatLE(4 * d));
check(decoded.length === floats.data[0].embedding.length && decoded.every((x, d) => x === Math.fround(floats.data[0].embedding[d])),
      "embeddings as base64: the same float32s (little-endian) as the floats");
try {
  await client.embeddings.create({ model: "model", input: [] });
  check(false, "embeddings of an empty list: an error");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && /empty/.test(e.message), `embeddings of an empty list: BadRequestError (${e.message})`);
}

const wrongKey = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "nope", maxRetries: 0 });
try {
  await wrongKey.models.list();
  check(false, "a wrong key: an error");
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError, "a wrong key: AuthenticationError");
}
// Tools from zod schemas; the model is random, at temperature 1: only the
// grammar makes its calls valid.
const Weather = z.object({ city: z.string().max(10), unit: z.enum(["celsius", "fahrenheit"]) });
const Time = z.object({ tz: z.string().max(12) });
const tools = [zodFunction({ name: "get_weather", parameters: Weather }), zodFunction({ name: "get_time", parameters: Time })];
const schemas = { get_weather: Weather, get_time: Time };
const ask = [{ role: "user", content: "What is the weather in Oslo?" }];
const validCall = (c) => c?.type === "function" && /^call_[A-Za-z0-9]{24}$/.test(c.id) && schemas[c.function.name] &&
  schemas[c.function.name].safeParse(JSON.parse(c.function.arguments)).success;
const base = { model: "model", messages: ask, tools, temperature: 1, max_tokens: 300, parallel_tool_calls: false };

const called = await client.chat.completions.create({ ...base, tool_choice: "required", seed: 5 });
const call = called.choices[0].message.tool_calls?.[0];
check(called.choices[0].finish_reason === "tool_calls" && called.choices[0].message.tool_calls.length === 1 && validCall(call),
  `tools, required: one call, its arguments valid by zod (${JSON.stringify(call)})`);

const toolStream = await client.chat.completions.create({ ...base, tool_choice: "required", seed: 5, stream: true });
const streamedCalls = [];
let toolFinish = null;
for await (const chunk of toolStream) {
  for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
    if (d.id) streamedCalls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: d.function.arguments ?? "" } };
    else streamedCalls[d.index].function.arguments += d.function?.arguments ?? "";
  }
  toolFinish = chunk.choices[0]?.finish_reason ?? toolFinish;
}
check(toolFinish === "tool_calls" && streamedCalls.length === 1 && validCall(streamedCalls[0]) &&
  streamedCalls[0].function.name === call?.function.name && streamedCalls[0].function.arguments === call?.function.arguments,
  `tools streamed: the same call in deltas (${JSON.stringify(streamedCalls)})`);

const named = await client.chat.completions.create({ ...base, tool_choice: { type: "function", function: { name: "get_time" } }, seed: 6 });
const namedCall = named.choices[0].message.tool_calls?.[0];
check(namedCall?.function.name === "get_time" && validCall(namedCall), `tool_choice names get_time: its call, valid (${JSON.stringify(namedCall)})`);

// The call and its result back in the history: accepted, and rendered.
const followUp = await client.chat.completions.create({ model: "model", tools, max_tokens: 2, messages: [
  ...ask, called.choices[0].message, { role: "tool", tool_call_id: call.id, content: "{\"temperature\": 4}" }] });
check(typeof followUp.choices[0].message.content === "string", "a history with the call and the tool's result: answered");

const parsedTools = await client.beta.chat.completions.parse({ ...base, tool_choice: "required", seed: 7 });
const parsedCall = parsedTools.choices[0].message.tool_calls?.[0];
check(parsedCall && schemas[parsedCall.function.name].safeParse(parsedCall.function.parsed_arguments).success,
  `beta.chat.completions.parse with zod tools: parsed_arguments (${JSON.stringify(parsedCall?.function)})`);

const Person = z.object({ name: z.string().max(8), age: z.number().int().min(0).max(120),
  tags: z.array(z.enum(["a", "b", "c"])).max(3), nick: z.string().max(4).nullable() });
let parsedOk = 0;
for (const seed of [1, 2, 3]) {
  try {
    const completion = await client.beta.chat.completions.parse({ model: "model", messages: [{ role: "user", content: "A person." }],
      response_format: zodResponseFormat(Person, "person"), temperature: 1, max_tokens: 400, seed });
    const parsed = completion.choices[0].message.parsed;
    if (parsed && Person.safeParse(parsed).success) parsedOk++;
    else console.log(`zodResponseFormat, seed ${seed}: ${JSON.stringify(completion.choices[0].message)}`);
  } catch (e) {
    console.log(`zodResponseFormat, seed ${seed}: ${e}`);
  }
}
check(parsedOk === 3, `zodResponseFormat with beta.chat.completions.parse: ${parsedOk} of 3 replies parsed by the SDK and valid`);

process.exit(failed ? 1 : 0);
