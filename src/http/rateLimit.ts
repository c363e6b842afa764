import { errorBody } from "../api/errors.ts"
import { bearerCredential } from "./bearer.ts"

/**
 * Per-key rate limiting (decisions.md §10: 429 `rate_limited` with `Retry-After`): a token bucket per API key,
 * in this process's memory. A key may make `burst` requests at once and `rps` per second on average.
 *
 * The key of the map is the bearer key the `Authorization` header carries, read as authentication reads it
 * (./bearer.ts): every spelling of the header (the scheme's case, the spaces after it) counts against one bucket. It
 * is never written anywhere (logs, metrics, errors), and an unknown or revoked key is limited like a real one, so
 * guessing keys is limited too. The map is bounded: idle buckets (refilled to full, so the same as absent)
 * are swept when it reaches `maxKeys`, and if a flood of distinct keys keeps it full the oldest entries go.
 */
export interface RateLimiterOptions {
  /** Sustained requests per second per key (> 0). */
  readonly rps: number
  /** Bucket size; defaults to 2 × rps. */
  readonly burst?: number
  /** Upper bound on the keys held at once (default 10,000). */
  readonly maxKeys?: number
}

export interface RateLimiter {
  /**
   * Takes one token for `key` at `nowMs`: 0 when the request may go ahead, else the milliseconds until the
   * next token (the `Retry-After`).
   */
  readonly take: (key: string, nowMs: number) => number
  /** How many keys are held (for tests). */
  readonly size: () => number
}

interface Bucket {
  tokens: number
  at: number
}

export const makeRateLimiter = (options: RateLimiterOptions): RateLimiter => {
  const rps = options.rps
  if (!(rps > 0)) throw new Error("rate limiter: rps must be > 0")
  const burst = options.burst !== undefined && options.burst > 0 ? options.burst : 2 * rps
  const maxKeys = options.maxKeys ?? 10_000
  const perMs = rps / 1000
  /** How long an empty bucket takes to refill: a bucket idle that long is the same as no bucket. */
  const fullAfterMs = burst / perMs
  const buckets = new Map<string, Bucket>()

  const sweep = (nowMs: number) => {
    for (const [key, bucket] of buckets) {
      if (nowMs - bucket.at >= fullAfterMs) buckets.delete(key)
    }
    if (buckets.size < maxKeys) return
    // Still full (a flood of distinct keys): forget the oldest half. A forgotten key starts again with a full
    // bucket, at worst one extra burst for it.
    let drop = buckets.size - Math.floor(maxKeys / 2)
    for (const key of buckets.keys()) {
      if (drop-- <= 0) break
      buckets.delete(key)
    }
  }

  return {
    take: (key, nowMs) => {
      let bucket = buckets.get(key)
      if (bucket === undefined) {
        if (buckets.size >= maxKeys) sweep(nowMs)
        bucket = { tokens: burst, at: nowMs }
        buckets.set(key, bucket)
      } else {
        // A clock that steps back refills nothing (and takes nothing away).
        const elapsed = nowMs - bucket.at
        if (elapsed > 0) {
          bucket.tokens = Math.min(burst, bucket.tokens + elapsed * perMs)
          bucket.at = nowMs
        }
      }
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1
        return 0
      }
      return Math.max(1, Math.ceil((1 - bucket.tokens) / perMs))
    },
    size: () => buckets.size
  }
}

/**
 * The pipeline's rate-limit gate, in front of every route (HttpApi's and the check/track endpoint's alike): the
 * refusal for a request over its key's rate, or undefined. Requests without a bearer key (no header, another
 * scheme, a malformed one) are left to authentication, which refuses them without looking anything up.
 */
export const makeRateLimitGate = (options: RateLimiterOptions, now: () => number) => {
  const limiter = makeRateLimiter(options)
  return (request: Request): Response | undefined => {
    const key = bearerCredential(request.headers.get("authorization"))
    if (key === undefined) return undefined
    const wait = limiter.take(key, now())
    if (wait === 0) return undefined
    const seconds = Math.ceil(wait / 1000)
    const message = `Too many requests for this API key: retry after ${seconds} second${seconds === 1 ? "" : "s"}`
    return new Response(JSON.stringify(errorBody("TooManyRequests", "rate_limited", message)), {
      status: 429,
      headers: { "content-type": "application/json", "retry-after": String(seconds) }
    })
  }
}
