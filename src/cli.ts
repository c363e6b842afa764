import { BunRuntime } from "@effect/platform-bun"
import { Effect, Exit } from "effect"
import { main } from "./cli/main.ts"

// The command's own exit code (0 done, 1 failed, 2 usage) is the process's; an interrupt (Ctrl-C) ends it like any Effect program.
BunRuntime.runMain(
  Effect.promise(() => main(process.argv.slice(2))),
  {
    disableErrorReporting: true,
    teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? Number(exit.value) : 1)
  }
)
