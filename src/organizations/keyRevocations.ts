import { Option, type Redacted } from "effect"
import type { AppConfigShape } from "../platform/config.ts"

/**
 * How a process hears of keys revoked by other processes (its key cache is emptied): on SQLite it does not (the cache
 * expires, `KEY_CACHE_MS`); on PostgreSQL by LISTEN on a session of its own, DATABASE_DIRECT_URL's when given, else
 * DATABASE_URL's; behind a transaction-mode pooler without a direct URL LISTEN cannot work (the session is lent to
 * another client after each transaction), so it asks every `REVOCATION_POLL_MS` instead.
 */
export type KeyRevocations =
  | { readonly _tag: "Expiry" }
  | { readonly _tag: "Listen"; readonly url: Redacted.Redacted; readonly direct: boolean }
  | { readonly _tag: "Poll" }

export const REVOCATION_POLL_MS = 1_000

/** `pooled`: DATABASE_URL is a transaction-mode pooler (DATABASE_POOLER, or recognised at start-up: PgPool). */
export const keyRevocationsOf = (
  config: Pick<AppConfigShape, "databaseUrl" | "databaseDirectUrl">,
  pooled: boolean
): KeyRevocations =>
  Option.isNone(config.databaseUrl)
    ? { _tag: "Expiry" }
    : Option.isSome(config.databaseDirectUrl)
      ? { _tag: "Listen", url: config.databaseDirectUrl.value, direct: true }
      : pooled
        ? { _tag: "Poll" }
        : { _tag: "Listen", url: config.databaseUrl.value, direct: false }

/** For the start-up log line. */
export const describeKeyRevocations = (how: KeyRevocations) =>
  how._tag === "Listen"
    ? how.direct
      ? "LISTEN over DATABASE_DIRECT_URL"
      : "LISTEN over DATABASE_URL"
    : how._tag === "Poll"
      ? `polled every ${REVOCATION_POLL_MS} ms (behind a transaction pooler, no DATABASE_DIRECT_URL)`
      : "key cache expiry"
