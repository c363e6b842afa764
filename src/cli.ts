import { Effect, Layer, Logger, LogLevel, ManagedRuntime, ParseResult, Schema } from "effect"
import { readFile } from "node:fs/promises"
import { extname, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { SyncRequest, type SyncResult } from "./api/catalog.ts"
import { ServicesLive } from "./app.ts"
import { type Catalog, syncCatalog } from "./catalog/Catalog.ts"
import type { InvalidInput } from "./domain/errors.ts"
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
  sync <file> [--org <org>]           sync the catalog in <file> (JSON, or a .ts/.js module whose default or
                                      \`catalog\` export is the catalog) into an organization (id or slug);
                                      --org may be omitted when there is exactly one organization

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

/**
 * Each command returns what to print: a JSON value and its text rendering. A non-zero `exitCode` (invalid
 * input) prints the JSON on stdout with --json, else the text on stderr.
 */
type Output = { readonly json: unknown; readonly text: string; readonly exitCode?: number }

interface Issue {
  readonly path: string
  readonly message: string
}

const invalid = (message: string, details: ReadonlyArray<Issue>): Output => ({
  json: { success: false, code: "invalid_request", message, details },
  text: [message, ...details.map((d) => (d.path === "" ? d.message : `${d.path}: ${d.message}`))].join("\n"),
  exitCode: 1
})

const formatPath = (path: ReadonlyArray<PropertyKey>) =>
  path.reduce<string>((out, key) =>
    typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`, "")

/** Decode problems as the API's 400 lists them (src/http/errorMiddleware.ts): one line per problem. */
const decodeIssues = (error: ParseResult.ParseError): Array<Issue> => {
  const formatted = ParseResult.ArrayFormatter.formatErrorSync(error).map((i) => ({ path: formatPath(i.path), message: i.message }))
  const useful = formatted.filter((issue) =>
    !issue.message.startsWith("Expected undefined,") ||
    !formatted.some((other) => other.path === issue.path && other !== issue)
  )
  return useful.filter((issue, i) => useful.findIndex((o) => o.path === issue.path && o.message === issue.message) === i)
}

/** The catalog object of a file: parsed JSON, or a module's default (or `catalog`) export. */
const loadCatalogFile = (file: string) =>
  Effect.tryPromise({
    try: async (): Promise<unknown> => {
      const path = resolve(file)
      if ([".ts", ".js", ".mjs", ".mts", ".cjs", ".cts", ".tsx", ".jsx"].includes(extname(path))) {
        const module = await import(pathToFileURL(path).href)
        const value = module.default ?? module.catalog
        if (value === undefined) throw new Error(`${file} has no default or \`catalog\` export`)
        return value
      }
      const text = await readFile(path, "utf8")
      try {
        return JSON.parse(text)
      } catch (error) {
        throw new Error(`${file} is not valid JSON: ${(error as Error).message}`)
      }
    },
    catch: (error) => (error instanceof Error ? error : new Error(String(error)))
  })

const changeLine = (kind: string, c: SyncResult["features"]) =>
  `  ${kind}: ${c.created.length} created, ${c.updated.length} updated, ${c.unchanged.length} unchanged` +
  (c.created.length + c.updated.length > 0 ? ` (${[...c.created, ...c.updated].join(", ")})` : "")

const syncText = (orgSlug: string, r: SyncResult) =>
  [
    `Synced the catalog of ${orgSlug}:`,
    changeLine("features", r.features),
    changeLine("credit systems", r.creditSystems),
    changeLine("credit packs", r.creditPacks),
    changeLine("plans", r.plans),
    ...(r.warnings.length === 0 ? [] : ["Warnings:", ...r.warnings.map((w) => `  - ${w}`)])
  ].join("\n")

const syncCommand = (args: Parsed): Effect.Effect<Output, Error, Organizations | Catalog> =>
  Effect.gen(function*() {
    const orgs = yield* Organizations
    const file = args.positional[1]
    if (file === undefined) return yield* Effect.fail(new UsageError("missing <file>"))
    if (args.positional.length > 2) return yield* Effect.fail(new UsageError(`unknown command '${args.positional.join(" ")}'`))
    const ref = args.flags.get("org")
    const organization = typeof ref === "string"
      ? yield* orgs.get(ref)
      : yield* Effect.flatMap(orgs.list, (all) =>
        all.length === 1
          ? Effect.succeed(all[0]!)
          : Effect.fail(new UsageError(`missing --org <org>: there are ${all.length} organizations`)))
    const data = yield* loadCatalogFile(file)
    const decoded = yield* Effect.either(Schema.decodeUnknown(SyncRequest, { errors: "all" })(data))
    if (decoded._tag === "Left") {
      const issues = decodeIssues(decoded.left)
      return invalid(`The catalog is invalid: ${issues.length} ${issues.length === 1 ? "problem" : "problems"}`, issues)
    }
    return yield* syncCatalog(organization.id, decoded.right).pipe(
      Effect.map(({ result }): Output => ({ json: result, text: syncText(organization.slug, result) })),
      Effect.catchTag("InvalidInput", (e: InvalidInput) => Effect.succeed(invalid(e.message, e.issues)))
    )
  })

const command = (args: Parsed): Effect.Effect<Output, Error, Organizations | Catalog> =>
  Effect.gen(function*() {
    const orgs = yield* Organizations
    const [group, action, target] = args.positional
    if (group === "sync") return yield* syncCommand(args)
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
    const failed = output.exitCode !== undefined && output.exitCode !== 0
    const stream = failed && !args.flags.has("json") ? process.stderr : process.stdout
    stream.write((args.flags.has("json") ? JSON.stringify(output.json) : output.text) + "\n")
    return output.exitCode ?? 0
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
