// Unit tests of the demo page's pure helpers (keproxy/proxy/static/diff.js) under node's test runner:
//   node --test tests/e2e/diff.test.mjs     (run by tests/proxy/test_demo_e2e.py; needs node only)
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

// loaded from source as a data: URL, so it is an ES module whatever node thinks of a bare .js file
const source = readFileSync(new URL("../../keproxy/proxy/static/diff.js", import.meta.url), "utf8");
const { correctionSpans, historyDiff, lcsDiff, messageText, wordDiff } = await import(
  `data:text/javascript,${encodeURIComponent(source)}`
);

test("lcsDiff keeps the longest common subsequence", () => {
  const ops = lcsDiff([..."abcd"], [..."acxd"]);
  assert.equal(ops.map((o) => o.op).join(","), "same,del,same,ins,same");
  assert.deepEqual(lcsDiff([], []), []);
  assert.deepEqual(lcsDiff(["a"], []), [{ op: "del", a: "a" }]);
});

test("wordDiff replaces whole words and keeps punctuation", () => {
  assert.deepEqual(wordDiff("It is held in Paris.", "It is held in Rome."), [
    { op: "same", text: "It is held in " },
    { op: "del", text: "Paris" },
    { op: "ins", text: "Rome" },
    { op: "same", text: "." },
  ]);
  assert.deepEqual(wordDiff("same", "same"), [{ op: "same", text: "same" }]);
  assert.deepEqual(wordDiff("", "new text"), [{ op: "ins", text: "new text" }]);
});

test("messageText reads strings and text parts", () => {
  assert.equal(messageText({ role: "user", content: "hi" }), "hi");
  const parts = [{ type: "text", text: "a" }, { type: "image_url", image_url: {} }, { type: "text", text: "b" }];
  assert.equal(messageText({ role: "user", content: parts }), "a\nb");
  assert.equal(messageText({ role: "assistant", content: null }), "");
});

test("historyDiff pairs changed messages by role and marks added and removed ones", () => {
  const u = (content) => ({ role: "user", content });
  const a = (content) => ({ role: "assistant", content });
  const patched = historyDiff([u("in Paris"), a("Paris."), u("fix")], [u("in Rome"), a("Rome."), u("fix")]);
  assert.deepEqual(patched.map((r) => r.kind), ["changed", "changed", "same"]);
  assert.equal(patched[0].before.content, "in Paris");
  const verified = historyDiff([u("q")], [u("q"), a("b"), u("Really?")]);
  assert.deepEqual(verified.map((r) => r.kind), ["same", "added", "added"]);
  const deleted = historyDiff([u("story"), a("stale"), u("fix")], [u("story"), u("fix")]);
  assert.deepEqual(deleted.map((r) => [r.kind, r.index]), [["same", 0], ["removed", 1], ["same", 1]]);
});

test("correctionSpans finds old and new text without overlaps, case-insensitively", () => {
  const c = { old: "Paris", new: "Rome", detector: "template" };
  const text = `Wrong. It's not "paris," but "Rome"`;
  const spans = correctionSpans(text, [c]);
  assert.deepEqual(spans.map((s) => [s.kind, text.slice(s.start, s.end)]), [["old", "paris"], ["new", "Rome"]]);
  assert.deepEqual(correctionSpans("nothing here", [c]), []);
  const located = correctionSpans("Actually, it is in Rome (a.k.a. Roma).", [{ old: null, new: "Rome (a.k.a." }]);
  assert.deepEqual(located.map((s) => s.kind), ["new"]);
  const twice = correctionSpans("Rome or Rome", [c, { ...c, detector: "cue" }]);
  assert.deepEqual(twice.map((s) => s.start), [0, 8]);
});
