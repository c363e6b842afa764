import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { cli, freePort, type Service, startService } from "./support.ts"

/**
 * Database outage (issue 6), PostgreSQL only: the service runs as a subprocess; PostgreSQL is stopped under it
 * (`pg_ctl stop -m fast`), requests answer 503 `unavailable` instead of hanging, `/ready` says so, and when
 * PostgreSQL is back the same process serves again, with nothing of the outage's requests applied.
 *
 * The PostgreSQL stopped is a private cluster this test creates (initdb into a temporary directory, on a free port,
 * with the binaries of DATABASE_URL's installation), never the shared server: other test files, other people's
 * runs and CI's other suites keep their database while this one goes down, so the file may run at any point of
 * the suite, concurrently with anything.
 */
const serverUrl = process.env.DATABASE_URL?.trim()

/** The newest installed PostgreSQL's binaries (Debian layout), or pg_config's. */
const postgresBin = (): string => {
  const root = "/usr/lib/postgresql"
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, "bin", "pg_ctl")))
      .sort((a, b) => Number(b) - Number(a))
    if (versions.length > 0) return join(root, versions[0]!, "bin")
  }
  const config = Bun.spawnSync(["pg_config", "--bindir"])
  if (config.exitCode === 0) return config.stdout.toString().trim()
  throw new Error("no PostgreSQL binaries (initdb, pg_ctl) found")
}

/** PostgreSQL refuses to run as root: as root (CI), its commands run as the `postgres` user. */
const asPostgres = (command: Array<string>) =>
  process.getuid?.() === 0 ? ["runuser", "-u", "postgres", "--", ...command] : command

const run = (command: Array<string>) => {
  const result = Bun.spawnSync(command, { stdout: "pipe", stderr: "pipe" })
  if (result.exitCode !== 0) {
    throw new Error(`${command.join(" ")} failed: ${result.stdout.toString()}${result.stderr.toString()}`)
  }
}

const makeCluster = () => {
  const bin = postgresBin()
  const dir = mkdtempSync(join(tmpdir(), "billing-outage-"))
  if (process.getuid?.() === 0) run(["chown", "-R", "postgres:postgres", dir])
  const data = join(dir, "data")
  const port = freePort()
  run(asPostgres([join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]))
  const pgCtl = (...args: Array<string>) => run(asPostgres([join(bin, "pg_ctl"), "-D", data, ...args]))
  let up = false
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start: () => {
      pgCtl(
        "-o",
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
        "-l",
        join(dir, "log"),
        "-w",
        "-t",
        "60",
        "start"
      )
      up = true
    },
    stop: () => {
      pgCtl("-m", "fast", "-w", "-t", "60", "stop")
      up = false
    },
    isUp: () => up,
    remove: () => rmSync(dir, { recursive: true, force: true })
  }
}

if (serverUrl) {
  describe("database outage on postgresql", () => {
    let cluster: ReturnType<typeof makeCluster>
    let service: Service | undefined
    let env: Record<string, string>
    let apiKey = ""

    beforeAll(async () => {
      cluster = makeCluster()
      cluster.start()
      env = {
        DATABASE_URL: cluster.url,
        ENCRYPTION_KEY: randomBytes(32).toString("hex"),
        LOG_LEVEL: "error",
        // The service's own bound on any request; the pool's connect timeout is below it.
        REQUEST_TIMEOUT_MS: "4000"
      }
      apiKey = JSON.parse(await cli(env, "org", "create", "outage", "--json")).apiKey
    }, 60_000)

    afterAll(async () => {
      try {
        if (service !== undefined && service.process.exitCode === null) await service.kill("SIGKILL")
      } finally {
        try {
          if (cluster?.isUp()) cluster.stop()
        } finally {
          cluster?.remove()
        }
      }
    })

    /** A request with a hang detector: no answer within 20 s fails the test (the service's bound is 4 s). */
    const request = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const response = await fetch(service!.baseUrl + path, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(20_000)
      })
      return { status: response.status, body: (await response.json()) as any }
    }

    const unavailable = { success: false, error: "Service Unavailable", code: "unavailable" }

    test("while PostgreSQL is down: 503 unavailable, /ready too; back up: the same process serves again", async () => {
      service = await startService(env)
      const pid = service.process.pid
      expect(
        (
          await request("POST", "/v1/sync", {
            features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
            plans: [{ slug: "free", name: "Free", autoEnable: true, features: [{ slug: "tokens", limit: 1000 }] }]
          })
        ).status
      ).toBe(200)
      expect((await request("POST", "/v1/customers", { id: "ada", email: "ada@example.com" })).status).toBe(200)
      expect((await request("POST", "/v1/track", { customer: "ada", feature: "tokens", value: 5 })).body.allowed).toBe(
        true
      )
      expect(await request("GET", "/ready")).toEqual({ status: 200, body: { status: "ready", database: "postgresql" } })

      // Load running across the stop: every answer is a 200 or a 503, never a 500 or a hang.
      const statuses = new Map<number, number>()
      let next = 0
      let loading = true
      const track = (n: number) =>
        request(
          "POST",
          "/v1/track",
          { customer: "ada", feature: "tokens", value: 1 },
          { "idempotency-key": `outage-${n}` }
        )
      const load = Promise.all(
        Array.from({ length: 4 }, async () => {
          while (loading) {
            const n = next++
            statuses.set(n, (await track(n)).status)
          }
        })
      )
      while ([...statuses.values()].filter((s) => s === 200).length < 40) await Bun.sleep(5)

      cluster.stop()
      try {
        while (![...statuses.values()].includes(503)) await Bun.sleep(5)
        // Twice round: the pool's idle connections die with the server first, then new ones are refused.
        for (let round = 0; round < 2; round++) {
          const answers = {
            ready: await request("GET", "/ready"),
            list: await request("GET", "/v1/customers"),
            get: await request("GET", "/v1/customers/ada"),
            track: await request("POST", "/v1/track", { customer: "ada", feature: "tokens", value: 7 }),
            check: await request("POST", "/v1/check", { customer: "ada", feature: "tokens" }),
            create: await request("POST", "/v1/customers", { id: "bob", email: "bob@example.com" })
          }
          for (const [name, answer] of Object.entries(answers)) {
            expect({ round, name, status: answer.status, body: answer.body }).toMatchObject({
              round,
              name,
              status: 503,
              body: unavailable
            })
          }
        }
      } finally {
        loading = false
        await load.catch(() => undefined)
        cluster.start()
      }
      await load
      expect(new Set(statuses.values())).toEqual(new Set([200, 503]))

      // Back: the same process recovers by itself (bounded wait for the pool to reconnect).
      let ready = 0
      for (let i = 0; i < 100 && ready !== 200; i++) {
        ready = (await request("GET", "/ready")).status
        if (ready !== 200) await Bun.sleep(100)
      }
      expect(ready).toBe(200)
      expect(service.process.pid).toBe(pid)
      expect(service.process.exitCode).toBeNull()
      const list = await request("GET", "/v1/customers")
      expect(list.status).toBe(200)
      // Nothing of the outage's refused requests was applied: no bob; the load's 503s are retried under their
      // keys, and then usage is exactly 5 + one per load request, each applied once.
      expect(list.body.data.map((c: any) => c.externalId)).toEqual(["ada"])
      for (const [n, status] of statuses) {
        if (status !== 200) expect({ n, status: (await track(n)).status }).toEqual({ n, status: 200 })
      }
      const check = await request("POST", "/v1/check", { customer: "ada", feature: "tokens", value: 0 })
      expect(check.body).toMatchObject({ allowed: true, usage: 5 + statuses.size })
      expect((await request("POST", "/v1/track", { customer: "ada", feature: "tokens", value: 2 })).body).toMatchObject(
        {
          allowed: true,
          usage: 7 + statuses.size
        }
      )
      await service.kill("SIGTERM")
    }, 90_000)
  })
}
