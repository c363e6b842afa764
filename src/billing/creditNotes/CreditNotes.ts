import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import type { CreditNote } from "../../api/documents.ts"
import { NotFound } from "../../domain/errors.ts"
import { decodeFirstRow, decodeRows, Millis, recordSchema } from "../../platform/db/rowSchemas.ts"
import { Ids } from "../../platform/ids.ts"
import { BillingProfiles } from "../profile/BillingProfiles.ts"

/** A credit note as stored (decisions.md §16): money a refund or a lost dispute gave back on an invoice. */
export interface CreditNoteRecord {
  readonly id: string
  readonly number: string
  readonly invoiceId: string
  readonly customerId: string
  readonly currency: string
  readonly amount: string
  readonly cause: "refund" | "dispute"
  readonly reason: string | null
  readonly paymentReference: string
  readonly reversalKey: string
  readonly createdAt: number
}

export interface IssueCreditNote {
  readonly invoiceId: string
  readonly customerId: string
  readonly currency: string
  readonly amount: string
  readonly cause: "refund" | "dispute"
  readonly reason: string | null
  readonly paymentReference: string
  readonly reversalKey: string
}

export interface CreditNotesShape {
  /** Numbers and stores one, in the caller's transaction (the reversal's). */
  readonly issue: (org: string, note: IssueCreditNote) => Effect.Effect<CreditNoteRecord>
  /** Oldest first; one invoice's, or (undefined) the organization's. */
  readonly list: (org: string, invoiceId: string | undefined) => Effect.Effect<ReadonlyArray<CreditNoteRecord>>
  readonly get: (org: string, id: string) => Effect.Effect<CreditNoteRecord, NotFound>
}

export class CreditNotes extends Context.Tag("CreditNotes")<CreditNotes, CreditNotesShape>() {}

/** `{prefix}-CN-000001`: its own sequence per organization, beside the invoices'. */
export const creditNoteNumber = (n: number, prefix: string) => `${prefix}-CN-${String(n).padStart(6, "0")}`

export const toWireCreditNote = (c: CreditNoteRecord, invoiceNumber: string): CreditNote => ({
  id: c.id,
  number: c.number,
  invoiceId: c.invoiceId,
  invoiceNumber,
  customerId: c.customerId,
  currency: c.currency,
  amount: Number(c.amount),
  cause: c.cause,
  ...(c.reason === null ? {} : { reason: c.reason }),
  createdAt: c.createdAt
})

const Row = recordSchema<CreditNoteRecord>()(
  Schema.Struct({
    id: Schema.String,
    number: Schema.String,
    invoiceId: Schema.String,
    customerId: Schema.String,
    currency: Schema.String,
    amount: Schema.String,
    cause: Schema.Literal("refund", "dispute"),
    reason: Schema.NullOr(Schema.String),
    paymentReference: Schema.String,
    reversalKey: Schema.String,
    createdAt: Millis
  })
)
const rows = decodeRows("credit_notes", Row)
const row = decodeFirstRow("credit_notes", Row)

export const CreditNotesLive = Layer.effect(
  CreditNotes,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ids = yield* Ids
    const profiles = yield* BillingProfiles

    const issue = (org: string, note: IssueCreditNote) =>
      Effect.gen(function* () {
        // The counter row is locked by its upsert until the reversal's transaction ends: consecutive, never shared.
        const [counter] = yield* sql<{ nextNumber: unknown }>`INSERT INTO credit_note_sequences
            (organization_id, next_number) VALUES (${org}, 1)
          ON CONFLICT (organization_id) DO UPDATE SET next_number = credit_note_sequences.next_number + 1
          RETURNING next_number`
        const { invoicePrefix } = yield* profiles.get(org)
        const record: CreditNoteRecord = {
          ...note,
          id: yield* ids.next("cn"),
          number: creditNoteNumber(Number(counter!.nextNumber), invoicePrefix),
          createdAt: yield* Clock.currentTimeMillis
        }
        yield* sql`INSERT INTO credit_notes ${sql.insert({ organizationId: org, ...record })}`
        return record
      }).pipe(Effect.orDie)

    const list = (org: string, invoiceId: string | undefined) =>
      Effect.gen(function* () {
        // An invoice named by its number is the same invoice.
        const byNumber =
          invoiceId === undefined
            ? []
            : yield* sql<{ id: string }>`SELECT id FROM invoices WHERE organization_id = ${org}
                AND (id = ${invoiceId} OR number = ${invoiceId})`
        const id = invoiceId === undefined ? undefined : (byNumber[0]?.id ?? invoiceId)
        return yield* sql`SELECT * FROM credit_notes WHERE organization_id = ${org}
            ${id === undefined ? sql.literal("") : sql`AND invoice_id = ${id}`}
            ORDER BY created_at, LENGTH(number), number`.pipe(Effect.flatMap(rows))
      }).pipe(Effect.orDie)

    const get = (org: string, id: string) =>
      sql`SELECT * FROM credit_notes WHERE organization_id = ${org} AND id = ${id}`.pipe(
        Effect.flatMap(row),
        Effect.orDie,
        Effect.flatMap(
          Option.match({
            onNone: () =>
              Effect.fail(new NotFound({ code: "credit_note_not_found", message: `No credit note '${id}'` })),
            onSome: Effect.succeed
          })
        )
      )

    return { issue, list, get }
  })
)
