import { Effect, ParseResult, Schema } from "effect"
import { readFile } from "node:fs/promises"
import { extname, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { SyncRequest, type SyncResult } from "../api/catalog.ts"
import { type Catalog, syncCatalog } from "../catalog/Catalog.ts"
import type { InvalidInput } from "../domain/errors.ts"
import { readableIssues } from "../boundary/issues.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { CommandError, invalid, type Output, type Parsed, UsageError } from "./args.ts"

/** Decode problems as the API's 400 lists them: one line per problem. */
const decodeIssues = (error: ParseResult.ParseError) =>
  readableIssues(ParseResult.ArrayFormatter.formatErrorSync(error))

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
    catch: (error) => new CommandError("invalid_request", error instanceof Error ? error.message : String(error))
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
    changeLine("tax rates", r.taxRates),
    changeLine("coupons", r.coupons),
    changeLine("promotion codes", r.promotionCodes),
    ...(r.warnings.length === 0 ? [] : ["Warnings:", ...r.warnings.map((w) => `  - ${w}`)])
  ].join("\n")

export const syncCommand = (args: Parsed): Effect.Effect<Output, unknown, Organizations | Catalog> =>
  Effect.gen(function* () {
    const orgs = yield* Organizations
    const file = args.positional[1]
    if (file === undefined) return yield* Effect.fail(new UsageError("missing <file>"))
    if (args.positional.length > 2)
      return yield* Effect.fail(new UsageError(`unknown command '${args.positional.join(" ")}'`))
    const ref = args.flags.get("org")
    const organization =
      typeof ref === "string"
        ? yield* orgs.get(ref)
        : yield* Effect.flatMap(orgs.list, (all) =>
            all.length === 1
              ? Effect.succeed(all[0]!)
              : Effect.fail(new UsageError(`missing --org <org>: there are ${all.length} organizations`))
          )
    const data = yield* loadCatalogFile(file)
    const decoded = yield* Effect.either(Schema.decodeUnknown(SyncRequest, { errors: "all" })(data))
    if (decoded._tag === "Left") {
      const issues = decodeIssues(decoded.left)
      return yield* invalid(
        `The catalog is invalid: ${issues.length} ${issues.length === 1 ? "problem" : "problems"}`,
        issues
      )
    }
    return yield* syncCatalog(organization.id, decoded.right).pipe(
      Effect.map(({ result }): Output => ({ json: result, text: syncText(organization.slug, result) })),
      Effect.catchTag("InvalidInput", (e: InvalidInput) => invalid(e.message, e.issues))
    )
  })
