// tests/browser/test.mjs PORT KEY_PORT KEY WANT N_TOKENS LOG TMP - the chat
// page of `run serve` (GET /) in Debian's Chromium, driven by puppeteer-core
// (code no one here wrote, in a real browser):
//   - a message sent from the page streams back the reply the API gives for
//     the same request (and the reference's, WANT), with its tokens per
//     second and context use;
//   - Stop aborts a long reply midway and the server frees the slot
//     (/metrics' run_slots_busy back to 0, the log's 499 line);
//   - after a reload the conversations are still there;
//   - a stored reply holding <script>, <img onerror> and a javascript: link
//     shows as text, no script runs, and its markdown (lists, emphasis,
//     code with a copy button, folded thinking) is drawn;
//   - on the server started with --api-key (KEY_PORT) the page asks for the
//     key (dismissed, it shows the server's message), refuses a wrong one,
//     and works with the right one.
// PORT's server runs with -c 4096, KEY_PORT's with --api-key KEY; LOG is
// PORT's server log; TMP a folder for the browser's profile. Prints one
// "ok ..." or "FAIL ..." line per check.
import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const [port, keyPort, key, want, nTokens, log, tmp] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const keyBase = `http://127.0.0.1:${keyPort}`;
let failed = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok" : "FAIL"} ${what}`);
  if (!ok) failed++;
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/* Polls fn until it returns something truthy (or `seconds` pass). */
async function until(fn, seconds = 20) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await fn();
    if (value || Date.now() > deadline) return value;
    await sleep(50);
  }
}

async function busySlots() {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(text.match(/^run_slots_busy (\d+)$/m)?.[1]);
}

const browser = await puppeteer.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", `--user-data-dir=${fs.mkdtempSync(path.join(tmp, "profile-"))}`],
});
const problems = [];
async function open(url) {
  const page = await browser.newPage();
  page.on("pageerror", (error) => problems.push(`${url}: page error: ${error.message}`));
  page.on("console", (message) => {
    // The 401s of the key test are expected; anything else is a problem.
    if (message.type() === "error" && !/status of 401/.test(message.text())) problems.push(`${url}: console: ${message.text()}`);
  });
  await page.goto(url);
  return page;
}

/* The text of the last reply, and whether it is still streaming. */
const lastReply = (page) => page.evaluate(() => {
  const replies = document.querySelectorAll("#messages .message.assistant");
  const last = replies[replies.length - 1];
  return { text: last ? last.querySelector(".body").textContent : null, streaming: !document.getElementById("stop").hidden };
});

async function setSetting(page, id, value) {
  if (await page.$eval("#settings", (e) => e.hidden)) await page.click("#settings-button");
  await page.$eval(`#${id}`, (e) => { e.value = ""; });
  await page.type(`#${id}`, String(value));
}

async function sendMessage(page, text) {
  await page.type("#input", text);
  await page.keyboard.press("Enter");
}

try {
  // ---- a message and its streamed reply ----
  const page = await open(`${base}/`);
  await until(() => page.$eval("#model-name", (e) => e.textContent === "model"));
  check(await page.$eval("#model-name", (e) => e.textContent) === "model", "the page shows the model's name from /props");
  await setSetting(page, "temperature", 0);
  await setSetting(page, "max_tokens", nTokens);
  await sendMessage(page, "hi");
  await until(async () => (await lastReply(page)).text && !(await lastReply(page)).streaming);
  const shown = (await lastReply(page)).text;
  const api = await (await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], temperature: 0, max_tokens: Number(nTokens) }),
  })).json();
  const apiText = api.choices[0].message.content;
  check(shown === apiText, `the streamed reply shown is the API's for the same request (${JSON.stringify(shown)} vs ${JSON.stringify(apiText)})`);
  check(apiText === want, "and the reference's reply");
  const stored = await page.evaluate(() => JSON.parse(localStorage.getItem("run.conversations")));
  check(stored.length === 1 && stored[0].messages.length === 2 && stored[0].messages[1].content === apiText,
        "the conversation is stored with the reply's text");
  const stats = await page.$eval("#messages .message.assistant .meta", (e) => e.textContent);
  const m = stats.match(/^(\d+) tokens \u00b7 ([\d.]+) tokens\/s \u00b7 context (\d+) \/ (\d+) \((\d+)%\)$/);
  const used = api.usage.prompt_tokens + api.usage.completion_tokens;
  check(m && Number(m[1]) === Number(nTokens) && Number(m[2]) > 0 && Number(m[3]) === used && Number(m[4]) === 4096,
        `tokens, tokens per second and context use shown (${JSON.stringify(stats)}; the API's usage: ${used} of 4096)`);
  check(await page.$eval("#stats", (e) => e.textContent) === `context ${used} / 4096 (1%)`, "below the box: the context use");

  // ---- Stop: the fetch aborted, the slot freed ----
  await page.click("#new-chat");
  await setSetting(page, "max_tokens", 3000);
  await sendMessage(page, "tell me a long story");
  const partial = await until(async () => {
    const r = await lastReply(page);
    return r.streaming && r.text && r.text.length > 0 ? r : null;
  });
  check(partial && partial.streaming, "a long reply streams in: text shown while it is still coming");
  check(/^\d+ tokens?( \u00b7 [\d.]+ tokens\/s)?$/.test(await page.$eval("#stats", (e) => e.textContent)),
        "while it streams: its tokens and speed so far below the box");
  check(await busySlots() === 1, "while it streams, /metrics shows a busy slot");
  await page.click("#stop");
  await until(async () => !(await lastReply(page)).streaming, 5);
  const stoppedText = (await lastReply(page)).text;
  await sleep(300);
  check((await lastReply(page)).text === stoppedText, "after Stop the reply grows no more");
  check(await page.$eval("#messages .message.assistant:last-child .stopped", (e) => e.textContent) === "stopped",
        "the reply is marked stopped");
  check(await until(async () => (await busySlots()) === 0, 5), "the server freed the slot (/metrics: run_slots_busy 0)");
  const line = await until(() => fs.readFileSync(log, "utf8").match(/POST \/v1\/chat\/completions 499 prompt=\d+ cached=\d+ generated=(\d+)/), 5);
  check(line && Number(line[1]) > 0 && Number(line[1]) < 3000,
        `the server logged the request as closed by the client (499) after ${line && line[1]} of 3000 tokens`);

  // ---- a reload keeps the conversations ----
  await page.reload();
  const titles = await page.$$eval("#conversations li .title", (items) => items.map((e) => e.textContent));
  check(titles.length === 2 && titles[0] === "tell me a long story" && titles[1] === "hi", `after a reload: both conversations listed (${titles})`);
  check((await lastReply(page)).text === stoppedText, "after a reload: the current conversation shown as it was");
  await page.click("#conversations li:nth-child(2) .title");
  check((await lastReply(page)).text === apiText && await page.$eval("#temperature", (e) => e.value) === "0",
        "after a reload: the first conversation opens with its reply, and the settings are kept");

  // ---- hostile text in a stored reply: text, never HTML ----
  const hostile = [
    "<think>secret thoughts</think>Here is **bold**, *emphasis*, `<b>code</b>` and ~~gone~~.",
    "",
    "<script>window.__pwned = 1</script>",
    "<img src=x onerror=\"window.__pwned = 2\">",
    "[click](javascript:window.__pwned=3) and [a site](https://example.com/x) and [bad](http://[oops)",
    "",
    "- first <i>item</i>",
    "- second",
    "  1. nested",
    "",
    "```html",
    "<script>alert(1)</script>",
    "```",
  ].join("\n");
  await page.evaluate((content) => {
    const conversations = JSON.parse(localStorage.getItem("run.conversations"));
    conversations.unshift({ id: "hostile", title: "<img src=x onerror=\"window.__pwned = 4\">",
                            messages: [{ role: "user", content: "<script>window.__pwned = 5</script>" }, { role: "assistant", content }] });
    localStorage.setItem("run.conversations", JSON.stringify(conversations));
    localStorage.setItem("run.current", JSON.stringify("hostile"));
  }, hostile);
  await page.reload();
  await sleep(300);
  const seen = await page.evaluate(() => {
    const messages = document.getElementById("messages");
    const reply = messages.querySelector(".message.assistant");
    const body = reply.querySelector(".body");
    return {
      pwned: window.__pwned,
      elements: document.querySelectorAll("body script").length,
      injected: document.querySelectorAll("#messages img, #messages script, #messages iframe, #conversations img, [onerror]").length,
      text: body.textContent,
      user: messages.querySelector(".message.user .body").textContent,
      title: document.querySelector("#conversations li .title").textContent,
      strong: [...body.querySelectorAll("p strong")].map((e) => e.textContent),
      em: [...body.querySelectorAll("p em")].map((e) => e.textContent),
      code: [...body.querySelectorAll("p code")].map((e) => e.textContent),
      del: [...body.querySelectorAll("p del")].map((e) => e.textContent),
      links: [...body.querySelectorAll("a")].map((e) => e.getAttribute("href")),
      items: [...body.querySelectorAll(":scope > ul > li")].map((e) => e.firstChild.textContent),
      nested: [...body.querySelectorAll("ul > li > ol > li")].map((e) => e.textContent),
      block: body.querySelector(".code-block pre code")?.textContent,
      language: body.querySelector(".code-block .language")?.textContent,
      thinking: reply.querySelector("details.thinking .thoughts").textContent,
      thinkingOpen: reply.querySelector("details.thinking").open,
    };
  });
  check(seen.pwned === undefined && seen.elements === 1 && seen.injected === 0,
        `hostile text: no script ran, no element made of it (pwned ${seen.pwned}, ${seen.injected} injected)`);
  check(seen.text.includes("<script>window.__pwned = 1</script>") && seen.text.includes("<img src=x onerror=\"window.__pwned = 2\">") &&
        seen.user === "<script>window.__pwned = 5</script>" && seen.title === "<img src=x onerror=\"window.__pwned = 4\">",
        "hostile text: shown as the text it is, in the reply, the message and the title");
  check(JSON.stringify(seen.links) === JSON.stringify(["https://example.com/x"]) && seen.text.includes("[click](javascript:window.__pwned=3)") &&
        seen.text.includes("[bad](http://[oops)"), `links: http(s) only, a javascript: one and a broken one left as text (${seen.links})`);
  check(JSON.stringify([seen.strong, seen.em, seen.code, seen.del]) === JSON.stringify([["bold"], ["emphasis"], ["<b>code</b>"], ["gone"]]),
        `markdown: strong, emphasis, inline code, strikethrough (${JSON.stringify([seen.strong, seen.em, seen.code, seen.del])})`);
  check(JSON.stringify(seen.items) === JSON.stringify(["first <i>item</i>", "second"]) && JSON.stringify(seen.nested) === JSON.stringify(["nested"]),
        `markdown: a list with a nested ordered list (${JSON.stringify([seen.items, seen.nested])})`);
  check(seen.block === "<script>alert(1)</script>" && seen.language === "html", "markdown: a fenced code block, its language named");
  check(seen.thinking === "secret thoughts" && !seen.thinkingOpen && !seen.text.includes("secret thoughts"),
        "thinking: folded apart from the answer");
  const context = browser.defaultBrowserContext();
  await context.overridePermissions(base, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
  await page.click(".code-block .copy");
  await until(() => page.$eval(".code-block .copy", (e) => e.textContent === "Copied"), 3);
  check(await page.evaluate(() => navigator.clipboard.readText()) === "<script>alert(1)</script>",
        "the copy button puts the code on the clipboard");
  await page.close();

  // ---- --api-key: the page asks for the key ----
  const keyed = await open(`${keyBase}/`);
  await until(() => keyed.$eval("#key-dialog", (e) => e.open));
  check(await keyed.$eval("#key-dialog", (e) => e.open), "a server with --api-key: the page asks for the key");
  await keyed.keyboard.press("Escape");
  await until(() => keyed.$eval("#error", (e) => !e.hidden));
  check(!(await keyed.$eval("#key-dialog", (e) => e.open)) && /API key/.test(await keyed.$eval("#error", (e) => e.textContent)),
        "the question dismissed: the server's 401 message shown");
  await keyed.reload();
  await until(() => keyed.$eval("#key-dialog", (e) => e.open));
  await keyed.type("#key-input", "wrong");
  await keyed.click("#key-ok");
  await until(() => keyed.$eval("#key-note", (e) => !e.hidden && e.textContent.includes("refused")));
  check(await keyed.$eval("#key-note", (e) => !e.hidden) && await keyed.$eval("#key-dialog", (e) => e.open),
        "a wrong key: refused, asked again");
  await keyed.type("#key-input", key);
  await keyed.click("#key-ok");
  await until(() => keyed.$eval("#model-name", (e) => e.textContent === "model"));
  check(!(await keyed.$eval("#key-dialog", (e) => e.open)) && await keyed.$eval("#model-name", (e) => e.textContent) === "model",
        "the right key: the dialog closes and /props answers");
  await setSetting(keyed, "temperature", 0);
  await setSetting(keyed, "max_tokens", nTokens);
  await sendMessage(keyed, "hi");
  await until(async () => (await lastReply(keyed)).text && !(await lastReply(keyed)).streaming);
  check((await lastReply(keyed)).text === apiText, "with the key, a message gets its reply");
  check(await keyed.evaluate(() => localStorage.getItem("run.apiKey")) === key, "the key is kept in the browser's storage");
} catch (error) {
  check(false, `the browser test ran to its end (${error.stack})`);
}
check(problems.length === 0, `no page error, no console error (${problems.join("; ")})`);
await browser.close();
process.exit(failed ? 1 : 0);
