import { Effect, Layer, Logger, LogLevel } from "effect"
import { AppConfig } from "./config.ts"

const levels: Record<string, LogLevel.LogLevel> = {
  all: LogLevel.All,
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
}

export const parseLogLevel = (value: string): LogLevel.LogLevel => levels[value.toLowerCase()] ?? LogLevel.Info

/** Structured JSON logs on stdout, at LOG_LEVEL. */
export const LoggingLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => Layer.merge(Logger.json, Logger.minimumLogLevel(parseLogLevel(config.logLevel))))
)

/** One JSON line in the same shape as Effect's JSON logger, for code that runs outside a fiber. */
export const writeLogLine = (
  minimum: LogLevel.LogLevel,
  level: LogLevel.LogLevel,
  message: string,
  annotations: Record<string, unknown>
) => {
  if (LogLevel.lessThan(level, minimum)) return
  process.stdout.write(
    JSON.stringify({ message, logLevel: level.label, timestamp: new Date().toISOString(), annotations }) + "\n"
  )
}
