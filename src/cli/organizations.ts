import { Effect } from "effect"
import { Organizations } from "../organizations/Organizations.ts"
import type { ApiKeyRecord, OrganizationRecord } from "../organizations/OrganizationsRepo.ts"
import { flag, need, type Output, type Parsed, UsageError } from "./args.ts"

export const orgJson = (o: OrganizationRecord) => ({ id: o.id, slug: o.slug, name: o.name, createdAt: o.createdAt })
const keyJson = (k: ApiKeyRecord) => ({
  id: k.id,
  organizationId: k.organizationId,
  prefix: k.displayPrefix,
  environment: k.environment,
  createdAt: k.createdAt,
  revokedAt: k.revokedAt
})

/** `org …` and `key …`: organizations and their API keys. */
export const organizationCommand = (args: Parsed): Effect.Effect<Output, unknown, Organizations> =>
  Effect.gen(function* () {
    const orgs = yield* Organizations
    const [group, action, target] = args.positional
    switch (`${group} ${action}`) {
      case "org create": {
        const slug = yield* need(target, "<slug>")
        const organization = yield* orgs.create(slug, flag(args, "name"))
        const { apiKey, key } = yield* orgs.createKey(organization.id)
        return {
          json: { organization: orgJson(organization), apiKey, keyId: key.id },
          text: `Created organization ${organization.slug} (${organization.id}).\nAPI key (shown only once): ${apiKey}`
        }
      }
      case "org list": {
        const all = yield* orgs.list
        return {
          json: { organizations: all.map(orgJson) },
          text: all.length === 0 ? "No organizations." : all.map((o) => `${o.id}  ${o.slug}  ${o.name}`).join("\n")
        }
      }
      case "key create": {
        const ref = yield* need(target, "<org>")
        const { apiKey, key } = yield* orgs.createKey(ref)
        return {
          json: { key: keyJson(key), apiKey },
          text: `Created key ${key.id}.\nAPI key (shown only once): ${apiKey}`
        }
      }
      case "key list": {
        const keys = yield* orgs.listKeys(yield* need(target, "<org>"))
        return {
          json: { keys: keys.map(keyJson) },
          text: keys
            .map((k) => `${k.id}  ${k.displayPrefix}…  ${k.revokedAt === null ? "active" : "revoked"}`)
            .join("\n")
        }
      }
      case "key revoke": {
        const key = yield* orgs.revokeKey(yield* need(target, "<key-id>"))
        return { json: { key: keyJson(key) }, text: `Revoked key ${key.id}.` }
      }
      default:
        return yield* Effect.fail(
          new UsageError(group === undefined ? "no command given" : `unknown command '${args.positional.join(" ")}'`)
        )
    }
  })
