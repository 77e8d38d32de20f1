// keproxy demo page: chat through this proxy and show what it did to each request.
// Plain browser JavaScript, no dependencies, no build step. API calls go to this origin only:
//   GET  /v1/models                   the alias picker
//   POST /v1/chat/completions         the chat, with {"keproxy": {strategy, edit_mode, session}}
//   GET  /keproxy/transcripts/{id}    what keproxy logged (id from the x-keproxy-request-id header)
//   GET  /v1/edits/{id}, POST /v1/edits   edit memory
// An ES module (strict by default); the pure parts are in diff.js.
import { correctionSpans, historyDiff, messageText, wordDiff } from "./diff.js";

const $ = (selector) => document.querySelector(selector);

// URLs relative to the proxy root: the page lives at <root>/demo/.
const apiUrl = (path) => new URL(path, new URL("../", document.baseURI)).toString();

const state = {
  conversation: [], // {role, content, requestId?, corrections: [], postEdit?, pending?}
  transcripts: new Map(), // request id -> transcript entry
  edits: new Map(), // edit id -> edit object (cache for retrieved edits)
  selected: null, // request id shown in the inspector
  busy: false,
};

// --- small DOM helpers -------------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function badge(text, kind = "") {
  return el("span", { class: `badge ${kind}`.trim(), text });
}

function showError(message) {
  const box = $("#error");
  box.textContent = message;
  box.hidden = !message;
}

// --- API ---------------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

async function api(path, { method = "GET", body } = {}) {
  const headers = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  const key = $("#api-key").value.trim();
  if (key) headers.authorization = `Bearer ${key}`;
  const response = await fetch(apiUrl(path), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!response.ok) {
    const message = data?.error?.message ?? `${response.status} ${response.statusText}`;
    throw new ApiError(`${message} (HTTP ${response.status})`, response.status);
  }
  return { data, response };
}

async function loadModels() {
  try {
    const { data } = await api("v1/models");
    const ids = (data?.data ?? []).map((model) => model.id);
    $("#aliases").replaceChildren(...ids.map((id) => el("option", { value: id })));
    const alias = $("#alias");
    if (!alias.value && ids.length) alias.value = ids[0];
    if (!ids.length) alias.placeholder = "type an alias";
    showError("");
  } catch (error) {
    const hint = error.status === 401 ? " Enter the proxy's API key above." : "";
    showError(`Could not list the models: ${error.message}.${hint}`);
  }
}

async function loadEdit(id) {
  if (state.edits.has(id)) return state.edits.get(id);
  try {
    const { data } = await api(`v1/edits/${encodeURIComponent(id)}`);
    state.edits.set(id, data);
    return data;
  } catch {
    return null; // deleted since, or not readable with this key: show the id only
  }
}

// --- conversation ------------------------------------------------------------------------------------------

// `text` as nodes with each correction's old and new spans in <mark>.
function highlight(text, corrections) {
  const nodes = [];
  let at = 0;
  for (const { start, end, kind, correction } of correctionSpans(text, corrections)) {
    nodes.push(text.slice(at, start));
    const title = kind === "old" ? "corrected span (old)" : "correction (new)";
    nodes.push(
      el("mark", {
        class: `corr corr-${kind}`,
        title: `${title} · detector ${correction.detector}`,
        text: text.slice(start, end),
      }),
    );
    at = end;
  }
  nodes.push(text.slice(at));
  return nodes;
}

// A word diff as nodes: unchanged text, <del> and <ins>.
function diffNodes(before, after) {
  return wordDiff(before, after).map(({ op, text }) =>
    op === "same" ? document.createTextNode(text) : el(op, { text }),
  );
}

function correctionLabel(c) {
  const how = c.template ? `template ${c.template}` : c.detector;
  const conf = typeof c.confidence === "number" ? ` · ${Math.round(c.confidence * 100)}%` : "";
  return `${how}${conf}`;
}

function renderMessages() {
  const list = $("#messages");
  $("#empty-chat").hidden = state.conversation.length > 0;
  list.querySelectorAll(".msg").forEach((node) => node.remove());
  state.conversation.forEach((message, index) => {
    const bubble = el("div", { class: "bubble" });
    if (message.pending) {
      bubble.append(el("span", { class: "typing", "aria-label": "waiting for the answer" }, el("i"), el("i"), el("i")));
    } else if (message.role === "user" && message.corrections.length) {
      bubble.append(...highlight(message.content, message.corrections));
    } else {
      bubble.textContent = message.content;
    }
    const meta = el("div", { class: "meta" });
    if (message.role === "user") {
      for (const c of message.corrections) {
        meta.append(
          el(
            "span",
            { class: "chip correction-chip" },
            "correction: ",
            c.old ? el("s", { text: c.old }) : el("i", { text: "(located)" }),
            " → ",
            el("b", { text: c.new }),
            ` · ${correctionLabel(c)}`,
          ),
        );
      }
    } else if (message.requestId) {
      if (message.postEdit === "edited") meta.append(badge("post-edited", "good"));
      if (message.postEdit === "retained") meta.append(badge("post-edit: retained"));
      meta.append(
        el("button", {
          type: "button",
          class: "link",
          text: "inspect",
          title: message.requestId,
          onclick: () => select(message.requestId),
        }),
      );
    }
    const selected = message.requestId && message.requestId === state.selected;
    list.append(
      el(
        "li",
        {
          class: `msg msg-${message.role}${selected ? " selected" : ""}`,
          "data-index": index,
          "data-request-id": message.requestId,
        },
        el("div", { class: "role", text: message.role }),
        bubble,
        meta.childNodes.length ? meta : null,
      ),
    );
  });
  list.scrollTop = list.scrollHeight;
}

function addCorrections(transcript) {
  for (const c of transcript.corrections ?? []) {
    const message = state.conversation[c.turn_index];
    if (!message || message.role !== "user") continue;
    const same = (d) => d.old === c.old && d.new === c.new && d.detector === c.detector;
    if (!message.corrections.some(same)) message.corrections.push(c);
  }
}

async function send(text) {
  const model = $("#alias").value.trim();
  if (!model) {
    showError("Choose a model alias first.");
    return;
  }
  showError("");
  const turn = { role: "user", content: text, corrections: [] };
  const answer = { role: "assistant", content: "", corrections: [], pending: true };
  const messages = [...state.conversation, turn].map(({ role, content }) => ({ role, content }));
  state.conversation.push(turn, answer);
  setBusy(true);
  renderMessages();

  const keproxy = { strategy: $("#strategy").value, edit_mode: $("#edit-mode").value };
  const session = $("#session").value.trim();
  if (session) keproxy.session = session;
  let requestId;
  try {
    const { data, response } = await api("v1/chat/completions", {
      method: "POST",
      body: { model, messages, keproxy },
    });
    requestId = response.headers.get("x-keproxy-request-id");
    Object.assign(answer, {
      content: data?.choices?.[0]?.message?.content ?? "",
      pending: false,
      requestId,
      postEdit: response.headers.get("x-keproxy-post-edit"),
    });
    turn.requestId = requestId;
  } catch (error) {
    state.conversation.splice(state.conversation.indexOf(turn), 2); // the turn failed: give the text back
    $("#input").value = text;
    showError(error.message);
    setBusy(false);
    renderMessages();
    return;
  }
  setBusy(false);
  renderMessages();
  try {
    const { data: transcript } = await api(`keproxy/transcripts/${encodeURIComponent(requestId)}`);
    state.transcripts.set(requestId, transcript);
    addCorrections(transcript);
    await select(requestId);
  } catch (error) {
    showError(`The answer arrived but its transcript could not be read: ${error.message}`);
  }
}

function setBusy(busy) {
  state.busy = busy;
  $("#send").disabled = busy;
  $("#send").textContent = busy ? "Sending…" : "Send";
}

// --- inspector ---------------------------------------------------------------------------------------------

async function select(requestId) {
  state.selected = requestId;
  renderMessages();
  const transcript = state.transcripts.get(requestId);
  if (!transcript) return;
  const ids = (transcript.retrieved_edits ?? []).map((r) => r.id);
  if (transcript.post_edit?.edit_id) ids.push(transcript.post_edit.edit_id);
  await Promise.all(ids.map(loadEdit));
  if (state.selected === requestId) renderInspector(transcript);
}

function renderInspector(t) {
  $("#inspector-empty").hidden = true;
  $("#inspector-body").hidden = false;
  $("#request-id").textContent = t.request_id;
  const status = t.status === 200 ? badge("200 OK", "good") : badge(`HTTP ${t.status}`, "bad");
  const total = t.latency_ms?.total;
  $("#badges").replaceChildren(
    badge(t.alias),
    badge(`strategy ${t.strategy}`),
    badge(`edit mode ${t.edit_mode ?? "off"}`),
    status,
    typeof total === "number" ? badge(total >= 1000 ? `${(total / 1000).toFixed(1)} s` : `${Math.round(total)} ms`) : null,
  );
  $("#panel-corrections .panel-body").replaceChildren(...renderCorrections(t));
  $("#panel-diff .panel-body").replaceChildren(...renderDiff(t));
  $("#panel-memory .panel-body").replaceChildren(...renderMemory(t));
  $("#transcript-json").textContent = JSON.stringify(t, null, 2);
}

function renderCorrections(t) {
  const corrections = t.corrections ?? [];
  if (!corrections.length) return [el("p", { class: "muted", text: "No correction in this conversation." })];
  const latest = t.original_messages.length - 1;
  return [
    el(
      "ul",
      { class: "corrections" },
      corrections.map((c) =>
        el(
          "li",
          {},
          el("span", { class: "turn", text: c.turn_index === latest ? "this turn" : `turn ${c.turn_index}` }),
          c.old ? el("mark", { class: "corr corr-old", text: c.old }) : el("i", { text: "located by keproxy" }),
          el("span", { class: "arrow", text: "→" }),
          el("mark", { class: "corr corr-new", text: c.new }),
          el("span", { class: "muted", text: correctionLabel(c) }),
        ),
      ),
    ),
  ];
}

function renderDiff(t) {
  const rows = historyDiff(t.original_messages ?? [], t.forwarded_messages ?? []);
  const changed = rows.filter((r) => r.kind !== "same").length;
  const out = [];
  if (t.status !== 200 && !(t.forwarded_messages ?? []).length) {
    out.push(el("p", { class: "muted", text: "The request failed before anything was forwarded." }));
    return out;
  }
  const summary = changed
    ? `${changed} of ${rows.length} forwarded messages differ from what the client sent`
    : "Forwarded exactly as the client sent it";
  const extra = (t.editor_calls ?? []).length ? ` · ${t.editor_calls.length} extra upstream call(s) by the editor` : "";
  out.push(el("p", { class: "muted summary", text: summary + extra }));
  out.push(
    el(
      "ol",
      { class: "history" },
      rows.map((row) => {
        const after = messageText(row.message);
        const body =
          row.kind === "changed"
            ? diffNodes(messageText(row.before), after)
            : row.kind === "added"
              ? [el("ins", { text: after })]
              : row.kind === "removed"
                ? [el("del", { text: after })]
                : [after];
        return el(
          "li",
          { class: `row row-${row.kind}` },
          el("span", { class: "role", text: row.message.role }),
          el("span", { class: "kind", text: row.kind === "same" ? "" : row.kind }),
          el("div", { class: "text" }, body),
        );
      }),
    ),
  );
  const edits = t.edits ?? [];
  if (edits.length) {
    out.push(
      el(
        "ul",
        { class: "text-edits" },
        edits.map((e) =>
          el(
            "li",
            {},
            `turn ${e.turn_index}: `,
            el("del", { text: e.before }),
            " → ",
            el("ins", { text: e.after }),
            typeof e.score === "number" ? el("span", { class: "muted", text: ` located, score ${e.score.toFixed(2)}` }) : null,
          ),
        ),
      ),
    );
  }
  return out;
}

function editSummary(id) {
  const edit = state.edits.get(id);
  if (!edit) return [el("code", { text: id })];
  const objects =
    edit.target_true || edit.target_new
      ? el("span", { class: "muted" }, " (", edit.target_true ?? "?", " → ", edit.target_new ?? "?", ")")
      : null;
  return [el("span", { class: "edit-text", text: edit.text }), objects];
}

function renderMemory(t) {
  const out = [];
  const mode = t.edit_mode ?? "off";
  for (const id of t.memory_writes ?? []) {
    out.push(el("p", {}, badge("stored", "info"), " the correction as session edit ", el("code", { text: id })));
  }
  if (mode === "off") {
    out.push(el("p", { class: "muted", text: "Edit mode off: no edits retrieved. Pick postedit, prompt, ike or serac." }));
    return out;
  }
  const retrieved = t.retrieved_edits ?? [];
  if (!retrieved.length) {
    out.push(el("p", { class: "muted", text: "No stored edit visible to this request." }));
  } else {
    out.push(
      el(
        "ul",
        { class: "retrieved" },
        retrieved.map((r) =>
          el(
            "li",
            {},
            badge(`score ${Number(r.score).toFixed(2)}`, "info"),
            badge(r.scope),
            ...editSummary(r.id),
            t.applied_edit === r.id ? badge("put into the request", "good") : null,
          ),
        ),
      ),
    );
  }
  if (mode !== "postedit") return out;
  const record = t.post_edit;
  if (!record) {
    out.push(el("p", { class: "muted", text: "No post-edit: no retrieved edit reached the score gate." }));
    return out;
  }
  const applied = !record.retained;
  out.push(
    el(
      "div",
      { class: `post-edit ${applied ? "applied" : "retained"}` },
      el(
        "p",
        {},
        applied ? badge("post-edit applied", "good") : badge("retained", "muted-badge"),
        ` by the ${record.editor} post-editor with edit `,
        el("code", { text: record.edit_id }),
        ` (score ${Number(record.score).toFixed(2)})`,
      ),
      applied
        ? el("div", { class: "text answer-diff" }, diffNodes(record.before ?? "", record.after ?? ""))
        : el("div", { class: "text", text: record.before ?? "" }),
    ),
  );
  return out;
}

// --- edit form ---------------------------------------------------------------------------------------------

async function addEdit(event) {
  event.preventDefault();
  const body = { text: $("#edit-text").value.trim(), kind: "text", scope: $("#edit-scope").value };
  const old = $("#edit-old").value.trim();
  const neu = $("#edit-new").value.trim();
  if (old) body.target_true = old;
  if (neu) body.target_new = neu;
  if (body.scope === "session") {
    body.scope_id = $("#session").value.trim();
    if (!body.scope_id) {
      showError("Set a session id above for a session edit.");
      return;
    }
  }
  try {
    const { data: edit } = await api("v1/edits", { method: "POST", body });
    state.edits.set(edit.id, edit);
    showError("");
    $("#edit-list").prepend(
      el(
        "li",
        { "data-edit-id": edit.id },
        badge(edit.scope === "global" ? "global" : `session ${edit.scope_id}`),
        ...editSummary(edit.id),
        el("code", { class: "muted", text: edit.id }),
      ),
    );
    $("#edit-form").reset();
  } catch (error) {
    showError(`Could not add the edit: ${error.message}`);
  }
}

// --- wiring ------------------------------------------------------------------------------------------------

function newConversation() {
  state.conversation = [];
  state.selected = null;
  renderMessages();
  $("#inspector-empty").hidden = false;
  $("#inspector-body").hidden = true;
  $("#request-id").textContent = "none yet";
  $("#badges").replaceChildren();
  $("#input").focus();
}

function start() {
  $("#composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("#input").value.trim();
    if (!text || state.busy) return;
    $("#input").value = "";
    send(text);
  });
  $("#input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("#composer").requestSubmit();
    }
  });
  $("#new-chat").addEventListener("click", newConversation);
  $("#edit-form").addEventListener("submit", addEdit);
  $("#settings").addEventListener("submit", (event) => event.preventDefault());
  $("#api-key").addEventListener("change", loadModels);
  loadModels();
}

start(); // module scripts run once the document is parsed
