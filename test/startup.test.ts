import { expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { BUN, freePort, ROOT } from "./hardening/support.ts"

/**
 * First start on a fresh data directory (sandbox): stdout is the log stream and carries only JSON lines, one of
 * them saying the demo organization was created, never its key; the key is shown once, to a person, on stderr.
 */
test("the demo key goes to stderr once; stdout holds only JSON log lines without it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "startup-"))
  const port = freePort()
  const env: Record<string, string | undefined> = { ...process.env }
  delete env.DATABASE_URL
  const proc = Bun.spawn([BUN, "src/main.ts"], {
    cwd: ROOT,
    env: {
      ...env,
      APP_ENV: "sandbox",
      DATA_DIR: join(dir, "data"),
      PORT: String(port),
      RENEWALS_INTERVAL_SECONDS: "0"
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  try {
    let up = false
    for (let i = 0; i < 150 && !up && proc.exitCode === null; i++) {
      up = await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.ok,
        () => false
      )
      if (!up) await Bun.sleep(100)
    }
    expect(up).toBe(true)
  } finally {
    proc.kill("SIGTERM")
    await proc.exited
  }
  const stdout = await new Response(proc.stdout).text()
  const stderr = await new Response(proc.stderr).text()
  rmSync(dir, { recursive: true, force: true })
  const key = stderr.match(/sk_test_[A-Za-z0-9_-]{32}/)?.[0]
  expect(key).toBeDefined()
  expect(stderr.split(key!).length).toBe(2) // once
  const lines = stdout.split("\n").filter((line) => line !== "")
  for (const line of lines) expect(() => JSON.parse(line)).not.toThrow()
  const messages = lines.map((line) => JSON.parse(line).message)
  expect(messages).toContain("demo organization created")
  expect(messages).toContain("listening")
  expect(stdout).not.toContain("sk_test_")
})
