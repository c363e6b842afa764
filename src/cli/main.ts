import { Cause, ConfigProvider, Effect, Exit, Layer, Logger, LogLevel, ManagedRuntime, Option } from "effect"
import { existsSync } from "node:fs"
import { join, resolve } from "node:path"
import type { Issue } from "../api/errors.ts"
import { ServicesLive } from "../app/App.ts"
import { AppConfig, AppConfigLive } from "../platform/config.ts"
import { checkFlags, CommandError, type FlagSpec, type Output, parse, type Parsed, UsageError } from "./args.ts"
import { billingProfileCommand, PROFILE_FLAGS } from "./billingProfile.ts"
import { dashboardCommand } from "./dashboard.ts"
import { portalCommand } from "./portal.ts"
import { encryptionKeyCommand } from "./encryptionKey.ts"
import { organizationCommand } from "./organizations.ts"
import { outOfRangeCommand } from "./outOfRange.ts"
import { paymentsCommand } from "./payments.ts"
import { sampleCommand } from "./sample.ts"
import { syncCommand } from "./sync.ts"

const USAGE = `Usage: npm run --silent cli -- <command> [--json]

Commands:
  org create <slug> [--name <name>]   create an organization and its first API key
  org list                            list organizations
  key create <org>                    create another API key for an organization (id or slug)
  key list <org>                      list an organization's keys (never the secrets)
  key revoke <key-id>                 revoke a key at once
  provider set <org> <paystack|stripe> --secret-key <key> [--webhook-secret <whsec>] [--base-url <url>]
                                      store a provider account (encrypted); the secrets may come from
                                      PROVIDER_SECRET_KEY / PROVIDER_WEBHOOK_SECRET instead of flags
  provider list <org>                 list an organization's provider accounts (never the secrets)
  provider remove <org> <provider>    forget a provider account
  credits grant <org> <customer> <credit-system> <amount> [--bonus]
                                      add purchased (or, with --bonus, bonus) credits to a customer
  sync <file> [--org <org>]           sync the catalog in <file> (JSON, or a .ts/.js module whose default or
                                      \`catalog\` export is the catalog) into an organization (id or slug);
                                      --org may be omitted when there is exactly one organization
  profile get <org>                   show the organization's billing profile (the seller on its invoices)
  profile set <org> [--legal-name <name>] [--email <email>] [--tax-id <id>] [--invoice-prefix <A-Z0-9>]
              [--footer <text>] [--line1 <l>] [--line2 <l>] [--city <c>] [--postal-code <p>] [--state <s>]
              [--country <alpha-2>]   change it; address flags replace the whole address (--country required)
  dashboard <org>                     print a one-time sign-in link to the dashboard (10 minutes, once);
                                      the host is PUBLIC_URL (default http://localhost:$PORT)
  portal <org> <customer> [--return-url <url>]
                                      print a one-time link to the customer portal of one customer (1 hour,
                                      once), as POST /v1/portal/sessions answers it
  sample-data <org> [--customers 200] [--events 5000]
                                      fill a sandbox organization with a sample catalog, customers, paid plans
                                      and 30 days of usage (through the API), for the dashboard to show
  encryption-key rotate               re-encrypt every stored secret under NEW_ENCRYPTION_KEY (from the
                                      environment) in one transaction; stop the services first
  out-of-range                        list stored numbers outside their bounds (values from before the bounds;
                                      the service reads each as its bound): organization, table, row, field

Options:
  --json                              print one JSON object instead of text; an error is then one
                                      {"error", "code", "message"[, "details"]} object on stderr
  --help, -h                          this text
Flags are only those listed for each command; \`--\` ends them. Exit codes: 0 done, 1 refused or failed, 2 usage.
The database is the service's own: DATABASE_URL (PostgreSQL) or DATA_DIR (SQLite, default ./data).
`

/** Each command: the positional words naming it, the flags it takes and what runs it. */
const COMMANDS: ReadonlyArray<{
  readonly name: string
  readonly flags: FlagSpec
  /** Whether it may create the database (else it refuses a SQLite database that does not exist). */
  readonly creates?: boolean
  readonly run: (args: Parsed) => Effect.Effect<Output, unknown, unknown>
}> = [
  { name: "org create", flags: { value: ["name"] }, creates: true, run: organizationCommand },
  { name: "org list", flags: {}, run: organizationCommand },
  { name: "key create", flags: {}, run: organizationCommand },
  { name: "key list", flags: {}, run: organizationCommand },
  { name: "key revoke", flags: {}, run: organizationCommand },
  { name: "provider set", flags: { value: ["secret-key", "webhook-secret", "base-url"] }, run: paymentsCommand },
  { name: "provider list", flags: {}, run: paymentsCommand },
  { name: "provider remove", flags: {}, run: paymentsCommand },
  { name: "credits grant", flags: { boolean: ["bonus"] }, run: paymentsCommand },
  { name: "sync", flags: { value: ["org"] }, run: syncCommand },
  { name: "out-of-range", flags: {}, run: outOfRangeCommand },
  { name: "encryption-key rotate", flags: {}, run: encryptionKeyCommand },
  { name: "profile get", flags: {}, run: billingProfileCommand },
  { name: "profile set", flags: { value: PROFILE_FLAGS }, run: billingProfileCommand },
  { name: "dashboard", flags: {}, run: dashboardCommand },
  { name: "portal", flags: { value: ["return-url"] }, run: portalCommand },
  { name: "sample-data", flags: { value: ["customers", "events"] }, run: sampleCommand }
]

/** Every flag of every command: what the parser needs to tell a flag's value from a positional argument. */
const ALL_FLAGS: FlagSpec = {
  boolean: COMMANDS.flatMap((c) => c.flags.boolean ?? []),
  value: COMMANDS.flatMap((c) => c.flags.value ?? [])
}

const commandOf = (positional: ReadonlyArray<string>) => {
  const found = COMMANDS.find((c) => c.name.split(" ").every((word, i) => positional[i] === word))
  if (found === undefined)
    throw new UsageError(positional.length === 0 ? "no command given" : `unknown command '${positional.join(" ")}'`)
  return found
}

/** The title of the `error` field for a code, as the API's error body has it (decisions.md §10). */
const titleOf = (code: string) =>
  code === "usage"
    ? "Usage Error"
    : code === "invalid_request"
      ? "Bad Request"
      : code.endsWith("not_found") || code === "provider_not_supported"
        ? "Not Found"
        : code.endsWith("_exists") || ["customer_ambiguous", "customer_conflict", "limit_exceeded"].includes(code)
          ? "Conflict"
          : code === "unavailable"
            ? "Service Unavailable"
            : "Error"

/** A failure as `{code, message, details?}`: domain errors keep their codes; anything else is `internal_error`. */
const describe = (error: unknown): { code: string; message: string; details?: ReadonlyArray<Issue> } => {
  if (error instanceof CommandError)
    return { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) }
  const tagged = error as { _tag?: unknown; code?: unknown; message?: unknown; issues?: unknown }
  const message = typeof tagged?.message === "string" ? tagged.message : String(error)
  if (tagged?._tag === "InvalidInput")
    return { code: "invalid_request", message, details: tagged.issues as ReadonlyArray<Issue> }
  if (typeof tagged?.code === "string") return { code: tagged.code, message }
  return { code: "internal_error", message }
}

/** Where the CLI writes, and the environment it reads (the process's own unless given: tests run it in process). */
export interface CliIo {
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
}

const processIo: CliIo = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text)
}

/** Configuration from `env` when given, else from the process's environment. */
const configFrom = (env: CliIo["env"]) =>
  env === undefined
    ? AppConfigLive
    : AppConfigLive.pipe(
        Layer.provide(
          Layer.setConfigProvider(
            ConfigProvider.fromMap(
              new Map(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined))
            )
          )
        )
      )

/** Runs one command; resolves to the exit code (0 done, 1 refused or failed, 2 usage). */
export const main = async (argv: ReadonlyArray<string>, io: CliIo = processIo): Promise<number> => {
  const json = argv.includes("--json")
  /** One rule for every command: with --json the error is one JSON object on stderr, else text on stderr. */
  const fail = (exit: 1 | 2, failure: { code: string; message: string; details?: ReadonlyArray<Issue> }) => {
    if (json) io.stderr(JSON.stringify({ error: titleOf(failure.code), ...failure }) + "\n")
    else if (exit === 2) io.stderr(`${failure.message}\n\n${USAGE}`)
    else
      io.stderr(
        [
          `error: ${failure.message}`,
          ...(failure.details ?? []).map((d) => `  ${d.path === "" ? d.message : `${d.path}: ${d.message}`}`)
        ].join("\n") + "\n"
      )
    return exit
  }
  let args: Parsed
  let cmd: (typeof COMMANDS)[number]
  try {
    args = parse([...argv], ALL_FLAGS)
    if (args.flags.has("help")) {
      io.stdout(USAGE)
      return 0
    }
    cmd = commandOf(args.positional)
    checkFlags(args, cmd.flags, cmd.name)
  } catch (error) {
    if (error instanceof UsageError) return fail(2, { code: "usage", message: error.message })
    throw error
  }
  // Only `org create` (and the service) may create the database: a mistyped DATA_DIR must not answer from a fresh,
  // empty one (nor create an encryption key beside it).
  const env = io.env ?? process.env
  if (cmd.creates !== true && (env.DATABASE_URL ?? "") === "") {
    const dataDir = env.DATA_DIR ?? "./data"
    const file = join(dataDir, "billing.db")
    if (dataDir !== ":memory:" && !existsSync(file)) {
      return fail(1, {
        code: "database_not_found",
        message: `no database at ${resolve(file)} (DATA_DIR=${dataDir}); check DATA_DIR or DATABASE_URL, or create one with 'org create'`
      })
    }
  }
  // The migrations' logs stay off stdout, which holds the command's one answer (`--json`): what migration 0010 would
  // report there, `out-of-range` lists.
  const config = Layer.effect(
    AppConfig,
    Effect.map(AppConfig, (c) => ({ ...c, logLevel: "none" }))
  ).pipe(Layer.provide(configFrom(io.env)))
  const layer = ServicesLive.pipe(Layer.provideMerge(config), Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))
  const runtime = ManagedRuntime.make(layer)
  try {
    const exit = await runtime.runPromiseExit(cmd.run(args) as Effect.Effect<Output, unknown, never>)
    if (Exit.isSuccess(exit)) {
      io.stdout((json ? JSON.stringify(exit.value.json) : exit.value.text) + "\n")
      return 0
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) {
      if (failure.value instanceof UsageError) return fail(2, { code: "usage", message: failure.value.message })
      return fail(1, describe(failure.value))
    }
    // A defect: the start-up refused (the encryption key's refusal carries its code) or something broke.
    return fail(1, describe(Cause.squash(exit.cause)))
  } catch (error) {
    return fail(1, describe(error))
  } finally {
    await runtime.dispose()
  }
}
