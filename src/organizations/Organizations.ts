import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { AppConfig } from "../platform/config.ts"
import { randomToken, sha256Hex } from "../platform/crypto.ts"
import { Ids } from "../platform/ids.ts"
import { type ApiKeyRecord, type OrganizationRecord, OrganizationsRepo } from "./OrganizationsRepo.ts"

export class OrganizationError extends Schema.TaggedError<OrganizationError>()("OrganizationError", {
  /** decisions.md §10's codes where one applies; the CLI prints it with --json. */
  code: Schema.Literal("organization_not_found", "not_found", "invalid_request", "organization_exists"),
  message: Schema.String
}) {}

export const SLUG_PATTERN = /^[a-z0-9][a-z0-9-]{1,62}$/

/** Slugs that would collide with fixed path segments (`/webhooks/sandbox/{provider}`). */
const RESERVED_SLUGS = new Set(["sandbox", "webhooks", "v1", "api"])

export const keyPrefix = (environment: string) => (environment === "live" ? "sk_live_" : "sk_test_")

export interface CreatedKey {
  readonly key: ApiKeyRecord
  /** The secret itself: shown once, never stored. */
  readonly apiKey: string
}

/** Management of organizations and keys: used by the CLI and by the start-up demo seed. */
export interface OrganizationsShape {
  readonly create: (slug: string, name?: string) => Effect.Effect<OrganizationRecord, OrganizationError>
  readonly list: Effect.Effect<ReadonlyArray<OrganizationRecord>>
  readonly get: (ref: string) => Effect.Effect<OrganizationRecord, OrganizationError>
  readonly createKey: (ref: string) => Effect.Effect<CreatedKey, OrganizationError>
  readonly revokeKey: (keyId: string) => Effect.Effect<ApiKeyRecord, OrganizationError>
  readonly listKeys: (ref: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, OrganizationError>
  /** On a fresh sandbox database: a `demo` organization and its key (printed once by the caller). */
  readonly seedDemo: Effect.Effect<
    Option.Option<{ readonly organization: OrganizationRecord; readonly apiKey: string }>
  >
}

export class Organizations extends Context.Tag("Organizations")<Organizations, OrganizationsShape>() {}

export const OrganizationsLive = Layer.effect(
  Organizations,
  Effect.gen(function* () {
    const repo = yield* OrganizationsRepo
    const ids = yield* Ids
    const config = yield* AppConfig

    const get = (ref: string) =>
      repo.findByIdOrSlug(ref).pipe(
        Effect.flatMap(
          Option.match({
            onNone: () =>
              Effect.fail(
                new OrganizationError({ code: "organization_not_found", message: `No organization '${ref}'` })
              ),
            onSome: Effect.succeed
          })
        )
      )

    const create = (slug: string, name?: string) =>
      Effect.gen(function* () {
        if (!SLUG_PATTERN.test(slug)) {
          return yield* new OrganizationError({
            code: "invalid_request",
            message: "The slug must be 2-63 characters of a-z, 0-9 and '-', starting with a letter or digit"
          })
        }
        if (RESERVED_SLUGS.has(slug))
          return yield* new OrganizationError({ code: "invalid_request", message: `The slug '${slug}' is reserved` })
        const now = yield* Clock.currentTimeMillis
        const org: OrganizationRecord = {
          id: yield* ids.next("org"),
          slug,
          name: name ?? slug,
          createdAt: now,
          updatedAt: now
        }
        const inserted = yield* repo.insert(org)
        if (!inserted)
          return yield* new OrganizationError({ code: "organization_exists", message: `The slug '${slug}' is taken` })
        return org
      })

    const createKey = (ref: string) =>
      Effect.gen(function* () {
        const org = yield* get(ref)
        const apiKey = keyPrefix(config.appEnv) + randomToken(24)
        const key: ApiKeyRecord = {
          id: yield* ids.next("key"),
          organizationId: org.id,
          displayPrefix: apiKey.slice(0, 12),
          environment: config.appEnv,
          createdAt: yield* Clock.currentTimeMillis,
          revokedAt: null
        }
        yield* repo.insertKey({ ...key, keyHash: sha256Hex(apiKey) })
        return { key, apiKey }
      })

    const revokeKey = (keyId: string) =>
      Effect.gen(function* () {
        const key = yield* repo.findKey(keyId).pipe(
          Effect.flatMap(
            Option.match({
              onNone: () => Effect.fail(new OrganizationError({ code: "not_found", message: `No API key '${keyId}'` })),
              onSome: Effect.succeed
            })
          )
        )
        const at = yield* Clock.currentTimeMillis
        yield* repo.revokeKey(key.organizationId, key.id, at)
        return { ...key, revokedAt: key.revokedAt ?? at }
      })

    const seedDemo = Effect.gen(function* () {
      if (config.appEnv !== "sandbox" || (yield* repo.count) > 0) return Option.none()
      const organization = yield* create("demo", "Demo")
      const { apiKey } = yield* createKey(organization.id)
      return Option.some({ organization, apiKey })
    }).pipe(Effect.catchTag("OrganizationError", () => Effect.succeed(Option.none())))

    return {
      create,
      list: repo.list,
      get,
      createKey,
      revokeKey,
      listKeys: (ref) => Effect.flatMap(get(ref), (org) => repo.listKeys(org.id)),
      seedDemo
    }
  })
)
