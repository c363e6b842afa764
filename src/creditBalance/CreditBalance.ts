/**
 * The customer's credit balance per currency (decisions.md §14): minor units owed back to the customer by a plan
 * change, spent on their next invoices before anything is charged, never refunded automatically, never negative.
 * Every movement is a ledger row with its cause and the object that caused it, and a `credit_balance.updated` event,
 * both written in the caller's transaction with the movement.
 *
 * A movement is a compare-and-set on the balance's previous value (retried on a miss), so two invoices generated at
 * once can never spend the same credit: on PostgreSQL without a lock held across the read, on SQLite because writers
 * are serialised anyway.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { creditToApply } from "../domain/planChange.ts"
import { Outbox } from "../events/Outbox.ts"
import { decodeRows, Millis } from "../platform/db/rowSchemas.ts"
import { Ids } from "../platform/ids.ts"

/** Why a balance moved. */
export type CreditCause =
  /** A plan change's credit larger than its charge: the surplus. */
  | "plan_change"
  /** Spent on an invoice when it was created. */
  | "invoice"
  /** Given back when the invoice it was spent on was voided (an unpaid change that expired or was canceled). */
  | "invoice_voided"

export interface CreditMovement {
  readonly id: string
  readonly customerId: string
  readonly currency: string
  /** Signed whole minor units: positive adds to the balance. */
  readonly amount: bigint
  readonly balanceAfter: bigint
  readonly cause: CreditCause
  readonly subjectId: string
  readonly createdAt: number
}

export interface CreditBalanceShape {
  /** Every currency's balance above zero, `{ NGN: 1234n }`. */
  readonly balances: (org: string, customerId: string) => Effect.Effect<Readonly<Record<string, bigint>>>
  readonly balance: (org: string, customerId: string, currency: string) => Effect.Effect<bigint>
  /** Adds `amount` (> 0) with its cause, in the caller's transaction. */
  readonly add: (
    org: string,
    customerId: string,
    currency: string,
    amount: bigint,
    cause: CreditCause,
    subjectId: string
  ) => Effect.Effect<bigint>
  /** Spends up to `due` of the balance on an invoice; what it spent (0 when there is none). */
  readonly spend: (
    org: string,
    customerId: string,
    currency: string,
    due: bigint,
    invoiceId: string
  ) => Effect.Effect<bigint>
  /** Newest first. */
  readonly ledger: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<CreditMovement>>
}

export class CreditBalance extends Context.Tag("CreditBalance")<CreditBalance, CreditBalanceShape>() {}

const BalanceRow = Schema.Struct({ currency: Schema.String, balance: Schema.String })
const balanceRows = decodeRows("credit_balances", BalanceRow)
const LedgerRow = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  currency: Schema.String,
  amount: Schema.String,
  balanceAfter: Schema.String,
  cause: Schema.Literal("plan_change", "invoice", "invoice_voided"),
  subjectId: Schema.String,
  createdAt: Millis
})
const ledgerRows = decodeRows("credit_balance_ledger", LedgerRow)

/** A compare-and-set that keeps missing means something else is wrong: give up loudly rather than spin. */
const MAX_TRIES = 50

export const CreditBalanceLive = Layer.effect(
  CreditBalance,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ids = yield* Ids
    const outbox = yield* Outbox

    const read = (org: string, customerId: string, currency: string) =>
      sql`SELECT currency, balance FROM credit_balances
          WHERE organization_id = ${org} AND customer_id = ${customerId} AND currency = ${currency}`.pipe(
        Effect.flatMap(balanceRows),
        Effect.map((rows) => (rows[0] === undefined ? null : BigInt(rows[0].balance))),
        Effect.orDie
      )

    /** Sets the balance from `before` to `after`; false when another movement got there first. */
    const swap = (
      org: string,
      customerId: string,
      currency: string,
      before: bigint | null,
      after: bigint,
      now: number
    ) =>
      (before === null
        ? sql<{
            currency: string
          }>`INSERT INTO credit_balances (organization_id, customer_id, currency, balance, updated_at)
            VALUES (${org}, ${customerId}, ${currency}, ${after.toString()}, ${now})
            ON CONFLICT (organization_id, customer_id, currency) DO NOTHING RETURNING currency`
        : sql<{ currency: string }>`UPDATE credit_balances SET balance = ${after.toString()}, updated_at = ${now}
            WHERE organization_id = ${org} AND customer_id = ${customerId} AND currency = ${currency}
              AND balance = ${before.toString()} RETURNING currency`
      ).pipe(
        Effect.map((rows) => rows.length === 1),
        Effect.orDie
      )

    /** One movement: `decide` says how much to move given the balance (0: nothing), retried until its swap lands. */
    const move = (
      org: string,
      customerId: string,
      currency: string,
      decide: (balance: bigint) => bigint,
      cause: CreditCause,
      subjectId: string
    ) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        for (let i = 0; i < MAX_TRIES; i++) {
          const before = yield* read(org, customerId, currency)
          const amount = decide(before ?? 0n)
          if (amount === 0n) return 0n
          const after = (before ?? 0n) + amount
          if (after < 0n) return yield* Effect.dieMessage("credit balance: a movement would make it negative")
          if (!(yield* swap(org, customerId, currency, before, after, now))) continue
          const id = yield* ids.next("cbl")
          yield* sql`INSERT INTO credit_balance_ledger ${sql.insert({
            organizationId: org,
            id,
            customerId,
            currency,
            amount: amount.toString(),
            balanceAfter: after.toString(),
            cause,
            subjectId,
            createdAt: now
          })}`.pipe(Effect.orDie)
          yield* outbox.emit(org, {
            type: "credit_balance.updated",
            data: {
              customer: customerId,
              currency,
              amount: Number(amount),
              balance: Number(after),
              cause,
              subjectId
            },
            customerId,
            subjectId
          })
          return amount
        }
        return yield* Effect.dieMessage("credit balance: too many concurrent movements")
      })

    return {
      balances: (org, customerId) =>
        sql`SELECT currency, balance FROM credit_balances
            WHERE organization_id = ${org} AND customer_id = ${customerId} ORDER BY currency`.pipe(
          Effect.flatMap(balanceRows),
          Effect.map((rows) =>
            Object.fromEntries(rows.filter((r) => BigInt(r.balance) > 0n).map((r) => [r.currency, BigInt(r.balance)]))
          ),
          Effect.orDie
        ),
      balance: (org, customerId, currency) => Effect.map(read(org, customerId, currency.toUpperCase()), (b) => b ?? 0n),
      add: (org, customerId, currency, amount, cause, subjectId) =>
        amount <= 0n
          ? Effect.succeed(0n)
          : move(org, customerId, currency.toUpperCase(), () => amount, cause, subjectId),
      spend: (org, customerId, currency, due, invoiceId) =>
        Effect.map(
          move(
            org,
            customerId,
            currency.toUpperCase(),
            (balance) => -creditToApply(balance, due),
            "invoice",
            invoiceId
          ),
          (moved) => -moved
        ),
      ledger: (org, customerId) =>
        sql`SELECT id, customer_id, currency, amount, balance_after, cause, subject_id, created_at
            FROM credit_balance_ledger WHERE organization_id = ${org} AND customer_id = ${customerId}
            ORDER BY id DESC`.pipe(
          Effect.flatMap(ledgerRows),
          Effect.map((rows) =>
            rows.map((r) => ({ ...r, amount: BigInt(r.amount), balanceAfter: BigInt(r.balanceAfter) }))
          ),
          Effect.orDie
        )
    }
  })
)
