/**
 * The entitlement engine's records: balances as stored and as a batch names them, a customer's overage terms, an
 * idempotency claim, and the shapes of the guarded writes. Types only, at the bottom of the folder's imports: every
 * file of src/entitlements/ may lean on it, it leans on none but ./hotStatements.ts's row types.
 */
import type { Effect } from "effect"
import type { CommitItem } from "./hotStatements.ts"

export type { EntitlementContext, UsageEventRow } from "./hotStatements.ts"

/** One customer's balance of one feature or credit system, in micro-units. */
export interface BalanceRow {
  readonly windowStart: number
  readonly windowEnd: number | null
  readonly used: bigint
  readonly overage: bigint
  readonly bonus: bigint
  readonly addon: bigint
}

/** A balance as stored: `version` grows with every write, so a writer can check nothing moved since it read. */
export interface StoredBalance extends BalanceRow {
  readonly version: number
}

export interface FeatureConfigRow {
  readonly overage: "block" | "charge"
  readonly maxOverageUnits: bigint | null
}

export type IdempotencyClaim =
  | { readonly _tag: "Claimed" }
  | { readonly _tag: "Existing"; readonly requestHash: string; readonly response: string | null }

/** A balance as a batch reads or locks it: its row and its key. */
export type KeyedBalance = StoredBalance & { readonly customerId: string; readonly subjectId: string }

/** The balances a batch draws from (`init`: a missing row's window, the row created with it). */
export type BalancesNamed = ReadonlyArray<{
  readonly customerId: string
  readonly subjectId: string
  readonly init: { readonly windowStart: number; readonly windowEnd: number | null }
}>

export interface GuardedBatches {
  /**
   * Of the balances named, those whose version is not `version` (all of those given `null`: unknown to the caller),
   * read without a lock outside any transaction; a missing row among the unknown ones created first.
   */
  readonly readChanged: (
    org: string,
    balances: ReadonlyArray<BalancesNamed[number] & { readonly version: number | null }>,
    now: number
  ) => Effect.Effect<ReadonlyArray<KeyedBalance>>
  /**
   * One write (PostgreSQL: one statement that commits by itself, `COMMIT_GUARDED`; SQLite: one transaction): the
   * balances `written` and `checked` locked; if each is still the state it was decided over (`base`; a checked one's
   * own), the written ones written with their events and rollups; else nothing. Whether it wrote.
   */
  readonly commit: (
    org: string,
    written: ReadonlyArray<BalanceCommit & { readonly base: BalanceRow }>,
    checked: ReadonlyArray<KeyedBalance>
  ) => Effect.Effect<boolean>
}

/** What one guarded write of a balance records: its new state and the events (and rollups) of the draws. */
export interface BalanceCommit {
  readonly organizationId: string
  readonly customerId: string
  readonly subjectId: string
  /** The version the decisions were made on; `null` = the row did not exist. */
  readonly expectedVersion: number | null
  readonly next: {
    readonly windowStart: number
    readonly windowEnd: number | null
    readonly used: bigint
    readonly overage: bigint
    readonly bonus: bigint
    readonly addon: bigint
  }
  readonly events: CommitItem["events"]
  /** Written in the same transaction, only if the balance's guard held (its outbound events); rare: a few per window. */
  readonly notices?: ReadonlyArray<Effect.Effect<unknown>>
  readonly now: number
}
