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
    const [cache] = yield* sql<{ cacheSize: number }>`PRAGMA cache_size`
    const [temp] = yield* sql<{ tempStore: number }>`PRAGMA temp_store`
    return {
      journal: journal!.journalMode,
      synchronous: sync!.synchronous,
      cacheKib: -cache!.cacheSize,
      tempStore: temp!.tempStore
    }
  })
  return Effect.runPromise(Effect.scoped(Effect.provide(program, layer)))
}

test("a file database syncs its log at every commit (FULL), as durable as PostgreSQL's default", async () => {
  // SQLite's codes: 1 = NORMAL, 2 = FULL; a temp_store of 2 = MEMORY (statement journals never spill to a file).
  expect(await settingsWith({}, "default")).toEqual({
    journal: "wal",
    synchronous: 2,
    cacheKib: 64 * 1024,
    tempStore: 2
  })
})

test("SQLITE_SYNCHRONOUS=normal syncs only at checkpoints; anything else is refused at start-up", async () => {
  expect(await settingsWith({ SQLITE_SYNCHRONOUS: "normal" }, "normal")).toEqual({
    journal: "wal",
    synchronous: 1,
    cacheKib: 64 * 1024,
    tempStore: 2
  })
  expect(
    await settingsWith({ SQLITE_SYNCHRONOUS: "off" }, "off").then(
      () => "started",
      () => "refused"
    )
  ).toBe("refused")
})

test("SQLITE_CACHE_MB sizes the page cache (64 MiB by default); out of 1–4096 is refused at start-up", async () => {
  expect((await settingsWith({ SQLITE_CACHE_MB: "8" }, "cache-8")).cacheKib).toBe(8 * 1024)
  for (const [value, name] of [
    ["0", "cache-0"],
    ["4097", "cache-big"],
    ["lots", "cache-text"]
  ] as const) {
    expect(
      await settingsWith({ SQLITE_CACHE_MB: value }, name).then(
        () => "started",
        () => "refused"
      )
    ).toBe("refused")
  }
})
