// A node:test reporter that writes one JSON line per top-level test: {"name", "ok", "skipped", "error"}.
// tests/clients/test_node_client.py reads it (node's own spec reporter still prints for people).
export default async function* jsonlReporter(source) {
  for await (const event of source) {
    if ((event.type !== "test:pass" && event.type !== "test:fail") || event.data.nesting !== 0) continue;
    const { name, skip, todo, details } = event.data;
    const error = details?.error;
    const cause = error?.cause ?? error;
    yield `${JSON.stringify({
      name,
      ok: event.type === "test:pass",
      skipped: Boolean(skip || todo),
      error: cause ? String(cause.stack ?? cause.message ?? cause) : null,
    })}\n`;
  }
}
