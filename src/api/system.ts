import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { UnavailableError } from "./errors.ts"

export const Health = Schema.Struct({ status: Schema.Literal("ok") }).annotations({ identifier: "Health" })
export const Readiness = Schema.Struct({
  status: Schema.Literal("ready"),
  database: Schema.Literal("postgresql", "sqlite")
}).annotations({ identifier: "Readiness" })

/** Liveness and readiness probes: unauthenticated, outside /v1. */
export class SystemGroup extends HttpApiGroup.make("system")
  .annotate(OpenApi.Description, "Liveness and readiness probes (no key)")
  .add(
    HttpApiEndpoint.get("health", "/health").addSuccess(Health).annotate(OpenApi.Summary, "Liveness: the process is up")
  )
  .add(
    HttpApiEndpoint.get("ready", "/ready")
      .addSuccess(Readiness)
      .addError(UnavailableError)
      .annotate(OpenApi.Summary, "Readiness: the database answers")
  ) {}
