import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import {
  DbInt,
  decodeFirstRow,
  decodeRows,
  Flag,
  JsonObjectText,
  Millis,
  NullableDbInt,
  NullableMillis,
  recordSchema
} from "../platform/db/rowSchemas.ts"
import { type ProviderName, PROVIDERS } from "./PaymentProvider.ts"

export interface PaymentMethodRecord {
  readonly organizationId: string
  readonly id: string
  readonly customerId: string
  readonly provider: ProviderName
  /** Encrypted at rest; decrypted by the service only to charge or detach. */
  readonly token: string
  /** SHA-256 of the provider's token: one saved method per authorization (the token itself is encrypted). */
  readonly tokenHash: string | null
  readonly providerCustomerId: string | null
  readonly email: string | null
  readonly type: string
  readonly brand: string | null
  readonly last4: string | null
  readonly expMonth: number | null
  readonly expYear: number | null
  readonly fingerprint: string | null
  readonly isDefault: boolean
  /** `unusable`: the provider refused it as gone (deactivated authorization, detached PaymentMethod). */
  readonly status: "active" | "removed" | "unusable"
  readonly createdAt: number
  readonly updatedAt: number
}

export type Purpose = "subscription" | "addon" | "invoice" | "setup"

export interface CheckoutRecord {
  readonly organizationId: string
  readonly id: string
  readonly reference: string
  readonly provider: ProviderName
  readonly purpose: Purpose
  readonly customerId: string
  readonly targetId: string
  readonly quantity: number
  readonly amount: string
  readonly currency: string
  /** `superseded`: a charge on a saved method was claimed for the same target after this page was opened. */
  readonly status: "open" | "completed" | "failed" | "superseded"
  /** Null while the provider is being asked for the page (the checkout is already claimed). */
  readonly checkoutUrl: string | null
  readonly accessCode: string | null
  readonly data: Record<string, unknown>
  /** A pack purchase's Idempotency-Key, when its request carried one. */
  readonly idempotencyKey: string | null
  readonly createdAt: number
  readonly updatedAt: number
}

/**
 * One attempt to move money (decisions.md §7), written before the provider is called. `processing` until settled
 * by the provider's answer, its webhook, a verify call or the reconciler; its reference is never reused.
 */
export interface PaymentRecord {
  readonly organizationId: string
  readonly id: string
  readonly reference: string
  readonly provider: ProviderName
  readonly purpose: Purpose
  readonly customerId: string
  readonly targetId: string
  readonly quantity: number
  readonly amount: string
  readonly currency: string
  readonly status: "processing" | "succeeded" | "failed"
  readonly providerReference: string | null
  readonly failureMessage: string | null
  readonly methodId: string | null
  readonly idempotencyKey: string | null
  readonly requestHash: string | null
  /** Whether a success took effect (false: its target was no longer payable when the money arrived). */
  readonly applied: boolean
  readonly amountRefunded: string
  readonly disputed: boolean
  readonly checkedAt: number | null
  readonly settledAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
  /**
   * What the attempt pays for, priced, when it is to become an invoice once settled (a subscription's first payment:
   * its lines, discounts, taxes and sums, opaque to payments); null otherwise.
   */
  readonly invoiceQuote: Record<string, unknown> | null
  /** The invoice written from `invoiceQuote` when the payment settled (a first payment's own invoice). */
  readonly invoiceId: string | null
}

export interface SettleAs {
  readonly status: "succeeded" | "failed"
  readonly providerReference: string | null
  readonly failureMessage: string | null
  readonly now: number
  /** A success the provider reports for an attempt we had recorded as failed still counts: the money moved. */
  readonly fromFailed: boolean
}

export interface PaymentsRepoShape {
  readonly insertMethod: (m: PaymentMethodRecord) => Effect.Effect<void>
  readonly activeMethods: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<PaymentMethodRecord>>
  readonly findMethod: (org: string, id: string) => Effect.Effect<Option.Option<PaymentMethodRecord>>
  readonly setMethodStatus: (
    org: string,
    id: string,
    status: "removed" | "unusable",
    now: number
  ) => Effect.Effect<void>
  /** Serialises saving methods for one customer (PostgreSQL row lock until the transaction ends). */
  /** This active method becomes the customer's default, the one that was stops being it (the caller's transaction). */
  readonly setDefaultMethod: (org: string, customerId: string, id: string, now: number) => Effect.Effect<void>
  readonly lockCustomer: (org: string, customerId: string) => Effect.Effect<void>
  /** `false` when a unique key (its Idempotency-Key) is already taken: the caller reads what took it. */
  readonly insertCheckout: (c: CheckoutRecord) => Effect.Effect<boolean>
  readonly setCheckoutPage: (
    org: string,
    id: string,
    url: string,
    accessCode: string | null,
    now: number
  ) => Effect.Effect<void>
  readonly findCheckout: (org: string, reference: string) => Effect.Effect<Option.Option<CheckoutRecord>>
  /** The newest checkout of a target still `open` (invoice, pending subscription). */
  readonly openCheckoutFor: (org: string, targetId: string) => Effect.Effect<Option.Option<CheckoutRecord>>
  /** open → `status`, once: `false` when something else already closed it. */
  readonly closeCheckout: (
    org: string,
    reference: string,
    status: "completed" | "failed" | "superseded",
    now: number
  ) => Effect.Effect<boolean>
  /** → completed, once (also from `superseded` or `failed`: the customer paid there after all). */
  readonly completeCheckout: (org: string, reference: string, now: number) => Effect.Effect<boolean>
  readonly supersedeCheckouts: (org: string, targetId: string, now: number) => Effect.Effect<void>
  /**
   * `false` when a unique key is already taken (an attempt in flight for the target, or its Idempotency-Key): on
   * PostgreSQL the insert waits for the transaction holding it, so the caller then reads the committed winner.
   */
  readonly insertPayment: (p: PaymentRecord) => Effect.Effect<boolean>
  readonly findPayment: (org: string, reference: string) => Effect.Effect<Option.Option<PaymentRecord>>
  /** The succeeded payments of one target (an invoice), or the first payment recorded as that invoice, oldest first. */
  readonly succeededPaymentsOf: (org: string, targetId: string) => Effect.Effect<ReadonlyArray<PaymentRecord>>
  readonly findPaymentByKey: (org: string, key: string) => Effect.Effect<Option.Option<PaymentRecord>>
  readonly findCheckoutByKey: (org: string, key: string) => Effect.Effect<Option.Option<CheckoutRecord>>
  /** The attempt in flight for an invoice or pending subscription, if any. */
  readonly inFlightFor: (org: string, targetId: string) => Effect.Effect<Option.Option<PaymentRecord>>
  /** Whether a charge of the method for the target failed at or after `since` (epoch ms). */
  readonly declinedSince: (org: string, targetId: string, methodId: string, since: number) => Effect.Effect<boolean>
  /** processing → settled, once: `false` when another settler (webhook, reconciler, the request) came first. */
  readonly settle: (org: string, reference: string, settlement: SettleAs) => Effect.Effect<boolean>
  /** A success that arrived for something no longer payable: kept, with `applied` false. */
  readonly markUnapplied: (org: string, reference: string) => Effect.Effect<void>
  /** The settled payment became this invoice's payment, once: `false` when it already names one (nothing written). */
  readonly linkInvoice: (org: string, reference: string, invoiceId: string) => Effect.Effect<boolean>
  /** The provider reported another amount or currency than the attempt's: noted, nothing applied. */
  readonly noteMismatch: (org: string, reference: string, note: string, now: number) => Effect.Effect<void>
  /** Notes what the provider said of a still-processing attempt (its own id for it, when it was last asked). */
  readonly touchProcessing: (
    org: string,
    reference: string,
    providerReference: string | null,
    now: number
  ) => Effect.Effect<void>
  /**
   * Attempts left processing (and checkouts left open) that were last looked at before `before`: claimed for this
   * process by moving their `checked_at` / `updated_at` to `now` (`SKIP LOCKED` on PostgreSQL, so processes share).
   */
  readonly claimStale: (
    cutoffs: { readonly payments: number; readonly checkouts: number },
    now: number,
    limit: number
  ) => Effect.Effect<{
    readonly payments: ReadonlyArray<PaymentRecord>
    readonly checkouts: ReadonlyArray<CheckoutRecord>
  }>
  /** The payment, its row locked until the transaction ends (PostgreSQL; SQLite serialises writers). */
  readonly lockPayment: (org: string, reference: string) => Effect.Effect<Option.Option<PaymentRecord>>
  /**
   * Records a money-back of a payment under the provider's name for it: a new name adds a row; a known one keeps the
   * larger amount when `cumulative` (a running total), else stays as it was (the same refund reported again).
   */
  readonly recordReversal: (org: string, reference: string, reversal: Reversal) => Effect.Effect<void>
  /** Every money-back recorded for the payment, in minor units. */
  readonly reversals: (org: string, reference: string) => Effect.Effect<ReadonlyArray<string>>
  /** One reversal's recorded amount, by its key. */
  readonly reversalAmount: (org: string, reference: string, key: string) => Effect.Effect<Option.Option<string>>
  readonly addRefund: (org: string, reference: string, amountRefunded: string, now: number) => Effect.Effect<void>
  readonly markDisputed: (org: string, reference: string, now: number) => Effect.Effect<void>
  /** What the payments of each target had refunded (only targets with a refund), in minor units. */
  readonly refundedByTarget: (
    org: string,
    targetIds: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyMap<string, string>>
}

export interface Reversal {
  readonly key: string
  readonly cause: "refund" | "dispute"
  /** Whole minor units. */
  readonly amount: string
  readonly cumulative: boolean
  readonly now: number
}

export class PaymentsRepo extends Context.Tag("PaymentsRepo")<PaymentsRepo, PaymentsRepoShape>() {}

const Provider = Schema.Literal(...PROVIDERS)
const Purpose = Schema.Literal("subscription", "addon", "invoice", "setup")
const NullableText = Schema.NullOr(Schema.String)

const PaymentMethodRow = recordSchema<PaymentMethodRecord>()(
  Schema.Struct({
    organizationId: Schema.String,
    id: Schema.String,
    customerId: Schema.String,
    provider: Provider,
    token: Schema.String,
    tokenHash: NullableText,
    providerCustomerId: NullableText,
    email: NullableText,
    type: Schema.String,
    brand: NullableText,
    last4: NullableText,
    expMonth: NullableDbInt,
    expYear: NullableDbInt,
    fingerprint: NullableText,
    isDefault: Flag,
    status: Schema.Literal("active", "removed", "unusable"),
    createdAt: Millis,
    updatedAt: Millis
  })
)

/** What a hosted page and a charge attempt both say: whose money, for what, how much. */
const attemptFields = {
  organizationId: Schema.String,
  id: Schema.String,
  reference: Schema.String,
  provider: Provider,
  purpose: Purpose,
  customerId: Schema.String,
  targetId: Schema.String,
  quantity: DbInt,
  amount: Schema.String,
  currency: Schema.String
}

const CheckoutRow = recordSchema<CheckoutRecord>()(
  Schema.Struct({
    ...attemptFields,
    status: Schema.Literal("open", "completed", "failed", "superseded"),
    checkoutUrl: NullableText,
    accessCode: NullableText,
    data: JsonObjectText,
    idempotencyKey: NullableText,
    createdAt: Millis,
    updatedAt: Millis
  })
)

const PaymentRow = recordSchema<PaymentRecord>()(
  Schema.Struct({
    ...attemptFields,
    status: Schema.Literal("processing", "succeeded", "failed"),
    providerReference: NullableText,
    failureMessage: NullableText,
    methodId: NullableText,
    idempotencyKey: NullableText,
    requestHash: NullableText,
    applied: Flag,
    amountRefunded: Schema.String,
    disputed: Flag,
    checkedAt: NullableMillis,
    settledAt: NullableMillis,
    createdAt: Millis,
    updatedAt: Millis,
    invoiceQuote: Schema.NullOr(JsonObjectText),
    invoiceId: NullableText
  })
)

const methods = decodeRows("payment_methods", PaymentMethodRow)
const method = decodeFirstRow("payment_methods", PaymentMethodRow)
const checkouts = decodeRows("checkouts", CheckoutRow)
const checkout = decodeFirstRow("checkouts", CheckoutRow)
const payments = decodeRows("payments", PaymentRow)
const payment = decodeFirstRow("payments", PaymentRow)

export const PaymentsRepoSql = Layer.effect(
  PaymentsRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const forUpdate = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })
    const skipLocked = sql.onDialectOrElse({
      pg: () => sql.literal("FOR UPDATE SKIP LOCKED"),
      orElse: () => sql.literal("")
    })
    return {
      insertMethod: (m) =>
        sql`INSERT INTO payment_methods ${sql.insert({ ...m, isDefault: m.isDefault ? 1 : 0 })}`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      activeMethods: (org, customerId) =>
        sql`SELECT * FROM payment_methods WHERE organization_id = ${org} AND customer_id = ${customerId}
            AND status = 'active' ORDER BY is_default DESC, created_at DESC, id DESC`.pipe(
          Effect.flatMap(methods),
          Effect.orDie
        ),
      findMethod: (org, id) =>
        sql`SELECT * FROM payment_methods WHERE organization_id = ${org} AND id = ${id}`.pipe(
          Effect.flatMap(method),
          Effect.orDie
        ),
      setMethodStatus: (org, id, status, now) =>
        sql`UPDATE payment_methods SET status = ${status}, is_default = 0, updated_at = ${now}
            WHERE organization_id = ${org} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie),
      setDefaultMethod: (org, customerId, id, now) =>
        sql`UPDATE payment_methods SET is_default = CASE WHEN id = ${id} THEN 1 ELSE 0 END, updated_at = ${now}
            WHERE organization_id = ${org} AND customer_id = ${customerId} AND status = 'active'
              AND (id = ${id} OR is_default = 1)`.pipe(Effect.asVoid, Effect.orDie),
      lockCustomer: (org, customerId) =>
        sql`SELECT id FROM customers WHERE organization_id = ${org} AND id = ${customerId} ${forUpdate}`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      insertCheckout: (c) =>
        sql`INSERT INTO checkouts ${sql.insert({ ...c, data: JSON.stringify(c.data) })} ON CONFLICT DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      setCheckoutPage: (org, id, url, accessCode, now) =>
        sql`UPDATE checkouts SET checkout_url = ${url}, access_code = ${accessCode}, updated_at = ${now}
            WHERE organization_id = ${org} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie),
      findCheckout: (org, reference) =>
        sql`SELECT * FROM checkouts WHERE organization_id = ${org} AND reference = ${reference}`.pipe(
          Effect.flatMap(checkout),
          Effect.orDie
        ),
      openCheckoutFor: (org, targetId) =>
        sql`SELECT * FROM checkouts WHERE organization_id = ${org} AND target_id = ${targetId} AND status = 'open'
            ORDER BY created_at DESC, id DESC LIMIT 1`.pipe(Effect.flatMap(checkout), Effect.orDie),
      closeCheckout: (org, reference, status, now) =>
        sql`UPDATE checkouts SET status = ${status}, updated_at = ${now}
            WHERE organization_id = ${org} AND reference = ${reference} AND status = 'open' RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      supersedeCheckouts: (org, targetId, now) =>
        sql`UPDATE checkouts SET status = 'superseded', updated_at = ${now}
            WHERE organization_id = ${org} AND target_id = ${targetId} AND status = 'open'`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      insertPayment: (p) =>
        sql`INSERT INTO payments ${sql.insert({
          ...p,
          applied: p.applied ? 1 : 0,
          disputed: p.disputed ? 1 : 0,
          invoiceQuote: p.invoiceQuote === null ? null : JSON.stringify(p.invoiceQuote)
        })} ON CONFLICT DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      findPayment: (org, reference) =>
        sql`SELECT * FROM payments WHERE organization_id = ${org} AND reference = ${reference}`.pipe(
          Effect.flatMap(payment),
          Effect.orDie
        ),
      findPaymentByKey: (org, key) =>
        sql`SELECT * FROM payments WHERE organization_id = ${org} AND idempotency_key = ${key}`.pipe(
          Effect.flatMap(payment),
          Effect.orDie
        ),
      findCheckoutByKey: (org, key) =>
        sql`SELECT * FROM checkouts WHERE organization_id = ${org} AND idempotency_key = ${key}
            ORDER BY created_at DESC LIMIT 1`.pipe(Effect.flatMap(checkout), Effect.orDie),
      inFlightFor: (org, targetId) =>
        sql`SELECT * FROM payments WHERE organization_id = ${org} AND target_id = ${targetId} AND status = 'processing'
            ORDER BY created_at DESC LIMIT 1`.pipe(Effect.flatMap(payment), Effect.orDie),
      declinedSince: (org, targetId, methodId, since) =>
        sql`SELECT 1 AS found FROM payments WHERE organization_id = ${org} AND target_id = ${targetId}
            AND status = 'failed' AND method_id = ${methodId} AND settled_at >= ${since} LIMIT 1`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        ),
      settle: (org, reference, s) =>
        sql`UPDATE payments SET status = ${s.status}, provider_reference = COALESCE(${s.providerReference}, provider_reference),
              failure_message = ${s.failureMessage}, settled_at = ${s.now}, updated_at = ${s.now}
            WHERE organization_id = ${org} AND reference = ${reference}
              AND status IN ('processing', ${s.fromFailed ? "failed" : "processing"}) RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      markUnapplied: (org, reference) =>
        sql`UPDATE payments SET applied = 0 WHERE organization_id = ${org} AND reference = ${reference}`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      linkInvoice: (org, reference, invoiceId) =>
        sql<{ id: string }>`UPDATE payments SET invoice_id = ${invoiceId}
            WHERE organization_id = ${org} AND reference = ${reference} AND invoice_id IS NULL RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      noteMismatch: (org, reference, note, now) =>
        sql`UPDATE payments SET failure_message = ${note}, updated_at = ${now}
            WHERE organization_id = ${org} AND reference = ${reference}`.pipe(Effect.asVoid, Effect.orDie),
      completeCheckout: (org, reference, now) =>
        sql`UPDATE checkouts SET status = 'completed', updated_at = ${now}
            WHERE organization_id = ${org} AND reference = ${reference} AND status <> 'completed' RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      touchProcessing: (org, reference, providerReference, now) =>
        sql`UPDATE payments SET provider_reference = COALESCE(${providerReference}, provider_reference),
              checked_at = ${now}, updated_at = ${now}
            WHERE organization_id = ${org} AND reference = ${reference} AND status = 'processing'`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      claimStale: (cutoffs, now, limit) =>
        sql
          .withTransaction(
            Effect.gen(function* () {
              const stale = yield* sql`SELECT * FROM payments WHERE status = 'processing'
              AND COALESCE(checked_at, created_at) < ${cutoffs.payments} ORDER BY created_at LIMIT ${limit} ${skipLocked}`.pipe(
                Effect.flatMap(payments)
              )
              for (const p of stale) {
                yield* sql`UPDATE payments SET checked_at = ${now} WHERE organization_id = ${p.organizationId} AND id = ${p.id}`
              }
              const open =
                yield* sql`SELECT * FROM checkouts WHERE status = 'open' AND updated_at < ${cutoffs.checkouts}
              ORDER BY updated_at LIMIT ${limit} ${skipLocked}`.pipe(Effect.flatMap(checkouts))
              for (const c of open) {
                yield* sql`UPDATE checkouts SET updated_at = ${now} WHERE organization_id = ${c.organizationId} AND id = ${c.id}`
              }
              return { payments: stale, checkouts: open }
            })
          )
          .pipe(Effect.orDie),
      addRefund: (org, reference, amountRefunded, now) =>
        sql`UPDATE payments SET amount_refunded = ${amountRefunded}, updated_at = ${now}
            WHERE organization_id = ${org} AND reference = ${reference}`.pipe(Effect.asVoid, Effect.orDie),
      markDisputed: (org, reference, now) =>
        sql`UPDATE payments SET disputed = 1, updated_at = ${now}
            WHERE organization_id = ${org} AND reference = ${reference}`.pipe(Effect.asVoid, Effect.orDie),
      succeededPaymentsOf: (org, targetId) =>
        sql`SELECT * FROM payments WHERE organization_id = ${org} AND (target_id = ${targetId} OR invoice_id = ${targetId})
              AND status = 'succeeded'
            ORDER BY created_at, reference`.pipe(Effect.flatMap(payments), Effect.orDie),
      lockPayment: (org, reference) =>
        sql`SELECT * FROM payments WHERE organization_id = ${org} AND reference = ${reference} ${forUpdate}`.pipe(
          Effect.flatMap(payment),
          Effect.orDie
        ),
      recordReversal: (org, reference, r) =>
        Effect.gen(function* () {
          const known = yield* sql<{ amount: string }>`SELECT amount FROM payment_reversals
              WHERE organization_id = ${org} AND payment_reference = ${reference} AND reversal_key = ${r.key}`
          const before = known[0]
          if (before === undefined) {
            yield* sql`INSERT INTO payment_reversals ${sql.insert({
              organizationId: org,
              paymentReference: reference,
              reversalKey: r.key,
              cause: r.cause,
              amount: r.amount,
              createdAt: r.now,
              updatedAt: r.now
            })}`
          } else if (r.cumulative && BigInt(r.amount) > BigInt(before.amount)) {
            yield* sql`UPDATE payment_reversals SET amount = ${r.amount}, updated_at = ${r.now}
                WHERE organization_id = ${org} AND payment_reference = ${reference} AND reversal_key = ${r.key}`
          }
        }).pipe(Effect.orDie),
      reversalAmount: (org, reference, key) =>
        sql<{ amount: string }>`SELECT amount FROM payment_reversals
            WHERE organization_id = ${org} AND payment_reference = ${reference} AND reversal_key = ${key}`.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map((r) => String(r.amount)))),
          Effect.orDie
        ),
      reversals: (org, reference) =>
        sql<{ amount: string }>`SELECT amount FROM payment_reversals
            WHERE organization_id = ${org} AND payment_reference = ${reference}`.pipe(
          Effect.map((rows) => rows.map((r) => String(r.amount))),
          Effect.orDie
        ),
      refundedByTarget: (org, targetIds) =>
        Effect.gen(function* () {
          const sums = new Map<string, bigint>()
          // Chunked: one statement's parameters stay well under SQLite's and PostgreSQL's limits.
          for (let i = 0; i < targetIds.length; i += 500) {
            // A first payment counts for the invoice it became (its target is the subscription it activated).
            const chunk = targetIds.slice(i, i + 500)
            const rows = yield* sql<{
              targetId: string
              amountRefunded: string
            }>`SELECT COALESCE(invoice_id, target_id) AS target_id, amount_refunded
                FROM payments WHERE organization_id = ${org}
                  AND (${sql.in("target_id", chunk)} OR ${sql.in("invoice_id", chunk)})
                  AND amount_refunded <> '0'`
            for (const r of rows) sums.set(r.targetId, (sums.get(r.targetId) ?? 0n) + BigInt(r.amountRefunded))
          }
          return new Map([...sums].map(([id, sum]) => [id, sum.toString()]))
        }).pipe(Effect.orDie)
    }
  })
)
