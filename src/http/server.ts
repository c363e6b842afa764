import { Context, FiberId, LogLevel } from "effect"
import { errorBody } from "../api/errors.ts"
import { writeLogLine } from "../platform/logging.ts"
import { RequestCommitGate } from "../platform/commitGate.ts"
import { commitGateOf, RequestFiber, type RequestFiberSlot, TIMED_OUT_MESSAGE } from "./RequestFiber.ts"
import { RequestId } from "./RequestId.ts"

export const MAX_BODY_BYTES = 1024 * 1024
/**
 * Request headers above this (names and values together) are 400 `invalid_request` in the error body. Bun itself
 * refuses a request head over 16 KiB with a bare 431 before any of this code runs; this lower limit makes every
 * refusal an application can see carry the spec's error body.
 */
export const MAX_HEADER_BYTES = 8 * 1024

const REQUEST_ID = /^[\w.:-]{1,128}$/

/** A JSON answer written outside HttpApi. */
export const json = (status: number, body: unknown, headers: Record<string, string>) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } })

const headerBytes = (headers: Headers): number => {
  let total = 0
  for (const [name, value] of headers) total += name.length + value.length + 4
  return total
}

const headersTooLarge = (request: Request): Response | undefined =>
  headerBytes(request.headers) > MAX_HEADER_BYTES
    ? json(
        400,
        errorBody("BadRequest", "invalid_request", `The request headers are over ${MAX_HEADER_BYTES / 1024} KiB`),
        {}
      )
    : undefined

/** Checks that are cheaper before the Effect runtime: NUL in the URL, body size and the JSON content type. */
const precheck = (request: Request, url: URL): Response | undefined => {
  // PostgreSQL cannot store or compare U+0000: refused on both databases, before it reaches a query.
  if (url.pathname.includes("%00") || url.search.includes("%00")) {
    return json(400, errorBody("BadRequest", "invalid_request", "The URL contains U+0000 (%00)"), {})
  }
  const length = Number(request.headers.get("content-length") ?? "0")
  if (length > MAX_BODY_BYTES) {
    return json(413, errorBody("PayloadTooLarge", "payload_too_large", "The request body is over 1 MiB"), {})
  }
  const hasBody = length > 0 || request.headers.has("transfer-encoding")
  const contentType = request.headers.get("content-type")
  if (
    hasBody &&
    url.pathname.startsWith("/v1/") &&
    contentType !== null &&
    !contentType.toLowerCase().includes("application/json")
  ) {
    return json(
      400,
      errorBody("BadRequest", "invalid_request", "The request body must be JSON (Content-Type: application/json)"),
      {}
    )
  }
  return undefined
}

/** A POST whose fields are all optional may come with no body at all: read it as `{}`. */
const withEmptyBodyAsObject = (request: Request, url: URL): Request => {
  if (request.method !== "POST" || !url.pathname.startsWith("/v1/")) return request
  const length = request.headers.get("content-length")
  const empty = length === "0" || (length === null && request.body === null)
  if (!empty) return request
  const headers = new Headers(request.headers)
  headers.set("content-type", "application/json")
  headers.set("content-length", "2")
  return new Request(request.url, { method: "POST", headers, body: "{}" })
}

/** A chunked body has no Content-Length to check: read it (Bun caps it) and measure. */
const boundChunkedBody = async (request: Request): Promise<Request | Response> => {
  if (request.body === null || request.headers.has("content-length")) return request
  const body = await request.arrayBuffer()
  if (body.byteLength > MAX_BODY_BYTES) {
    return json(413, errorBody("PayloadTooLarge", "payload_too_large", "The request body is over 1 MiB"), {})
  }
  const headers = new Headers(request.headers)
  headers.set("content-length", String(body.byteLength))
  headers.delete("transfer-encoding")
  return new Request(request.url, { method: request.method, headers, body })
}

export interface ServeOptions {
  readonly port: number
  readonly hostname?: string
  readonly logLevel?: LogLevel.LogLevel
  /** `REQUEST_TIMEOUT_MS`; 0 or unset: no limit. */
  readonly requestTimeoutMs?: number
}

/**
 * The request timeout: at the deadline the answer is 503 `unavailable` and the request's fiber is interrupted (an
 * open transaction rolls back, a running PostgreSQL statement is cancelled; one still waiting for a connection, an
 * uninterruptible wait in @effect/sql, stops as soon as it gets one, before its first statement). The answer does not
 * wait for that: it leaves at the deadline whatever the handler was doing. A timer per request and nothing else:
 * forking the handler instead cost 15–20% of the service's CPU under load (docs/decisions.md, "Hardening").
 * Once a commit for the request has begun (its gate entered: src/platform/commitGate.ts) the deadline waits for the
 * answer instead: a 503 must mean that nothing changed (decisions.md §12).
 */
const beforeDeadline = (
  answer: Promise<Response>,
  timeoutMs: number,
  slot: RequestFiberSlot,
  onTimeout: () => void
): Promise<Response> =>
  new Promise((resolve, reject) => {
    let settled = false
    const expire = () => {
      if (settled) return
      settled = true
      slot.phase = "expired"
      slot.fiber?.unsafeInterruptAsFork(FiberId.none)
      onTimeout()
      resolve(json(503, errorBody("Unavailable", "unavailable", TIMED_OUT_MESSAGE), {}))
    }
    const timer = setTimeout(() => {
      // A commit for this request may be landing: a 503 would say nothing changed. Its answer decides, unless the
      // commit does not happen after all (the gate's `leave` then expires the request).
      if (slot.phase === "committing") slot.overdue = expire
      else expire()
    }, timeoutMs)
    answer.then(
      (response) => {
        settled = true
        clearTimeout(timer)
        resolve(response)
      },
      (error: unknown) => {
        settled = true
        clearTimeout(timer)
        reject(error)
      }
    )
  })

/** Bun's server in front of the Effect handler: request ids, limits and one access-log line each. */
/** What the server hands each request to (the application's handler: src/app/App.ts). */
export interface RequestHandler {
  readonly handler: (request: Request, context?: Context.Context<never>) => Promise<Response>
}

/**
 * The API reference (`/docs`) loads nothing from outside the service: its script and styles are inlined, Scalar's
 * web fonts are off (`withDefaultFonts: false`, ApiLive.ts), and this policy has the browser refuse any other host
 * (fonts fall back to the system's).
 */
export const DOCS_CSP =
  "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'"

export const serve = (app: RequestHandler, options: ServeOptions) => {
  const minimum = options.logLevel ?? LogLevel.Info
  const timeoutMs = options.requestTimeoutMs ?? 0
  return Bun.serve({
    port: options.port,
    hostname: options.hostname ?? "0.0.0.0",
    // A backstop only: Bun's own refusal has no error body, so the 1 MiB rule is enforced below.
    maxRequestBodySize: 8 * MAX_BODY_BYTES,
    fetch: async (request) => {
      const started = performance.now()
      const incoming = request.headers.get("x-request-id")
      const requestId = incoming !== null && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID()
      const url = new URL(request.url)
      const refused = headersTooLarge(request)
      const bounded = refused ?? (await boundChunkedBody(withEmptyBodyAsObject(request, url)))
      let response = bounded instanceof Response ? bounded : precheck(bounded, url)
      if (response === undefined) {
        const slot: RequestFiberSlot = { fiber: undefined }
        const context = Context.make(RequestId, requestId).pipe(
          Context.add(RequestFiber, slot),
          Context.add(RequestCommitGate, commitGateOf(slot))
        )
        const answer = app.handler(bounded as Request, context as Context.Context<never>)
        response = await (timeoutMs > 0
          ? beforeDeadline(answer, timeoutMs, slot, () =>
              writeLogLine(minimum, LogLevel.Warning, "request timed out", { requestId, afterMs: timeoutMs })
            )
          : answer)
      }
      response.headers.set("x-request-id", requestId)
      if (url.pathname === "/docs") response.headers.set("content-security-policy", DOCS_CSP)
      writeLogLine(minimum, LogLevel.Info, "request", {
        requestId,
        method: request.method,
        path: url.pathname,
        status: response.status,
        durationMs: Math.round((performance.now() - started) * 100) / 100
      })
      return response
    },
    error: () => json(500, errorBody("InternalError", "internal_error", "An unexpected error occurred"), {})
  })
}
