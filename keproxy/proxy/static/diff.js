// Pure helpers of the demo page (no DOM): diffs and correction spans. An ES module, also imported by
// tests/e2e/diff.test.mjs under node.

// Edit script turning a into b: [{op: "same" | "del" | "ins", a?, b?}], by longest common subsequence
// (equal(x, y) compares items). Inputs past 4M cell pairs give "all deleted, all inserted".
export function lcsDiff(a, b, equal = (x, y) => x === y) {
  const n = a.length;
  const m = b.length;
  if (n * m > 4_000_000) {
    return [...a.map((x) => ({ op: "del", a: x })), ...b.map((y) => ({ op: "ins", b: y }))];
  }
  const width = m + 1;
  const table = new Uint32Array((n + 1) * width); // table[i][j]: LCS length of a[i:] and b[j:]
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i * width + j] = equal(a[i], b[j])
        ? table[(i + 1) * width + j + 1] + 1
        : Math.max(table[(i + 1) * width + j], table[i * width + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (equal(a[i], b[j])) {
      out.push({ op: "same", a: a[i++], b: b[j++] });
    } else if (table[(i + 1) * width + j] >= table[i * width + j + 1]) {
      out.push({ op: "del", a: a[i++] });
    } else {
      out.push({ op: "ins", b: b[j++] });
    }
  }
  while (i < n) out.push({ op: "del", a: a[i++] });
  while (j < m) out.push({ op: "ins", b: b[j++] });
  return out;
}

// Whitespace runs, words (letters, digits, _, ' and -) and single other characters.
const TOKEN = /\s+|[\p{L}\p{N}_'’-]+|[^\s\p{L}\p{N}_'’-]/gu;

// Word diff of two texts: [{op: "same" | "del" | "ins", text}], adjacent runs of one op merged.
export function wordDiff(before, after) {
  const runs = [];
  for (const { op, a, b } of lcsDiff(before.match(TOKEN) ?? [], after.match(TOKEN) ?? [])) {
    const text = op === "ins" ? b : a;
    const last = runs.at(-1);
    if (last && last.op === op) last.text += text;
    else runs.push({ op, text });
  }
  return runs;
}

// The text of an OpenAI chat message: its string content, or its text parts joined by newlines.
export function messageText(message) {
  const content = message?.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .filter((part) => part?.type === "text")
      .map((part) => part.text)
      .join("\n");
  }
  return content == null ? "" : JSON.stringify(content);
}

// Rows of the forwarded-history diff, in forwarded order (removed messages where they were):
// {kind: "same" | "changed" | "added" | "removed", message, index, before?}. Within a block of differing
// messages, a removed and an added message of the same role (in order) pair up as "changed".
export function historyDiff(original, forwarded) {
  const key = (message) => `${message.role}\u0000${messageText(message)}`;
  const ops = lcsDiff(original.map(key), forwarded.map(key));
  const rows = [];
  let ia = 0;
  let ib = 0;
  let k = 0;
  while (k < ops.length) {
    if (ops[k].op === "same") {
      rows.push({ kind: "same", message: forwarded[ib], index: ib });
      ia++;
      ib++;
      k++;
      continue;
    }
    const dels = [];
    const inss = [];
    while (k < ops.length && ops[k].op !== "same") {
      if (ops[k].op === "del") dels.push(ia++);
      else inss.push(ib++);
      k++;
    }
    for (const bi of inss) {
      const pos = dels.findIndex((ai) => original[ai].role === forwarded[bi].role);
      if (pos >= 0) {
        const [ai] = dels.splice(pos, 1);
        rows.push({ kind: "changed", message: forwarded[bi], index: bi, before: original[ai] });
      } else {
        rows.push({ kind: "added", message: forwarded[bi], index: bi });
      }
    }
    for (const ai of dels) rows.push({ kind: "removed", message: original[ai], index: ai });
  }
  return rows;
}

const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// Where each correction's old and new text sit in `text` (a user turn): [{start, end, kind: "old" | "new",
// correction}] sorted by start, in UTF-16 offsets. The first case-insensitive match that overlaps no span
// already claimed; text not found is skipped.
export function correctionSpans(text, corrections) {
  const spans = [];
  const claim = (needle, kind, correction) => {
    const target = (needle ?? "").trim();
    if (!target) return;
    const pattern = new RegExp(escapeRegExp(target), "giu");
    for (const match of text.matchAll(pattern)) {
      const start = match.index;
      const end = start + match[0].length;
      if (!spans.some((s) => start < s.end && s.start < end)) {
        spans.push({ start, end, kind, correction });
        return;
      }
    }
  };
  for (const c of corrections) {
    claim(c.old, "old", c);
    claim(c.new, "new", c);
  }
  return spans.sort((x, y) => x.start - y.start);
}
