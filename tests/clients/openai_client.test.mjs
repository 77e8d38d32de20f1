// The real openai npm SDK (pinned in package-lock.json) against keproxy in front of the recording upstream:
// one top-level test per case of tests/clients/cases.py, named by its id. Run by
// tests/clients/test_node_client.py, which starts the servers and passes KEPROXY_BASE_URL (keproxy's /v1)
// and RECORDER_URL (the upstream's root, whose GET /recorded lists the request bodies keproxy forwarded).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import OpenAI from "openai";

const BASE_URL = process.env.KEPROXY_BASE_URL;
const RECORDER_URL = process.env.RECORDER_URL;
assert.ok(BASE_URL && RECORDER_URL, "KEPROXY_BASE_URL and RECORDER_URL must be set");

const MEETING = "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop.";
const MEETING_CORRECTION = "Actually, it's at 4pm.";
const MEETING_CORRECTED = "The meeting is on Tuesday at 4pm in Room 204. Please bring your laptop.";
const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The current weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string", enum: ["Paris"] } },
      required: ["city"],
      additionalProperties: false,
    },
  },
};
const MEETING_SCHEMA = {
  type: "object",
  properties: { day: { type: "string" }, hour: { type: "integer" }, confirmed: { type: "boolean" } },
  required: ["day", "hour", "confirmed"],
  additionalProperties: false,
};

// retries off: a 429 must reach the test, not be retried
const client = new OpenAI({ baseURL: BASE_URL, apiKey: "sk-test", maxRetries: 0, timeout: 30_000 });

const answerText = (text) => `You said: ${text}`;
const newMarker = () => `m${randomUUID().replaceAll("-", "").slice(0, 12)}`;

/** The bodies of the upstream requests on `path` that carry `marker`, oldest first. */
async function recorded(marker, path = "/v1/chat/completions") {
  const resp = await fetch(`${RECORDER_URL}/recorded`);
  const all = await resp.json();
  return all.filter((r) => r.path === path && JSON.stringify(r.body).includes(marker)).map((r) => r.body);
}

async function forwarded(marker, path = "/v1/chat/completions") {
  const bodies = await recorded(marker, path);
  assert.equal(bodies.length, 1, `${bodies.length} upstream requests on ${path} carry ${marker}`);
  return bodies[0];
}

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test("models_list", async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.ok(ids.includes("recorder") && ids.includes("error-429"), `aliases: ${ids}`);
  assert.ok(page.data.every((m) => m.object === "model"));
});

test("chat_non_stream", async () => {
  const marker = newMarker();
  const messages = [
    { role: "system", content: "Be brief." },
    { role: "user", content: `Hello ${marker}` },
  ];
  const completion = await client.chat.completions.create({ model: "recorder", messages, temperature: 0.2 });
  assert.equal(completion.choices[0].message.content, answerText(`Hello ${marker}`));
  assert.equal(completion.choices[0].finish_reason, "stop");
  assert.equal(completion.usage.prompt_tokens, 4);
  const body = await forwarded(marker);
  assert.deepEqual(body.messages, messages);
  assert.equal(body.temperature, 0.2);
  assert.equal(body.stream, false);
});

test("chat_stream", async () => {
  const marker = newMarker();
  const stream = await client.chat.completions.create({
    model: "recorder",
    messages: [{ role: "user", content: `Stream ${marker} please` }],
    stream: true,
  });
  const chunks = await collect(stream);
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
  assert.equal(text, answerText(`Stream ${marker} please`));
  // relayed as sent: one chunk per word
  assert.equal(chunks.filter((c) => c.choices[0]?.delta?.content).length, 5);
  assert.equal(chunks.at(-1).choices[0].finish_reason, "stop");
  assert.equal((await forwarded(marker)).stream, true);
});

test("chat_stream_usage", async () => {
  const marker = newMarker();
  const stream = await client.chat.completions.create({
    model: "recorder",
    messages: [{ role: "user", content: `Count ${marker}` }],
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = await collect(stream);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.deepEqual([last.usage.prompt_tokens, last.usage.completion_tokens], [2, 4]);
  assert.ok(chunks.slice(0, -1).every((c) => c.usage == null));
  assert.deepEqual((await forwarded(marker)).stream_options, { include_usage: true });
});

test("chat_n2", async () => {
  const marker = newMarker();
  const messages = [{ role: "user", content: `Two ${marker}` }];
  const expected = [answerText(`Two ${marker}`), `${answerText(`Two ${marker}`)} (choice 1)`];
  const completion = await client.chat.completions.create({ model: "recorder", messages, n: 2 });
  assert.deepEqual(completion.choices.map((c) => c.index), [0, 1]);
  assert.deepEqual(completion.choices.map((c) => c.message.content), expected);
  const texts = ["", ""];
  const stream = await client.chat.completions.create({ model: "recorder", messages, n: 2, stream: true });
  for await (const chunk of stream) {
    for (const choice of chunk.choices) texts[choice.index] += choice.delta.content ?? "";
  }
  assert.deepEqual(texts, expected);
  assert.deepEqual((await recorded(marker)).map((b) => b.n), [2, 2]);
});

test("tools_round_trip", async () => {
  const marker = newMarker();
  const messages = [{ role: "user", content: `Weather in Paris? ${marker}` }];
  const first = await client.chat.completions.create({ model: "recorder", messages, tools: [WEATHER_TOOL] });
  assert.equal(first.choices[0].finish_reason, "tool_calls");
  const calls = first.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  const call = calls[0];
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
  messages.push(first.choices[0].message);
  messages.push({ role: "tool", tool_call_id: call.id, content: "18 C and sunny" });
  const second = await client.chat.completions.create({ model: "recorder", messages, tools: [WEATHER_TOOL] });
  assert.equal(second.choices[0].message.content, "The tool said: 18 C and sunny");
  const bodies = await recorded(marker);
  assert.equal(bodies.length, 2);
  assert.ok(bodies.every((b) => JSON.stringify(b.tools) === JSON.stringify([WEATHER_TOOL])));
  assert.equal(bodies[1].messages[1].tool_calls[0].id, call.id);
  assert.deepEqual(bodies[1].messages[2], { role: "tool", tool_call_id: call.id, content: "18 C and sunny" });
});

test("tools_stream", async () => {
  const marker = newMarker();
  const stream = await client.chat.completions.create({
    model: "recorder",
    messages: [{ role: "user", content: `Weather? ${marker}` }],
    tools: [WEATHER_TOOL],
    tool_choice: "auto",
    stream: true,
  });
  let name = "";
  let args = "";
  let finish = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      for (const delta of choice.delta.tool_calls ?? []) {
        name += delta.function?.name ?? "";
        args += delta.function?.arguments ?? "";
      }
      finish = choice.finish_reason ?? finish;
    }
  }
  assert.deepEqual([name, JSON.parse(args), finish], ["get_weather", { city: "Paris" }, "tool_calls"]);
  assert.equal((await forwarded(marker)).tool_choice, "auto");
});

test("json_schema", async () => {
  const marker = newMarker();
  const completion = await client.chat.completions.parse({
    model: "recorder",
    messages: [{ role: "user", content: `When is the meeting? ${marker}` }],
    response_format: {
      type: "json_schema",
      json_schema: { name: "Meeting", strict: true, schema: MEETING_SCHEMA },
    },
  });
  assert.deepEqual(completion.choices[0].message.parsed, { day: "text", hour: 1, confirmed: true });
  const responseFormat = (await forwarded(marker)).response_format;
  assert.equal(responseFormat.type, "json_schema");
  assert.deepEqual(responseFormat.json_schema.schema, MEETING_SCHEMA);
});

test("error_bad_model", async () => {
  const marker = newMarker();
  await assert.rejects(
    client.chat.completions.create({
      model: `no-such-${marker}`,
      messages: [{ role: "user", content: "hi" }],
    }),
    (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.status, 404);
      assert.ok(err.message.includes(`no-such-${marker}`), err.message);
      return true;
    },
  );
});

test("error_bad_body", async () => {
  await assert.rejects(client.chat.completions.create({ model: "recorder", messages: [] }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, `${err.constructor.name}: ${err.message}`);
    assert.equal(err.status, 400);
    assert.equal(err.type, "invalid_request_error");
    assert.ok(err.message.includes("messages"), err.message);
    return true;
  });
});

test("error_upstream_429", async () => {
  const marker = newMarker();
  await assert.rejects(
    client.chat.completions.create({ model: "error-429", messages: [{ role: "user", content: marker }] }),
    (err) => {
      assert.ok(err instanceof OpenAI.RateLimitError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.status, 429);
      assert.ok(err.message.includes("Rate limit reached"), err.message);
      return true;
    },
  );
  assert.equal((await recorded(marker)).length, 1); // reached the upstream once (no retry here)
});

test("error_upstream_429_kept", async () => {
  // the upstream's retry-after (the SDK's back-off reads it) and its error code reach the client
  await assert.rejects(
    client.chat.completions.create({
      model: "error-429",
      messages: [{ role: "user", content: newMarker() }],
    }),
    (err) => {
      assert.ok(err instanceof OpenAI.RateLimitError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.headers.get("retry-after"), "7");
      assert.equal(err.code, "rate_limit_exceeded");
      return true;
    },
  );
});

test("correction", async () => {
  const marker = newMarker();
  const messages = [
    { role: "user", content: MEETING },
    { role: "assistant", content: "Noted, see you there." },
    { role: "user", content: MEETING_CORRECTION },
  ];
  const { data, response } = await client.chat.completions
    .create({ model: "recorder", messages, user: marker })
    .withResponse();
  assert.equal(data.choices[0].message.content, answerText(MEETING_CORRECTION));
  assert.ok(Number(response.headers.get("x-keproxy-edits")) >= 1);
  assert.ok(response.headers.get("x-keproxy-request-id"));
  const sent = (await forwarded(marker)).messages.map((m) => m.content);
  assert.deepEqual(sent, [MEETING_CORRECTED, "Noted, see you there.", MEETING_CORRECTION]);
});

// alias "recorder" (responses: auto, not OpenAI itself): translated to a chat completion
test("responses_create", async () => {
  const marker = newMarker();
  const response = await client.responses.create({
    model: "recorder",
    input: `Hello ${marker}`,
    instructions: "Be brief.",
  });
  assert.equal(response.object, "response");
  assert.equal(response.status, "completed");
  assert.equal(response.output_text, answerText(`Hello ${marker}`));
  assert.deepEqual((await forwarded(marker)).messages, [
    { role: "system", content: "Be brief." },
    { role: "user", content: `Hello ${marker}` },
  ]);
});

test("responses_stream", async () => {
  const marker = newMarker();
  const stream = client.responses.stream({ model: "recorder", input: `Stream ${marker} please` });
  const deltas = [];
  for await (const event of stream) {
    if (event.type === "response.output_text.delta") deltas.push(event.delta);
  }
  const final = await stream.finalResponse();
  assert.equal(deltas.join(""), answerText(`Stream ${marker} please`));
  assert.equal(final.output_text, answerText(`Stream ${marker} please`));
  assert.ok(deltas.length >= 2);
  assert.equal(final.status, "completed");
  assert.equal((await forwarded(marker)).stream, true);
});

const MEETING_ITEMS = [
  { role: "user", content: MEETING },
  { role: "assistant", content: "Noted, see you there." },
  { role: "user", content: MEETING_CORRECTION },
];

test("responses_correction", async () => {
  const marker = newMarker();
  const { data, response } = await client.responses
    .create({ model: "recorder", input: MEETING_ITEMS, instructions: `Id ${marker}.` })
    .withResponse();
  assert.equal(data.output_text, answerText(MEETING_CORRECTION));
  assert.ok(Number(response.headers.get("x-keproxy-edits")) >= 1);
  const sent = (await forwarded(marker)).messages.map((m) => m.content);
  assert.deepEqual(sent, [`Id ${marker}.`, MEETING_CORRECTED, "Noted, see you there.", MEETING_CORRECTION]);
});

// alias "recorder-native" (responses: native): the request goes to the upstream's /v1/responses, the answer
// comes back as the upstream sent it; the correction still patches the input items
test("responses_native", async () => {
  const marker = newMarker();
  const response = await client.responses.create({
    model: "recorder-native",
    input: `Hello ${marker}`,
    instructions: "Be brief.",
  });
  assert.equal(response.id, "resp_recorder");
  assert.equal(response.output_text, answerText(`Hello ${marker}`));
  const body = await forwarded(marker, "/v1/responses");
  assert.equal(body.model, "recorder-native");
  assert.equal(body.instructions, "Be brief.");
  const stream = client.responses.stream({ model: "recorder-native", input: `Stream ${marker}` });
  const deltas = [];
  for await (const event of stream) {
    if (event.type === "response.output_text.delta") deltas.push(event.delta);
  }
  const final = await stream.finalResponse();
  assert.equal(deltas.join(""), answerText(`Stream ${marker}`));
  assert.equal(final.output_text, answerText(`Stream ${marker}`));
  const model = "recorder-native";
  await client.responses.create({ model, input: MEETING_ITEMS, instructions: `Id ${marker}.` });
  const bodies = await recorded(marker, "/v1/responses");
  assert.deepEqual(bodies.map((b) => b.stream ?? false), [false, true, false]);
  const sent = JSON.stringify(bodies.at(-1).input);
  assert.ok(sent.includes(MEETING_CORRECTED) && sent.includes(MEETING_CORRECTION), sent);
  assert.ok(!sent.includes(MEETING), sent);
  assert.deepEqual(await recorded(marker), []); // nothing went to chat completions
});
