import { main } from "../../src/cli/main.ts"

export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * The management CLI run in this process, as `npm run cli -- <args>` would run it with `env` as its environment:
 * the same parsing, commands and exit codes, without the cost of starting a process per call.
 */
export const runCli = async (
  env: Readonly<Record<string, string | undefined>>,
  ...args: Array<string>
): Promise<CliResult> => {
  let stdout = ""
  let stderr = ""
  const code = await main(args, {
    env,
    stdout: (text) => {
      stdout += text
    },
    stderr: (text) => {
      stderr += text
    }
  })
  return { code, stdout, stderr }
}
