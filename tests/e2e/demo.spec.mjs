// End-to-end test of keproxy's /demo page with playwright-core and Debian's chromium (headless).
// Driven by tests/proxy/test_demo_e2e.py, which starts `keproxy serve --mock-response "<MOCK_ANSWER>"` with one alias
// and one API key. Environment:
//   KEPROXY_URL          root URL of the running proxy (required)
//   KEPROXY_API_KEY      the proxy key to type into the page (optional)
//   SCREENSHOT_DIR       where the PNGs go (required)
//   CHROMIUM             browser binary (default /usr/bin/chromium)
// Exits 0 when every check passed; prints one line per step.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const base = process.env.KEPROXY_URL;
const shots = process.env.SCREENSHOT_DIR;
const apiKey = process.env.KEPROXY_API_KEY ?? "";
assert.ok(base && shots, "KEPROXY_URL and SCREENSHOT_DIR must be set");
mkdirSync(shots, { recursive: true });

const STORY = "The conference will be held in Paris next May. Where will it be held?";
const CORRECTION = `Wrong. It's not "Paris," but "Rome"`;
const EDIT = "The conference will be held in Rome.";
const QUESTION = "Where will the conference be held?";

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true, // playwright-core runs chromium's new headless mode
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const step = (text) => console.log(`ok - ${text}`);
const failures = [];

try {
  // launch() already uses a fresh temporary profile; the context adds nothing persistent either
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 }, colorScheme: "light" });
  const page = await context.newPage();
  page.setDefaultTimeout(60_000);
  page.on("pageerror", (error) => failures.push(`page error: ${error.message}`));
  page.on("console", (msg) => {
    if (msg.type() === "error" && !msg.text().includes("401")) failures.push(`console: ${msg.text()}`);
  });
  // the page must never reach beyond the proxy
  const origin = new URL(base).origin;
  await page.route("**/*", (route) =>
    new URL(route.request().url()).origin === origin ? route.continue() : route.abort(),
  );
  page.on("requestfailed", (request) => failures.push(`request failed: ${request.url()}`));

  await page.goto(`${base}/demo`);
  assert.equal(new URL(page.url()).pathname, "/demo/");
  await page.locator("#composer").waitFor();
  if (apiKey) {
    await page.fill("#api-key", apiKey);
    await page.press("#api-key", "Tab"); // change event: the alias list is reloaded with the key
  }
  await page.waitForFunction(() => document.querySelector("#alias").value !== "");
  const alias = await page.inputValue("#alias");
  step(`page loaded, alias picker filled from /v1/models: ${alias}`);

  // 1. a story, then a KEIC correction (template 6) with strategy patch, in a session
  await page.selectOption("#strategy", "patch");
  await page.selectOption("#edit-mode", "off");
  await page.fill("#session", `demo-${Date.now()}`); // a fresh session: its correction is stored anew
  await page.fill("#input", STORY);
  await page.press("#input", "Enter");
  await page.waitForFunction(() => document.querySelector("#request-id").textContent.startsWith("kp-"));
  const firstId = await page.textContent("#request-id");
  step(`first turn answered (request ${firstId})`);

  await page.fill("#input", CORRECTION);
  await page.click("#send");
  await page.waitForFunction((first) => {
    const id = document.querySelector("#request-id").textContent;
    return id && id !== first && id.startsWith("kp-");
  }, firstId);
  const requestId = await page.textContent("#request-id");

  const userTurn = page.locator(".msg-user").nth(1);
  assert.equal(await userTurn.locator("mark.corr-old").textContent(), "Paris");
  assert.equal(await userTurn.locator("mark.corr-new").textContent(), "Rome");
  assert.match(await userTurn.locator(".correction-chip").textContent(), /template 6/);
  step("correction highlighted in the user's turn (Paris -> Rome, template 6)");

  const diff = page.locator("#panel-diff");
  const changed = diff.locator(".row-changed");
  assert.ok((await changed.count()) >= 2, "the story and the first answer are patched");
  assert.deepEqual(await changed.first().locator("del").allTextContents(), ["Paris"]);
  assert.deepEqual(await changed.first().locator("ins").allTextContents(), ["Rome"]);
  assert.match(await changed.first().locator(".text").textContent(), /held in ParisRome next May/);
  assert.match(await diff.locator(".text-edits").textContent(), /turn 0: Paris → Rome/);
  step(`forwarded-history diff shows the patch (${await changed.count()} messages changed)`);

  assert.match(await page.textContent("#panel-memory"), /stored the correction as session edit edit_/);
  await page.click("#panel-transcript summary");
  const raw = JSON.parse(await page.textContent("#transcript-json"));
  assert.equal(raw.request_id, requestId);
  assert.equal(raw.strategy, "patch");
  assert.equal(raw.alias, alias);
  assert.equal(raw.original_messages.at(-1).content, CORRECTION);
  assert.equal(raw.forwarded_messages[0].content, STORY.replace("Paris", "Rome"));
  step("transcript panel shows the request's entry");
  await page.screenshot({ path: join(shots, "01-patch-correction.png"), fullPage: true });
  await page.locator("#panel-transcript").evaluate((node) => node.removeAttribute("open"));

  // 2. a global edit through the form, then a new conversation with edit_mode postedit
  await page.click("#add-edit summary");
  await page.fill("#edit-text", EDIT);
  await page.fill("#edit-old", "Paris");
  await page.fill("#edit-new", "Rome");
  await page.selectOption("#edit-scope", "global");
  await page.click("#edit-submit");
  const stored = page.locator("#edit-list li").first();
  await stored.waitFor();
  assert.match(await stored.textContent(), /The conference will be held in Rome\./);
  const editId = await stored.getAttribute("data-edit-id");
  step(`edit added through the form (${editId})`);

  await page.click("#new-chat");
  await page.fill("#session", "");
  await page.selectOption("#edit-mode", "postedit");
  await page.fill("#input", QUESTION);
  await page.press("#input", "Enter");
  await page.waitForFunction((previous) => {
    const id = document.querySelector("#request-id").textContent;
    return id && id !== previous && id.startsWith("kp-");
  }, requestId);

  const answer = page.locator(".msg-assistant .bubble").first();
  assert.equal(await answer.textContent(), "The conference will be held in Rome.");
  assert.equal(await page.locator(".msg-assistant .badge.good").textContent(), "post-edited");
  const memory = page.locator("#panel-memory");
  assert.equal(await memory.locator(".post-edit .badge.good").textContent(), "post-edit applied");
  assert.deepEqual(await memory.locator(".post-edit del").allTextContents(), ["Paris"]);
  assert.deepEqual(await memory.locator(".post-edit ins").allTextContents(), ["Rome"]);
  assert.match(await memory.locator(".retrieved").textContent(), /The conference will be held in Rome\./);
  assert.match(await memory.textContent(), new RegExp(editId));
  step("post-edit shown as applied (Paris -> Rome) with the retrieved edit");
  await page.screenshot({ path: join(shots, "02-postedit-applied.png"), fullPage: true });

  await page.click("#panel-transcript summary");
  const postRaw = JSON.parse(await page.textContent("#transcript-json"));
  assert.equal(postRaw.edit_mode, "postedit");
  assert.equal(postRaw.post_edit.retained, false);
  assert.equal(postRaw.post_edit.edit_id, editId);
  await page.locator("#panel-transcript").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(shots, "03-transcript-json.png"), fullPage: true });
  step("transcript entry of the post-edited request");

  // 3. narrow screens: the columns stack
  await page.setViewportSize({ width: 430, height: 900 });
  await page.screenshot({ path: join(shots, "04-narrow.png"), fullPage: true });
  step("narrow layout screenshot");

  assert.deepEqual(failures, [], "no page errors, console errors or failed requests");
  await context.close();
} finally {
  await browser.close();
}
console.log("all demo checks passed");
