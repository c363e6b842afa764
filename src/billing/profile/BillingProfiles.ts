import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import {
  type Address,
  type BillingProfile,
  DEFAULT_INVOICE_PREFIX,
  type UpdateBillingProfile
} from "../../api/billingProfile.ts"
import { AddressText } from "../../customers/BillingDetailsRepo.ts"
import { decodeFirstRow, Millis, recordSchema } from "../../platform/db/rowSchemas.ts"

/** The organization as the seller on its invoices (decisions.md §16), as stored. */
export interface ProfileRecord {
  readonly legalName: string | null
  readonly address: Address | null
  readonly email: string | null
  readonly taxId: string | null
  readonly invoicePrefix: string
  readonly footer: string | null
  readonly updatedAt: number | null
}

/** An organization that never set its profile: nothing but the default prefix. */
export const emptyProfile: ProfileRecord = {
  legalName: null,
  address: null,
  email: null,
  taxId: null,
  invoicePrefix: DEFAULT_INVOICE_PREFIX,
  footer: null,
  updatedAt: null
}

export interface BillingProfilesShape {
  readonly get: (org: string) => Effect.Effect<ProfileRecord>
  /** A partial update (a field absent keeps, `null` clears); returns the profile as stored. */
  readonly update: (org: string, change: UpdateBillingProfile) => Effect.Effect<ProfileRecord>
}

export class BillingProfiles extends Context.Tag("BillingProfiles")<BillingProfiles, BillingProfilesShape>() {}

/** The change over the current profile: pure. */
export const applyProfileChange = (current: ProfileRecord, change: UpdateBillingProfile): ProfileRecord => {
  const pick = <K extends keyof UpdateBillingProfile & keyof ProfileRecord>(key: K) =>
    change[key] === undefined ? current[key] : change[key]
  return {
    legalName: pick("legalName") as string | null,
    address: pick("address") as Address | null,
    email: pick("email") as string | null,
    taxId: pick("taxId") as string | null,
    invoicePrefix:
      change.invoicePrefix === undefined ? current.invoicePrefix : (change.invoicePrefix ?? DEFAULT_INVOICE_PREFIX),
    footer: pick("footer") as string | null,
    updatedAt: current.updatedAt
  }
}

export const toWireProfile = (p: ProfileRecord): BillingProfile => ({
  success: true,
  ...(p.legalName === null ? {} : { legalName: p.legalName }),
  ...(p.address === null ? {} : { address: p.address }),
  ...(p.email === null ? {} : { email: p.email }),
  ...(p.taxId === null ? {} : { taxId: p.taxId }),
  invoicePrefix: p.invoicePrefix,
  ...(p.footer === null ? {} : { footer: p.footer }),
  updatedAt: p.updatedAt
})

const ProfileRow = recordSchema<ProfileRecord>()(
  Schema.Struct({
    legalName: Schema.NullOr(Schema.String),
    address: AddressText,
    email: Schema.NullOr(Schema.String),
    taxId: Schema.NullOr(Schema.String),
    invoicePrefix: Schema.String,
    footer: Schema.NullOr(Schema.String),
    updatedAt: Schema.NullOr(Millis)
  })
)
const profileRow = decodeFirstRow("billing_profiles", ProfileRow)

export const BillingProfilesLive = Layer.effect(
  BillingProfiles,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const get = (org: string) =>
      sql`SELECT legal_name, address, email, tax_id, invoice_prefix, footer, updated_at FROM billing_profiles
          WHERE organization_id = ${org}`.pipe(
        Effect.flatMap(profileRow),
        Effect.map(Option.getOrElse(() => emptyProfile)),
        Effect.orDie
      )

    const update = (org: string, change: UpdateBillingProfile) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const next = { ...applyProfileChange(yield* get(org), change), updatedAt: now }
        const columns = {
          legalName: next.legalName,
          address: next.address === null ? null : JSON.stringify(next.address),
          email: next.email,
          taxId: next.taxId,
          invoicePrefix: next.invoicePrefix,
          footer: next.footer,
          updatedAt: now
        }
        // Two updates at once: the later write wins whole (each is a read-modify-write of one row).
        yield* sql`INSERT INTO billing_profiles ${sql.insert({ organizationId: org, ...columns, createdAt: now })}
          ON CONFLICT (organization_id) DO UPDATE SET legal_name = excluded.legal_name, address = excluded.address,
            email = excluded.email, tax_id = excluded.tax_id, invoice_prefix = excluded.invoice_prefix,
            footer = excluded.footer, updated_at = excluded.updated_at`
        return next
      }).pipe(Effect.orDie)

    return { get, update }
  })
)
