/**
 * An OTLP/HTTP trace receiver for bench/track.ts: accepts `POST /v1/traces` (JSON, as the service exports them),
 * counts the spans and answers as a collector does; `GET /count` gives the totals. It prints its address as its
 * first line. A process of its own, so that its CPU is not the bench client's.
 */
let spans = 0
let requests = 0
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    const path = new URL(request.url).pathname
    if (request.method === "GET" && path === "/count") return Response.json({ spans, requests })
    if (request.method !== "POST" || path !== "/v1/traces") return new Response("not found", { status: 404 })
    const body = (await request.json()) as {
      resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<unknown> }> }>
    }
    requests++
    for (const r of body.resourceSpans ?? []) for (const s of r.scopeSpans ?? []) spans += s.spans?.length ?? 0
    return Response.json({ partialSuccess: {} })
  }
})
process.stdout.write(`http://127.0.0.1:${server.port}\n`)
