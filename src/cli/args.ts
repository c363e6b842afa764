import { Effect } from "effect"
import type { Issue } from "../api/errors.ts"

/** Wrong use of the CLI (exit 2, with the usage text). */
export class UsageError extends Error {}

/** A refused command (exit 1): `code` as decisions.md §10 names it where one applies. */
export class CommandError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details?: ReadonlyArray<Issue>
  ) {
    super(message)
  }
}

export interface Parsed {
  readonly positional: ReadonlyArray<string>
  readonly flags: ReadonlyMap<string, string | true>
}

/**
 * The flags each command accepts, beside the global `--json` and `--help`: a boolean flag is present or not and
 * takes no value; a value flag takes the next argument (or `--name=value`). Anything else is a usage error.
 */
export interface FlagSpec {
  readonly boolean?: ReadonlyArray<string>
  readonly value?: ReadonlyArray<string>
}

export const GLOBAL_FLAGS: FlagSpec = { boolean: ["json", "help"] }

const looksLikeFlag = (arg: string) => arg.startsWith("-") && arg.length > 1 && !/^-\d/.test(arg)

/**
 * Parses `argv` knowing every command's flags (`known`): a boolean flag takes no value; a value flag takes the next
 * argument (or `--name=value`). `--` ends the flags; `-h` is `--help`. Unknown flags are usage errors; whether the
 * command given accepts each flag is `checkFlags`'s question.
 */
export const parse = (argv: ReadonlyArray<string>, known: FlagSpec): Parsed => {
  const positional: Array<string> = []
  const flags = new Map<string, string | true>()
  const isBoolean = (name: string) => GLOBAL_FLAGS.boolean!.includes(name) || known.boolean?.includes(name) === true
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === "--") {
      positional.push(...argv.slice(i + 1))
      break
    }
    if (arg === "-h") {
      flags.set("help", true)
      continue
    }
    if (!arg.startsWith("--") || arg.length === 2) {
      if (looksLikeFlag(arg)) throw new UsageError(`unknown option '${arg}'`)
      positional.push(arg)
      continue
    }
    const eq = arg.indexOf("=")
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq)
    const inline = eq === -1 ? undefined : arg.slice(eq + 1)
    if (isBoolean(name)) {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`)
      flags.set(name, true)
    } else if (known.value?.includes(name)) {
      const next = argv[i + 1]
      const value = inline ?? (next !== undefined && !looksLikeFlag(next) ? next : undefined)
      if (value === undefined) throw new UsageError(`--${name} needs a value`)
      if (inline === undefined) i++
      flags.set(name, value)
    } else throw new UsageError(`unknown option '--${name}'`)
  }
  return { positional, flags }
}

/** Refuses a flag the command does not take (a usage error). */
export const checkFlags = (args: Parsed, spec: FlagSpec, command: string) => {
  for (const name of args.flags.keys()) {
    const allowed =
      GLOBAL_FLAGS.boolean!.includes(name) || spec.boolean?.includes(name) === true || spec.value?.includes(name)
    if (!allowed) throw new UsageError(`${command} takes no option --${name}`)
  }
}

/**
 * Each command returns what to print: a JSON value and its text rendering. A refusal is a `CommandError` (or a
 * domain error) failing the effect instead.
 */
export type Output = { readonly json: unknown; readonly text: string }

export const invalid = (message: string, details: ReadonlyArray<Issue>) =>
  Effect.fail(new CommandError("invalid_request", message, details))

/** A required positional argument, or a usage error naming it. */
export const need = (value: string | undefined, what: string) =>
  value === undefined ? Effect.fail(new UsageError(`missing ${what}`)) : Effect.succeed(value)

export const flag = (args: Parsed, name: string): string | undefined => {
  const value = args.flags.get(name)
  return typeof value === "string" ? value : undefined
}
