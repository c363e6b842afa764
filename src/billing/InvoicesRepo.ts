import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { InvoiceStatus } from "../api/billing.ts"
import {
  DbInt,
  decodeFirstRow,
  decodeRows,
  JsonText,
  MicroUnits,
  Millis,
  NullableMillis,
  recordSchema
} from "../platform/db/rowSchemas.ts"
import type { StoredLine, UnbilledEvent } from "./lines.ts"

/** An invoice as stored: money as exact decimal strings of minor units, instants as epoch milliseconds. */
export interface InvoiceRecord {
  readonly organizationId: string
  readonly id: string
  readonly number: string
  readonly customerId: string
  readonly subscriptionId: string | null
  readonly currency: string
  readonly status: InvoiceStatus
  readonly lines: ReadonlyArray<StoredLine>
  readonly subtotal: string
  /** Sums of the lines' discounts and taxes (decisions.md §15, §16); "0" on invoices from before them. */
  readonly discount: string
  readonly tax: string
  readonly taxNote: string | null
  readonly total: string
  readonly amountPaid: string
  /** Of `total`, what the customer's credit balance paid when the invoice was created (decisions.md §14). */
  readonly creditApplied: string
  readonly periodStart: number | null
  readonly periodEnd: number | null
  readonly attempts: number
  readonly nextAttemptAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
  readonly paidAt: number | null
}

export interface InvoicesRepoShape {
  /**
   * The customer's unbilled billable events (billable > 0, no invoice), locked for the rest of the transaction on
   * PostgreSQL (`FOR UPDATE`, in id order so two lockers cannot deadlock); SQLite serialises writers itself.
   */
  readonly lockUnbilled: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<UnbilledEvent>>
  /** The same without a lock, for one customer or (undefined) all of them. */
  readonly listUnbilled: (org: string, customerId: string | undefined) => Effect.Effect<ReadonlyArray<UnbilledEvent>>
  /**
   * Moves events from one holder to another: `invoice_id` from `from` (null = unbilled) to `to`, only on events still
   * held by `from` (a guarded UPDATE, so of two racing claimers each event goes to one). Returns the ids it moved.
   */
  readonly moveEvents: (
    org: string,
    move: { readonly from: string | null; readonly to: string },
    eventIds: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>>
  /** The organization's next invoice number (1, 2, …), from its sequence row (locked until the transaction ends). */
  readonly nextNumber: (org: string) => Effect.Effect<number>
  readonly insert: (invoice: InvoiceRecord) => Effect.Effect<void>
  readonly find: (org: string, id: string) => Effect.Effect<Option.Option<InvoiceRecord>>
  /** Newest first; every customer's when `customerId` is undefined. */
  readonly list: (org: string, customerId: string | undefined) => Effect.Effect<ReadonlyArray<InvoiceRecord>>
  /** The invoice's status, its row locked until the transaction ends (PostgreSQL; SQLite serialises writers). */
  readonly lockStatus: (org: string, id: string) => Effect.Effect<Option.Option<InvoiceRecord["status"]>>
  /** `open` → `void`; false when the invoice was in another status (nothing written). */
  readonly markVoid: (org: string, id: string, now: number) => Effect.Effect<boolean>
  /** `open`/`uncollectible` → `paid`; false when the invoice was in another status (nothing written). */
  readonly markPaid: (
    org: string,
    id: string,
    amountPaid: string,
    paidAt: number,
    now: number
  ) => Effect.Effect<boolean>
}

export class InvoicesRepo extends Context.Tag("InvoicesRepo")<InvoicesRepo, InvoicesRepoShape>() {}

/** Parameters per statement when claiming events by id (well under SQLite's and PostgreSQL's limits). */
const CLAIM_CHUNK = 500

const UnbilledEventRow = recordSchema<UnbilledEvent>()(
  Schema.Struct({
    id: Schema.String,
    customerId: Schema.String,
    subjectId: Schema.String,
    planId: Schema.NullOr(Schema.String),
    cost: MicroUnits,
    billable: MicroUnits,
    createdAt: Millis
  })
)

export const StoredLineJson = recordSchema<StoredLine>()(
  Schema.Struct({
    feature: Schema.String,
    description: Schema.String,
    quantity: Schema.String,
    unitPrice: Schema.String,
    amount: Schema.String,
    tierBreakdown: Schema.Array(
      Schema.Struct({
        tier: Schema.Number,
        units: Schema.Number,
        unitPrice: Schema.String,
        flatFee: Schema.String,
        amount: Schema.String
      })
    ),
    periodStart: Schema.String,
    periodEnd: Schema.String,
    discounts: Schema.optionalWith(Schema.Array(Schema.Struct({ coupon: Schema.String, amount: Schema.String })), {
      exact: true
    }),
    taxes: Schema.optionalWith(
      Schema.Array(
        Schema.Struct({
          rate: Schema.String,
          name: Schema.String,
          percentage: Schema.String,
          inclusive: Schema.Boolean,
          amount: Schema.String
        })
      ),
      { exact: true }
    )
  })
)

const InvoiceRow = recordSchema<InvoiceRecord>()(
  Schema.Struct({
    organizationId: Schema.String,
    id: Schema.String,
    number: Schema.String,
    customerId: Schema.String,
    subscriptionId: Schema.NullOr(Schema.String),
    currency: Schema.String,
    status: InvoiceStatus,
    lines: JsonText(Schema.Array(StoredLineJson)),
    subtotal: Schema.String,
    discount: Schema.String,
    tax: Schema.String,
    taxNote: Schema.NullOr(Schema.String),
    total: Schema.String,
    amountPaid: Schema.String,
    creditApplied: Schema.String,
    periodStart: NullableMillis,
    periodEnd: NullableMillis,
    attempts: DbInt,
    nextAttemptAt: NullableMillis,
    createdAt: Millis,
    updatedAt: Millis,
    paidAt: NullableMillis
  })
)

const unbilledEvents = decodeRows("usage_events", UnbilledEventRow)
const invoices = decodeRows("invoices", InvoiceRow)
const invoice = decodeFirstRow("invoices", InvoiceRow)
const invoiceStatus = decodeFirstRow("invoices", Schema.Struct({ status: InvoiceStatus }))

export const InvoicesRepoSql = Layer.effect(
  InvoicesRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const forUpdate = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })

    const unbilled = (org: string, customerId: string | undefined, lock: boolean) =>
      sql`SELECT id, customer_id, subject_id, plan_id, cost, billable, created_at FROM usage_events
          WHERE organization_id = ${org}
            ${customerId === undefined ? sql.literal("") : sql`AND customer_id = ${customerId}`}
            AND invoice_id IS NULL AND billable > 0
          ORDER BY id ${lock ? forUpdate : sql.literal("")}`.pipe(Effect.flatMap(unbilledEvents), Effect.orDie)

    return {
      lockUnbilled: (org, customerId) => unbilled(org, customerId, true),
      listUnbilled: (org, customerId) => unbilled(org, customerId, false),
      moveEvents: (org, move, eventIds) =>
        Effect.gen(function* () {
          const moved: Array<string> = []
          for (let i = 0; i < eventIds.length; i += CLAIM_CHUNK) {
            const chunk = eventIds.slice(i, i + CLAIM_CHUNK)
            const rows = yield* sql<{ id: string }>`UPDATE usage_events SET invoice_id = ${move.to}
                WHERE organization_id = ${org} AND ${sql.in("id", chunk)}
                  AND ${move.from === null ? sql`invoice_id IS NULL` : sql`invoice_id = ${move.from}`}
                RETURNING id`
            for (const row of rows) moved.push(row.id)
          }
          return moved
        }).pipe(Effect.orDie),
      nextNumber: (org) =>
        sql<{ nextNumber: unknown }>`INSERT INTO invoice_sequences (organization_id, next_number) VALUES (${org}, 1)
            ON CONFLICT (organization_id) DO UPDATE SET next_number = invoice_sequences.next_number + 1
            RETURNING next_number`.pipe(
          Effect.map((rows) => Number(rows[0]!.nextNumber)),
          Effect.orDie
        ),
      insert: (i) =>
        sql`INSERT INTO invoices ${sql.insert({
          organizationId: i.organizationId,
          id: i.id,
          number: i.number,
          customerId: i.customerId,
          subscriptionId: i.subscriptionId,
          currency: i.currency,
          status: i.status,
          lines: JSON.stringify(i.lines),
          subtotal: i.subtotal,
          discount: i.discount,
          tax: i.tax,
          taxNote: i.taxNote,
          total: i.total,
          amountPaid: i.amountPaid,
          creditApplied: i.creditApplied,
          periodStart: i.periodStart,
          periodEnd: i.periodEnd,
          attempts: i.attempts,
          nextAttemptAt: i.nextAttemptAt,
          createdAt: i.createdAt,
          updatedAt: i.updatedAt,
          paidAt: i.paidAt
        })}`.pipe(Effect.asVoid, Effect.orDie),
      find: (org, id) =>
        sql`SELECT * FROM invoices WHERE organization_id = ${org} AND id = ${id}`.pipe(
          Effect.flatMap(invoice),
          Effect.orDie
        ),
      list: (org, customerId) =>
        sql`SELECT * FROM invoices WHERE organization_id = ${org}
            ${customerId === undefined ? sql.literal("") : sql`AND customer_id = ${customerId}`}
            ORDER BY created_at DESC, LENGTH(number) DESC, number DESC`.pipe(Effect.flatMap(invoices), Effect.orDie),
      lockStatus: (org, id) =>
        sql`SELECT status FROM invoices WHERE organization_id = ${org} AND id = ${id} ${forUpdate}`.pipe(
          Effect.flatMap(invoiceStatus),
          Effect.map(Option.map((row) => row.status)),
          Effect.orDie
        ),
      markVoid: (org, id, now) =>
        sql<{ id: string }>`UPDATE invoices SET status = 'void', next_attempt_at = NULL, updated_at = ${now}
            WHERE organization_id = ${org} AND id = ${id} AND status = 'open' RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      markPaid: (org, id, amountPaid, paidAt, now) =>
        sql<{ id: string }>`UPDATE invoices SET status = 'paid', amount_paid = ${amountPaid}, paid_at = ${paidAt},
              next_attempt_at = NULL, updated_at = ${now}
            WHERE organization_id = ${org} AND id = ${id} AND status IN ('open', 'uncollectible')
            RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        )
    }
  })
)
