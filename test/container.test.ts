import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { freePort } from "./hardening/support.ts"

/**
 * The image without Docker (no daemon, no base image here): its /app assembled by the Dockerfile's own recipe
 * (scripts/build-image-fs.sh, which the Dockerfile RUNs) into a temporary root, then the service started from it as
 * the Dockerfile's unprivileged user (uid 10001, through `setpriv`), with the Dockerfile's WORKDIR, ENV, CMD and
 * HEALTHCHECK read from the Dockerfile itself: the documented `docker run` (sandbox, no ENCRYPTION_KEY) must come
 * up, write only its data directory and answer its health check without Node.
 *
 * It installs the production dependencies from npm (about 20 s with a warm cache), so it runs when
 * CONTAINER_TEST=1 (CI's "container" step), not in every `bun test`.
 */
const ROOT = resolve(import.meta.dir, "..")
const enabled = process.env.CONTAINER_TEST === "1"

const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8")
/** The final stage: everything after the last FROM. */
const finalStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "))
const instruction = (name: string) =>
  finalStage
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .filter((line) => line.startsWith(`${name} `))
    .map((line) => line.slice(name.length + 1).trim())

describe.skipIf(!enabled)("the container image, assembled by the Dockerfile's recipe, run as its user", () => {
  let root: string
  let app: string
  const uid = Number(/--uid (\d+)/.exec(finalStage)?.[1])
  const asUser = (command: Array<string>) => [
    "setpriv",
    `--reuid=${uid}`,
    `--regid=${uid}`,
    "--clear-groups",
    ...command
  ]
  /** A path of the image, in the temporary root. */
  const inRoot = (path: string) => (path.startsWith("/app") ? join(root, path) : path)
  let env: Record<string, string>

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "image-"))
    chmodSync(root, 0o755) // the runtime user must reach /app, as in an image
    const build = Bun.spawn(["sh", "scripts/build-image-fs.sh", ".", root, `${uid}:${uid}`], {
      cwd: ROOT,
      stdout: "pipe",
      stderr: "pipe"
    })
    const [code, err] = await Promise.all([build.exited, new Response(build.stderr).text()])
    if (code !== 0) throw new Error(`build-image-fs.sh failed:\n${err}`)
    app = join(root, "app")
    // The Dockerfile's ENV, its paths in the temporary root.
    env = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }
    for (const line of instruction("ENV"))
      for (const [, key, value] of line.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S+)/g)) env[key!] = inRoot(value!)
  }, 180_000)
  afterAll(() => {
    if (root !== undefined) rmSync(root, { recursive: true, force: true })
  })

  test("the final stage has no Node; /app is root's, /app/data the user's (0700) and a volume", () => {
    expect(finalStage).toMatch(/^\s*FROM debian:/)
    expect(finalStage).not.toMatch(/\bnode\b(?!_modules)/)
    expect(uid).toBeGreaterThan(0)
    expect(instruction("USER")).toEqual(["billing"])
    expect(instruction("VOLUME")).toEqual(["/app/data"])
    expect(env.DATA_DIR).toBe(join(app, "data"))
    expect(statSync(app).uid).toBe(0)
    expect(statSync(join(app, "src/main.ts")).uid).toBe(0)
    const data = statSync(join(app, "data"))
    expect({ uid: data.uid, mode: data.mode & 0o777 }).toEqual({ uid, mode: 0o700 })
  })

  test("the image renders invoice documents: PDFKit and the fonts are in it (Ọlájídé, Müller, 山田)", async () => {
    const bun = inRoot(JSON.parse(instruction("CMD").at(-1)!)[0])
    const document = {
      title: "Invoice",
      number: "INV-000001",
      statusLabel: "Open",
      createdAt: 0,
      seller: { name: "Ọlájídé Ventures Ltd", lines: [] },
      buyerHeading: "BILL TO",
      buyer: { name: "Müller 山田", lines: [] },
      facts: [],
      lines: [],
      totals: [],
      notes: [],
      footer: null
    }
    const script = `import { renderPdf } from "./src/billing/documents/pdf.ts"
      process.stdout.write(await renderPdf(${JSON.stringify(document)}))`
    const render = Bun.spawn(asUser([bun, "-e", script]), { cwd: app, env, stdout: "pipe", stderr: "pipe" })
    const pdf = new Uint8Array(await new Response(render.stdout).arrayBuffer())
    expect({ code: await render.exited, stderr: await new Response(render.stderr).text() }).toEqual({
      code: 0,
      stderr: ""
    })
    const text = Bun.spawn(["pdftotext", "-", "-"], { stdin: pdf, stdout: "pipe" })
    const extracted = await new Response(text.stdout).text()
    expect(extracted).toContain("Ọlájídé Ventures Ltd")
    expect(extracted).toContain("Müller 山田")
    // Only the two weights the documents use are left of the font packages.
    const fonts = Bun.spawn(["sh", "-c", "find node_modules/@expo-google-fonts -name '*.ttf' | sort"], {
      cwd: app,
      stdout: "pipe"
    })
    expect((await new Response(fonts.stdout).text()).trim().split("\n")).toEqual([
      "node_modules/@expo-google-fonts/noto-sans-jp/400Regular/NotoSansJP_400Regular.ttf",
      "node_modules/@expo-google-fonts/noto-sans-jp/700Bold/NotoSansJP_700Bold.ttf",
      "node_modules/@expo-google-fonts/noto-sans/400Regular/NotoSans_400Regular.ttf",
      "node_modules/@expo-google-fonts/noto-sans/700Bold/NotoSans_700Bold.ttf"
    ])
  }, 60_000)

  test("the documented docker run (sandbox, no ENCRYPTION_KEY) comes up as the user and passes its health check", async () => {
    const port = String(freePort())
    const cmd = JSON.parse(instruction("CMD").at(-1)!) as Array<string>
    const healthcheck = JSON.parse(/CMD (\[.*\])/.exec(instruction("HEALTHCHECK")[0]!)![1]!) as Array<string>
    const proc = Bun.spawn(asUser(cmd.map(inRoot)), {
      cwd: app,
      env: { ...env, PORT: port },
      stdout: "pipe",
      stderr: "pipe"
    })
    const health = () => Bun.spawn(asUser(healthcheck.map(inRoot)), { cwd: app, env: { ...env, PORT: port } }).exited
    try {
      expect(await health()).toBe(1) // not up yet
      let up = false
      for (let i = 0; i < 150 && !up && proc.exitCode === null; i++) {
        up = await fetch(`http://127.0.0.1:${port}/ready`).then(
          (r) => r.ok,
          () => false
        )
        if (!up) await Bun.sleep(100)
      }
      expect(up).toBe(true)
      expect(await health()).toBe(0)
      // It wrote its database and generated key in its data directory, and cannot write anywhere else in /app.
      expect(statSync(join(app, "data/billing.db")).uid).toBe(uid)
      const write = await Bun.spawn(asUser(["sh", "-c", "echo x > src/x"]), { cwd: app, stderr: "pipe" }).exited
      expect(write).not.toBe(0)
      expect(existsSync(join(app, "src/x"))).toBe(false)
    } finally {
      proc.kill("SIGTERM")
    }
    expect(await proc.exited).toBe(0)
    const stdout = await new Response(proc.stdout).text()
    const stderr = await new Response(proc.stderr).text()
    expect(stderr).toMatch(/sk_test_/)
    for (const line of stdout.split("\n").filter((l) => l !== "")) expect(() => JSON.parse(line)).not.toThrow()
  }, 60_000)
})
