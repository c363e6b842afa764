import { lookup as dnsLookup, type LookupAddress } from "node:dns"
import http from "node:http"
import https from "node:https"
import { isIP, type Socket } from "node:net"
import { isPublicAddress } from "./addresses.ts"

/** What one HTTP attempt came to. */
export interface AttemptOutcome {
  /** The answer's status, `null` when none came (refused, unreachable, timed out, released). */
  readonly status: number | null
  /** The first RESPONSE_BODY_LIMIT characters of the answer. */
  readonly body: string
  readonly durationMs: number
  readonly error?: string
  /** Stopped by the service shutting down: not an attempt that counts. */
  readonly released?: boolean
}

export const RESPONSE_BODY_LIMIT = 1_024
/** Past this much, the rest of an answer is not read. */
const READ_LIMIT = 64 * 1_024

export interface OutgoingRequest {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly timeoutMs: number
  /** Live: https only, public addresses only, checked on the address connected to. */
  readonly publicOnly: boolean
  /** Aborted when the service shuts down before the attempt finished. */
  readonly signal: AbortSignal
}

class Refused extends Error {}

/**
 * Every live refusal of an address says this and no more: what a name resolved to, or whether it resolved at all,
 * would let one organization map the deployment's own network (its internal names and their addresses).
 */
const NOT_PUBLIC = "not a public address"

/**
 * The address lookup a live attempt connects with: every address the name resolves to must be public, and the socket
 * connects to one of exactly those (the check is the lookup the connection itself uses, so nothing resolves the name
 * again between the check and the connect). A name that does not resolve is refused in the same words as one that
 * resolves to a private address.
 */
const publicLookup = (
  hostname: string,
  options: { readonly all?: boolean; readonly family?: number },
  callback: (error: Error | null, address: string | ReadonlyArray<LookupAddress>, family?: number) => void
) =>
  dnsLookup(hostname, { all: true, ...(options.family ? { family: options.family } : {}) }, (error, addresses) => {
    if (error || addresses.length === 0 || addresses.some((a) => !isPublicAddress(a.address))) {
      return callback(new Refused(NOT_PUBLIC), [])
    }
    if (options.all === true) return callback(null, addresses)
    return callback(null, addresses[0]!.address, addresses[0]!.family)
  })

/**
 * One POST, no redirects followed (a 3xx is an answer like any non-2xx), a deadline for the whole exchange, a new
 * connection each time (a pooled one would skip the address check).
 */
export const post = (request: OutgoingRequest): Promise<AttemptOutcome> =>
  new Promise((resolve) => {
    const started = performance.now()
    let settled = false
    let deadline: ReturnType<typeof setTimeout> | undefined
    let onAbort: (() => void) | undefined
    const finish = (outcome: Omit<AttemptOutcome, "durationMs">) => {
      if (settled) return
      settled = true
      clearTimeout(deadline)
      if (onAbort !== undefined) request.signal.removeEventListener("abort", onAbort)
      resolve({ ...outcome, durationMs: Math.round(performance.now() - started) })
    }
    const fail = (error: string, extra: Partial<AttemptOutcome> = {}) =>
      finish({ status: null, body: "", error, ...extra })

    let url: URL
    try {
      url = new URL(request.url)
    } catch {
      return fail("the endpoint URL is not valid")
    }
    if (url.protocol !== "https:" && (request.publicOnly || url.protocol !== "http:")) {
      return fail(
        `refused: ${url.protocol} URLs are not delivered to${request.publicOnly ? " on live (https only)" : ""}`
      )
    }
    const host = url.hostname.replace(/^\[|\]$/g, "")
    if (request.publicOnly && isIP(host) !== 0 && !isPublicAddress(host)) return fail(`refused: ${NOT_PUBLIC}`)

    const module = url.protocol === "https:" ? https : http
    const req = module.request(
      {
        protocol: url.protocol,
        hostname: host,
        port: url.port === "" ? undefined : Number(url.port),
        path: url.pathname + url.search,
        method: "POST",
        agent: false,
        headers: { ...request.headers, "content-length": String(Buffer.byteLength(request.body)) },
        ...(request.publicOnly ? { lookup: publicLookup as never } : {})
      },
      (res) => {
        const chunks: Array<Buffer> = []
        let read = 0
        const done = () => {
          const text = Buffer.concat(chunks).toString("utf8").slice(0, RESPONSE_BODY_LIMIT)
          finish({ status: res.statusCode ?? null, body: text })
        }
        res.on("data", (chunk: Buffer) => {
          if (read < READ_LIMIT) chunks.push(chunk)
          read += chunk.length
          if (read >= READ_LIMIT) {
            done()
            req.destroy()
          }
        })
        res.on("end", done)
        res.on("error", () => done())
      }
    )
    deadline = setTimeout(() => {
      fail(`no complete answer within ${request.timeoutMs} ms`)
      req.destroy()
    }, request.timeoutMs)
    onAbort = () => {
      fail("released: the service stopped before the attempt finished", { released: true })
      req.destroy()
    }
    if (request.signal.aborted) return onAbort()
    request.signal.addEventListener("abort", onAbort)
    req.on("socket", (socket: Socket) => {
      if (!request.publicOnly) return
      // The address actually connected to, checked again (the lookup above already refused non-public ones).
      socket.once("connect", () => {
        const remote = socket.remoteAddress
        if (remote !== undefined && !isPublicAddress(remote)) {
          fail(`refused: ${NOT_PUBLIC}`)
          req.destroy()
        }
      })
    })
    req.on("error", (error: Error) => {
      fail(error instanceof Refused || error.message.includes(NOT_PUBLIC) ? `refused: ${NOT_PUBLIC}` : error.message)
    })
    req.end(request.body)
  })
