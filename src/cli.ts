import { Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { ServicesLive } from "./app.ts"
import { Organizations } from "./organizations/Organizations.ts"
import type { ApiKeyRecord, OrganizationRecord } from "./organizations/OrganizationsRepo.ts"
import { AppConfigLive } from "./platform/config.ts"

const USAGE = `Usage: npm run --silent cli -- <command> [--json]

Commands:
  org create <slug> [--name <name>]   create an organization and its first API key
  org list                            list organizations
  key create <org>                    create another API key for an organization (id or slug)
  key list <org>                      list an organization's keys (never the secrets)
  key revoke <key-id>                 revoke a key at once

Options:
  --json                              print one JSON object instead of text
The database is the service's own: DATABASE_URL (PostgreSQL) or DATA_DIR (SQLite, default ./data).
`

class UsageError extends Error {}

interface Parsed {
  readonly positional: ReadonlyArray<string>
  readonly flags: ReadonlyMap<string, string | true>
}

const parse = (argv: ReadonlyArray<string>): Parsed => {
  const positional: Array<string> = []
  const flags = new Map<string, string | true>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--json" || arg === "--help" || arg === "-h") flags.set(arg.replace(/^-+/, ""), true)
    else if (arg.startsWith("--")) {
      const [name, inline] = arg.slice(2).split("=", 2) as [string, string | undefined]
      const value = inline ?? argv[++i]
      if (value === undefined) throw new UsageError(`--${name} needs a value`)
      flags.set(name, value)
    } else positional.push(arg)
  }
  return { positional, flags }
}

const orgJson = (o: OrganizationRecord) => ({ id: o.id, slug: o.slug, name: o.name, createdAt: o.createdAt })
const keyJson = (k: ApiKeyRecord) => ({
  id: k.id,
  organizationId: k.organizationId,
  prefix: k.displayPrefix,
  environment: k.environment,
  createdAt: k.createdAt,
  revokedAt: k.revokedAt
})

/** Each command returns what to print: a JSON value and its text rendering. */
type Output = { readonly json: unknown; readonly text: string }

const command = (args: Parsed): Effect.Effect<Output, Error, Organizations> =>
  Effect.gen(function*() {
    const orgs = yield* Organizations
    const [group, action, target] = args.positional
    const need = (value: string | undefined, what: string) =>
      value === undefined ? Effect.fail(new UsageError(`missing ${what}`)) : Effect.succeed(value)

    switch (`${group} ${action}`) {
      case "org create": {
        const slug = yield* need(target, "<slug>")
        const name = args.flags.get("name")
        const organization = yield* orgs.create(slug, typeof name === "string" ? name : undefined)
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
        return { json: { key: keyJson(key), apiKey }, text: `Created key ${key.id}.\nAPI key (shown only once): ${apiKey}` }
      }
      case "key list": {
        const keys = yield* orgs.listKeys(yield* need(target, "<org>"))
        return {
          json: { keys: keys.map(keyJson) },
          text: keys.map((k) => `${k.id}  ${k.displayPrefix}…  ${k.revokedAt === null ? "active" : "revoked"}`).join("\n")
        }
      }
      case "key revoke": {
        const key = yield* orgs.revokeKey(yield* need(target, "<key-id>"))
        return { json: { key: keyJson(key) }, text: `Revoked key ${key.id}.` }
      }
      default:
        return yield* Effect.fail(new UsageError(group === undefined ? "no command given" : `unknown command '${args.positional.join(" ")}'`))
    }
  })

const main = async () => {
  let args: Parsed
  try {
    args = parse(process.argv.slice(2))
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}`)
    return 2
  }
  if (args.flags.has("help") || args.flags.has("h")) {
    process.stdout.write(USAGE)
    return 0
  }
  const layer = ServicesLive.pipe(
    Layer.provide(AppConfigLive),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )
  const runtime = ManagedRuntime.make(layer)
  try {
    const output = await runtime.runPromise(command(args))
    process.stdout.write((args.flags.has("json") ? JSON.stringify(output.json) : output.text) + "\n")
    return 0
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    if (error instanceof UsageError || message.startsWith("missing") || message.startsWith("unknown command")) {
      process.stderr.write(`${message}\n\n${USAGE}`)
      return 2
    }
    process.stderr.write(`error: ${message}\n`)
    return 1
  } finally {
    await runtime.dispose()
  }
}

process.exit(await main())
