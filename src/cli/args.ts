import { Effect } from "effect"
import type { Issue } from "../api/errors.ts"

export class UsageError extends Error {}

export interface Parsed {
  readonly positional: ReadonlyArray<string>
  readonly flags: ReadonlyMap<string, string | true>
}

export const parse = (argv: ReadonlyArray<string>): Parsed => {
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

/**
 * Each command returns what to print: a JSON value and its text rendering. A non-zero `exitCode` (invalid
 * input) prints the JSON on stdout with --json, else the text on stderr.
 */
export type Output = { readonly json: unknown; readonly text: string; readonly exitCode?: number }

export const invalid = (message: string, details: ReadonlyArray<Issue>): Output => ({
  json: { success: false, code: "invalid_request", message, details },
  text: [message, ...details.map((d) => (d.path === "" ? d.message : `${d.path}: ${d.message}`))].join("\n"),
  exitCode: 1
})

/** A required positional argument, or a usage error naming it. */
export const need = (value: string | undefined, what: string) =>
  value === undefined ? Effect.fail(new UsageError(`missing ${what}`)) : Effect.succeed(value)

export const flag = (args: Parsed, name: string): string | undefined => {
  const value = args.flags.get(name)
  return typeof value === "string" ? value : undefined
}
