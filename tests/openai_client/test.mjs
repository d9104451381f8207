// tests/openai_client/test.mjs PORT WANT_REPLY N_TOKENS - run serve through
// the official openai npm package (a client no one here wrote): a chat
// completion, the same streamed, a completion, the model list, and an
// error surfaced as the SDK's APIError. Prints one "ok ..." or
// "FAIL ..." line per check.
import OpenAI from "openai";

const [port, want, nTokens] = [process.argv[2], process.argv[3], Number(process.argv[4])];
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
const wrongKey = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "nope", maxRetries: 0 });
try {
  await wrongKey.models.list();
  check(false, "a wrong key: an error");
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError, "a wrong key: AuthenticationError");
}
process.exit(failed ? 1 : 0);
