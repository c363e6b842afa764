import { OpenApi } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { BillingApi } from "../src/api/Api.ts"

/**
 * The README's "Typed clients" blocks, type-checked as another project would: against clients generated from the
 * served document by openapi-typescript and @hey-api/openapi-ts with their default flags, and against this
 * project's own client imported as `billing-service/client` (package.json "exports", dist/client built by
 * scripts/build-client.mjs) with a consumer's plain strict settings: no `.ts`-extension imports.
 */
const ROOT = resolve(import.meta.dir, "..")
const BIN = join(ROOT, "node_modules/.bin")

/** The README's blocks, by the name in the `<!-- checked: name -->` comment before each. */
export const readmeBlocks = (): Map<string, string> => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8")
  const blocks = new Map<string, string>()
  for (const match of readme.matchAll(/<!-- checked: (.+?) -->\n```ts\n([\s\S]*?)```/g))
    blocks.set(match[1]!, match[2]!)
  return blocks
}

/** Whether dist/client is missing or older than a source of src/api. */
const stale = () => {
  const built = join(ROOT, "dist/client/index.d.ts")
  if (!existsSync(built)) return true
  const since = statSync(built).mtimeMs
  const sources = [
    join(ROOT, "tsconfig.client.json"),
    ...readdirSync(join(ROOT, "src/api")).map((f) => join(ROOT, "src/api", f))
  ]
  return sources.some((file) => statSync(file).mtimeMs > since)
}

const run = async (cmd: Array<string>, cwd: string) => {
  const proc = Bun.spawn(cmd, {
    cwd,
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_UPDATE_NOTIFIER: "1" }
  })
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  return { code: await proc.exited, output: out + err }
}

describe("clients generated from the document type-check the README's calls", () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "generated-clients-"))
  })
  afterAll(() => (process.env.KEEP ? console.log(dir) : rmSync(dir, { recursive: true, force: true })))

  test("openapi-typescript, @hey-api/openapi-ts and billing-service/client", async () => {
    const blocks = readmeBlocks()
    expect([...blocks.keys()].sort()).toEqual([
      "@hey-api/openapi-ts",
      "billing-service/client",
      "billing-service/client (Effect)",
      "openapi-typescript"
    ])
    writeFileSync(join(dir, "openapi.json"), JSON.stringify(OpenApi.fromApi(BillingApi)))
    // The consumer: its own package.json and tsconfig; this repository installed as billing-service (a link, as
    // `npm install <path>` makes), with the dependencies the client needs beside it.
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }))
    mkdirSync(join(dir, "node_modules/@effect"), { recursive: true })
    symlinkSync(ROOT, join(dir, "node_modules/billing-service"))
    symlinkSync(join(ROOT, "node_modules/effect"), join(dir, "node_modules/effect"))
    symlinkSync(join(ROOT, "node_modules/@effect/platform"), join(dir, "node_modules/@effect/platform"))
    const [ots, hey, build] = await Promise.all([
      run([join(BIN, "openapi-typescript"), "openapi.json", "-o", "billing-api.d.ts"], dir),
      run([join(BIN, "openapi-ts"), "-i", "openapi.json", "-o", "billing-sdk"], dir),
      // `npm install` builds dist/client (`prepare`); again only when a source of src/api is newer.
      stale() ? run(["node", "scripts/build-client.mjs"], ROOT) : Promise.resolve({ code: 0, output: "" })
    ])
    expect({ tool: "openapi-typescript", ...ots }).toMatchObject({ code: 0 })
    expect({ tool: "@hey-api/openapi-ts", ...hey }).toMatchObject({ code: 0 })
    expect({ tool: "build-client", ...build }).toMatchObject({ code: 0 })

    const files: Record<string, string> = {
      "openapi-typescript": "calls-openapi-typescript.ts",
      "@hey-api/openapi-ts": "calls-hey-api.ts",
      "billing-service/client": "calls-client.ts",
      "billing-service/client (Effect)": "calls-client-effect.ts",
      refused: "calls-refused.ts"
    }
    for (const [name, code] of blocks) writeFileSync(join(dir, files[name]!), code + "\nexport {}\n")
    // The check can fail: each client refuses a call without a required field (else "unused @ts-expect-error").
    writeFileSync(
      join(dir, files.refused!),
      [
        `import type { components } from "./billing-api"`,
        `import { entitlementsCheck } from "./billing-sdk"`,
        `import { createBillingClient } from "billing-service/client"`,
        `// @ts-expect-error: no feature`,
        `export const check: components["schemas"]["CheckRequest"] = { customer: "x" }`,
        `// @ts-expect-error: no feature`,
        `export const sent = entitlementsCheck({ body: { customer: "x" } })`,
        `const billing = createBillingClient({ baseUrl: "http://localhost:3000" })`,
        `// @ts-expect-error: no feature`,
        `export const checked = billing.entitlements.check({ payload: { customer: "x" } })`,
        `// @ts-expect-error: not a meter type`,
        `export const synced = billing.catalog.sync({ payload: { features: [{ slug: "a", name: "A", type: "metered", meterType: "gauge" }], plans: [] } })`
      ].join("\n") + "\n"
    )
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "ESNext",
          moduleResolution: "bundler",
          lib: ["ES2022", "DOM", "DOM.Iterable"],
          types: [],
          strict: true,
          skipLibCheck: true,
          noEmit: true
        },
        files: Object.values(files)
      })
    )
    const tsc = await run(["node", join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "."], dir)
    expect(tsc.output).toBe("")
    expect(tsc.code).toBe(0)
  }, 60_000)
})
