import { SqlClient } from "@effect/sql"
import { afterAll, expect, test } from "bun:test"
import { ConfigProvider, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AppConfigTest } from "../config.ts"
import { DatabaseLive } from "./Database.ts"

const dir = mkdtempSync(join(tmpdir(), "billing-sync-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** The journal and sync settings of a file database opened as the service opens it, with `env` as its environment. */
const settingsWith = (env: Record<string, string>, name: string) => {
  const layer = DatabaseLive.pipe(
    Layer.provide(AppConfigTest({ dataDir: join(dir, name) })),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )
  const program = Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [journal] = yield* sql<{ journalMode: string }>`PRAGMA journal_mode`
    const [sync] = yield* sql<{ synchronous: number }>`PRAGMA synchronous`
    return { journal: journal!.journalMode, synchronous: sync!.synchronous }
  })
  return Effect.runPromise(Effect.scoped(Effect.provide(program, layer)))
}

test("a file database syncs its log at every commit (FULL), as durable as PostgreSQL's default", async () => {
  // SQLite's codes: 1 = NORMAL, 2 = FULL.
  expect(await settingsWith({}, "default")).toEqual({ journal: "wal", synchronous: 2 })
})

test("SQLITE_SYNCHRONOUS=normal syncs only at checkpoints; anything else is refused at start-up", async () => {
  expect(await settingsWith({ SQLITE_SYNCHRONOUS: "normal" }, "normal")).toEqual({ journal: "wal", synchronous: 1 })
  expect(
    await settingsWith({ SQLITE_SYNCHRONOUS: "off" }, "off").then(
      () => "started",
      () => "refused"
    )
  ).toBe("refused")
})
