import { describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/**
 * The files of src/entitlements/ import each other one way (scripts/file-cycles.mjs, run by CI too): a newcomer can
 * read them bottom up. The check itself must see a cycle made of type imports only.
 */
const run = (folder: string) => {
  const proc = Bun.spawnSync(["node", "scripts/file-cycles.mjs", folder], { cwd: join(import.meta.dir, "..") })
  return { code: proc.exitCode, out: proc.stdout.toString() }
}

describe("imports inside src/entitlements", () => {
  test("no file imports one that leads back to it, type imports included", () => {
    const { code, out } = run("src/entitlements")
    expect(out).toContain("no file cycles")
    expect(code).toBe(0)
  })

  test("the check finds a cycle of type imports and of a type re-export", () => {
    const dir = mkdtempSync(join(tmpdir(), "file-cycles-"))
    try {
      writeFileSync(join(dir, "a.ts"), 'import type { B } from "./b.ts"\nexport type A = B\n')
      writeFileSync(join(dir, "b.ts"), 'export type { C as B } from "./c.ts"\n')
      writeFileSync(join(dir, "c.ts"), 'export type C = import("./a.ts").A | 1\n')
      writeFileSync(join(dir, "d.ts"), 'import {\n  type A\n} from "./a.ts"\nexport const d: A | 2 = 2\n')
      const { code, out } = run(dir)
      expect(code).toBe(1)
      expect(out).toContain("a.ts, b.ts, c.ts")
      expect(out).not.toContain("d.ts")
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
