import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { ServicesLive } from "../app/App.ts"
import { AppConfig, AppConfigLive } from "../platform/config.ts"
import { type Output, parse, type Parsed, UsageError } from "./args.ts"
import { dashboardCommand } from "./dashboard.ts"
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
  dashboard <org>                     print a one-time sign-in link to the dashboard (10 minutes, once);
                                      the host is PUBLIC_URL (default http://localhost:$PORT)
  sample-data <org> [--customers 200] [--events 5000]
                                      fill a sandbox organization with a sample catalog, customers, paid plans
                                      and 30 days of usage (through the API), for the dashboard to show
  out-of-range                        list stored numbers outside their bounds (values from before the bounds;
                                      the service reads each as its bound): organization, table, row, field

Options:
  --json                              print one JSON object instead of text
The database is the service's own: DATABASE_URL (PostgreSQL) or DATA_DIR (SQLite, default ./data).
`

const command = (args: Parsed) => {
  const group = args.positional[0]
  if (group === "sync") return syncCommand(args)
  if (group === "out-of-range") return outOfRangeCommand(args)
  if (group === "dashboard") return dashboardCommand(args)
  if (group === "sample-data") return sampleCommand(args)
  if (group === "provider" || group === "credits") return paymentsCommand(args)
  if (group === "org" || group === "key") return organizationCommand(args)
  return Effect.fail(
    new UsageError(group === undefined ? "no command given" : `unknown command '${args.positional.join(" ")}'`)
  )
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

/** Runs one command; resolves to the exit code (0 done, 1 failed, 2 usage). */
export const main = async (argv: ReadonlyArray<string>, io: CliIo = processIo): Promise<number> => {
  let args: Parsed
  try {
    args = parse([...argv])
  } catch (error) {
    io.stderr(`${(error as Error).message}\n\n${USAGE}`)
    return 2
  }
  if (args.flags.has("help") || args.flags.has("h")) {
    io.stdout(USAGE)
    return 0
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
    const output: Output = await runtime.runPromise(command(args) as Effect.Effect<Output, Error, never>)
    const failed = output.exitCode !== undefined && output.exitCode !== 0
    const write = failed && !args.flags.has("json") ? io.stderr : io.stdout
    write((args.flags.has("json") ? JSON.stringify(output.json) : output.text) + "\n")
    return output.exitCode ?? 0
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    if (error instanceof UsageError || message.startsWith("missing") || message.startsWith("unknown command")) {
      io.stderr(`${message}\n\n${USAGE}`)
      return 2
    }
    io.stderr(`error: ${message}\n`)
    return 1
  } finally {
    await runtime.dispose()
  }
}
