import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CustomerRef, Email, Metadata, NonEmptyString } from "./common.ts"
import { BadRequestError, ConflictError, NotFoundError } from "./errors.ts"
import { Authentication } from "./security.ts"

const EntityName = Schema.propertySignature(NonEmptyString.pipe(Schema.maxLength(256))).annotations({
  description: "The caller's own identifier of the seat or member"
})

/** Spec 4.8, decisions.md §6. */
export const AddEntity = Schema.Struct({
  customer: CustomerRef,
  feature: NonEmptyString,
  entity: EntityName,
  name: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(256)), { exact: true }),
  email: Schema.optionalWith(Email, { exact: true }),
  metadata: Schema.optionalWith(Metadata, { exact: true })
}).annotations({ identifier: "AddEntity", parseOptions: { errors: "all" } })
export type AddEntity = typeof AddEntity.Type

export const EntityAdded = Schema.Struct({
  success: Schema.Boolean,
  entityId: Schema.String.annotations({ description: "The entity, as named by the caller (`entity`)" }),
  featureId: Schema.String,
  count: Schema.Number.annotations({ description: "Active plus pending-removal entities" }),
  limit: Schema.NullOr(Schema.Number).annotations({ description: "null when unlimited" }),
  remaining: Schema.NullOr(Schema.Number).annotations({ description: "limit − count; null when unlimited" }),
  restored: Schema.Boolean.annotations({ description: "True when a pending-removal entity was restored" })
}).annotations({ identifier: "EntityAdded" })
export type EntityAdded = typeof EntityAdded.Type

/** Spec 4.9. */
export const RemoveEntity = Schema.Struct({
  customer: CustomerRef,
  feature: NonEmptyString,
  entity: EntityName
}).annotations({ identifier: "RemoveEntity", parseOptions: { errors: "all" } })
export type RemoveEntity = typeof RemoveEntity.Type

export const EntityRemoved = Schema.Struct({
  success: Schema.Boolean,
  entityId: Schema.String,
  count: Schema.Number.annotations({ description: "Still includes the removed entity until the period ends" })
}).annotations({ identifier: "EntityRemoved" })
export type EntityRemoved = typeof EntityRemoved.Type

export class EntitiesGroup extends HttpApiGroup.make("entities")
  .annotate(OpenApi.Description, "Entities counted against a feature (seats, projects)")
  .add(
    HttpApiEndpoint.post("addEntity", "/v1/entities")
      .setPayload(AddEntity)
      .addSuccess(EntityAdded)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Add or restore an entity")
  )
  .add(
    HttpApiEndpoint.post("removeEntity", "/v1/entities/remove")
      .setPayload(RemoveEntity)
      .addSuccess(EntityRemoved)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Remove an entity at period end")
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
