import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { storedMoney } from "../domain/bounds.ts"
import { insertRows } from "../platform/db/insertRows.ts"
import { decodeRows, JsonObjectText, Millis, NullableMillis, recordSchema } from "../platform/db/rowSchemas.ts"

export interface CustomerRecord {
  readonly organizationId: string
  readonly id: string
  readonly externalId: string | null
  readonly email: string | null
  readonly name: string | null
  readonly metadata: Record<string, unknown>
  readonly overageMaxAmount: string | null
  readonly overageOnLimit: "block" | "notify" | null
  readonly overageCreatedAt: number | null
  readonly overageUpdatedAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
}

export interface CustomerFilter {
  readonly limit: number
  readonly offset: number
  readonly search?: string | undefined
  readonly email?: string | undefined
  readonly externalId?: string | undefined
}

/** The candidates a reference can name: by service id, by external id, by email. */
/** What matching a reference needs of a customer (the entitlement read carries only what it decides on). */
export type Matchable = Pick<CustomerRecord, "id" | "externalId" | "email">

export interface CustomerMatches<C extends Matchable = CustomerRecord> {
  readonly byId: Option.Option<C>
  readonly byExternalId: Option.Option<C>
  readonly byEmail: Option.Option<C>
}

export interface CustomersRepoShape {
  readonly matches: (organizationId: string, ref: string) => Effect.Effect<CustomerMatches>
  /** Inserts unless an external id or email is taken; `false` then. */
  readonly insert: (customer: CustomerRecord) => Effect.Effect<boolean>
  /** Inserts each unless its external id or email is taken (a few multi-row statements): how many were inserted. */
  readonly insertMany: (customers: ReadonlyArray<CustomerRecord>) => Effect.Effect<number>
  /** Writes identity fields; `false` when the new email belongs to another customer. */
  readonly update: (customer: CustomerRecord) => Effect.Effect<boolean>
  readonly list: (
    organizationId: string,
    filter: CustomerFilter
  ) => Effect.Effect<{ readonly rows: ReadonlyArray<CustomerRecord>; readonly total: number }>
  readonly listIds: (organizationId: string) => Effect.Effect<ReadonlyArray<string>>
}

export class CustomersRepo extends Context.Tag("CustomersRepo")<CustomersRepo, CustomersRepoShape>() {}

/**
 * A customer row as the hot path reads it (src/entitlements/EntitlementsRepo.ts, inside its one JSON row per
 * check/track): mapped by hand, with no schema decoding on that path. Everything else reads customers through
 * `CustomerRow`, the same mapping as a schema; test/row-schemas.test.ts checks that the two agree.
 */
export const toCustomerRecord = (row: any): CustomerRecord => ({
  organizationId: row.organizationId,
  id: row.id,
  externalId: row.externalId,
  email: row.email,
  name: row.name,
  metadata: JSON.parse(row.metadata),
  // A cap stored before the bounds (String(1e100) is "1e+100") is read as the bound (docs/decisions.md "Numbers").
  overageMaxAmount:
    row.overageMaxAmount === null || row.overageMaxAmount === undefined
      ? null
      : storedMoney(String(row.overageMaxAmount)),
  overageOnLimit: row.overageOnLimit,
  overageCreatedAt: row.overageCreatedAt === null ? null : Number(row.overageCreatedAt),
  overageUpdatedAt: row.overageUpdatedAt === null ? null : Number(row.overageUpdatedAt),
  createdAt: Number(row.createdAt),
  updatedAt: Number(row.updatedAt)
})

/** A cap stored before the bounds (String(1e100) is "1e+100") is read as the bound (docs/decisions.md "Numbers"). */
const StoredMoney = Schema.transform(Schema.String, Schema.String, {
  strict: true,
  decode: (text) => storedMoney(text),
  encode: (text) => text
})

const CustomerRow = recordSchema<CustomerRecord>()(
  Schema.Struct({
    organizationId: Schema.String,
    id: Schema.String,
    externalId: Schema.NullOr(Schema.String),
    email: Schema.NullOr(Schema.String),
    name: Schema.NullOr(Schema.String),
    metadata: JsonObjectText,
    overageMaxAmount: Schema.NullOr(StoredMoney),
    overageOnLimit: Schema.NullOr(Schema.Literal("block", "notify")),
    overageCreatedAt: NullableMillis,
    overageUpdatedAt: NullableMillis,
    createdAt: Millis,
    updatedAt: Millis
  })
)

const customers = decodeRows("customers", CustomerRow)

const toRow = (c: CustomerRecord) => ({
  ...c,
  emailLower: c.email?.toLowerCase() ?? null,
  metadata: JSON.stringify(c.metadata)
})

/**
 * The customers a reference may name (by id, external id, email), as three index lookups: SQLite answers the
 * equivalent `id = ? OR external_id = ? OR email_lower = ?` by scanning the organization's customers. A customer
 * matched twice appears twice (`matchesOf` does not mind).
 */
export const matching = (sql: SqlClient.SqlClient, organizationId: string, ref: string) =>
  sql`SELECT * FROM customers WHERE organization_id = ${organizationId} AND id = ${ref}
      UNION ALL SELECT * FROM customers WHERE organization_id = ${organizationId} AND external_id = ${ref}
      UNION ALL SELECT * FROM customers WHERE organization_id = ${organizationId} AND email_lower = ${ref.toLowerCase()}`

/** Sorts the customers a reference matched into its three candidates. */
export const matchesOf = <C extends Matchable>(records: ReadonlyArray<C>, ref: string): CustomerMatches<C> => ({
  byId: Option.fromNullable(records.find((c) => c.id === ref)),
  byExternalId: Option.fromNullable(records.find((c) => c.externalId === ref)),
  byEmail: Option.fromNullable(records.find((c) => c.email?.toLowerCase() === ref.toLowerCase()))
})

export const CustomersRepoSql = Layer.effect(
  CustomersRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    // Substring match without LIKE, so '%' and '_' in the search text mean themselves.
    const contains = (column: string, needle: string) =>
      sql.onDialectOrElse({
        pg: () => sql`strpos(lower(${sql(column)}), ${needle}) > 0`,
        orElse: () => sql`instr(lower(${sql(column)}), ${needle}) > 0`
      })

    const filterClause = (organizationId: string, filter: CustomerFilter) => {
      const clauses = [sql`organization_id = ${organizationId}`]
      if (filter.search !== undefined) {
        const needle = filter.search.toLowerCase()
        clauses.push(
          sql`(${contains("email", needle)} OR ${contains("name", needle)} OR ${contains("externalId", needle)})`
        )
      }
      if (filter.email !== undefined) clauses.push(sql`email_lower = ${filter.email.toLowerCase()}`)
      if (filter.externalId !== undefined) clauses.push(sql`external_id = ${filter.externalId}`)
      return sql.and(clauses)
    }

    return {
      matches: (organizationId, ref) =>
        matching(sql, organizationId, ref).pipe(
          Effect.flatMap(customers),
          Effect.map((records) => matchesOf(records, ref)),
          Effect.orDie
        ),
      insert: (customer) =>
        sql<{ id: string }>`INSERT INTO customers ${sql.insert(toRow(customer))}
          ON CONFLICT DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      insertMany: (records) => insertRows(sql, "customers", records.map(toRow), true).pipe(Effect.orDie),
      update: (c) =>
        sql<{ id: string }>`UPDATE customers SET
            external_id = ${c.externalId}, email = ${c.email}, email_lower = ${c.email?.toLowerCase() ?? null},
            name = ${c.name}, metadata = ${JSON.stringify(c.metadata)},
            overage_max_amount = ${c.overageMaxAmount}, overage_on_limit = ${c.overageOnLimit},
            overage_created_at = ${c.overageCreatedAt}, overage_updated_at = ${c.overageUpdatedAt},
            updated_at = ${c.updatedAt}
          WHERE organization_id = ${c.organizationId} AND id = ${c.id}
            AND NOT EXISTS (SELECT 1 FROM customers other WHERE other.organization_id = ${c.organizationId}
              AND other.id <> ${c.id}
              AND (other.email_lower = ${c.email?.toLowerCase() ?? null} OR other.external_id = ${c.externalId}))
          RETURNING id`.pipe(
          Effect.map((rows) => rows.length === 1),
          Effect.orDie
        ),
      listIds: (organizationId) =>
        sql<{ id: string }>`SELECT id FROM customers WHERE organization_id = ${organizationId} ORDER BY id`.pipe(
          Effect.map((rows) => rows.map((r) => r.id)),
          Effect.orDie
        ),
      list: (organizationId, filter) =>
        Effect.all(
          {
            rows: sql`SELECT * FROM customers WHERE ${filterClause(organizationId, filter)}
              ORDER BY created_at DESC, id DESC LIMIT ${filter.limit} OFFSET ${filter.offset}`.pipe(
              Effect.flatMap(customers)
            ),
            total: sql<{
              n: number
            }>`SELECT COUNT(*) AS n FROM customers WHERE ${filterClause(organizationId, filter)}`.pipe(
              Effect.map((rows) => Number(rows[0]?.n ?? 0))
            )
          },
          { concurrency: 1 }
        ).pipe(Effect.orDie)
    }
  })
)
