import { Effect, ParseResult, Schema } from "effect"
import { UpdateBillingProfile } from "../api/billingProfile.ts"
import { readableIssues } from "../boundary/issues.ts"
import { BillingProfiles, type ProfileRecord, toWireProfile } from "../billing/profile/BillingProfiles.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { flag, invalid, need, type Output, type Parsed, UsageError } from "./args.ts"

/** Flags of `profile set`, each the API field it sets (`--clear-<field>` is not offered: the API's null does that). */
const FIELDS = {
  "legal-name": "legalName",
  email: "email",
  "tax-id": "taxId",
  "invoice-prefix": "invoicePrefix",
  footer: "footer"
} as const
const ADDRESS = {
  line1: "line1",
  line2: "line2",
  city: "city",
  "postal-code": "postalCode",
  state: "state",
  country: "country"
} as const

export const PROFILE_FLAGS = [...Object.keys(FIELDS), ...Object.keys(ADDRESS)]

const profileText = (slug: string, p: ProfileRecord) => {
  const a = p.address
  const address = a === null ? "(none)" : [a.line1, a.line2, a.city, a.postalCode, a.state, a.country].filter(Boolean)
  return [
    `Billing profile of ${slug}:`,
    `  legal name:     ${p.legalName ?? "(none)"}`,
    `  address:        ${Array.isArray(address) ? address.join(", ") : address}`,
    `  email:          ${p.email ?? "(none)"}`,
    `  tax id:         ${p.taxId ?? "(none)"}`,
    `  invoice prefix: ${p.invoicePrefix}`,
    `  footer:         ${p.footer ?? "(none)"}`
  ].join("\n")
}

/** `profile get <org>` and `profile set <org> [--legal-name …] [--country …]`: the same service as the API. */
export const billingProfileCommand = (args: Parsed) =>
  Effect.gen(function* () {
    const orgs = yield* Organizations
    const profiles = yield* BillingProfiles
    const [, action, orgRef, ...rest] = args.positional
    if (rest.length > 0) return yield* Effect.fail(new UsageError(`unknown argument '${rest[0]}'`))
    const org = yield* orgs.get(yield* need(orgRef, "<org>"))
    if (action === "get") {
      const profile = yield* profiles.get(org.id)
      return { json: toWireProfile(profile), text: profileText(org.slug, profile) } satisfies Output
    }
    const change: Record<string, unknown> = {}
    for (const [name, field] of Object.entries(FIELDS)) {
      const value = flag(args, name)
      if (value !== undefined) change[field] = value
    }
    // Address flags replace the address as a whole, as the API's `address` does.
    const address: Record<string, string> = {}
    for (const [name, field] of Object.entries(ADDRESS)) {
      const value = flag(args, name)
      if (value !== undefined) address[field] = value
    }
    if (Object.keys(address).length > 0) change.address = address
    if (Object.keys(change).length === 0) return yield* Effect.fail(new UsageError("nothing to set"))
    const decoded = yield* Effect.either(Schema.decodeUnknown(UpdateBillingProfile, { errors: "all" })(change))
    if (decoded._tag === "Left") {
      const issues = readableIssues(ParseResult.ArrayFormatter.formatErrorSync(decoded.left)).map((i) => ({
        ...i,
        // Name the flag, not the API field.
        path: flagOf(i.path)
      }))
      return yield* invalid("The billing profile is invalid", issues)
    }
    const profile = yield* profiles.update(org.id, decoded.right)
    return { json: toWireProfile(profile), text: profileText(org.slug, profile) } satisfies Output
  })

const flagOf = (path: string) => {
  const field = path.replace(/^address\./, "")
  const all: Record<string, string> = { ...FIELDS, ...ADDRESS }
  const name = Object.keys(all).find((k) => all[k] === field)
  return name === undefined ? path : `--${name}`
}
