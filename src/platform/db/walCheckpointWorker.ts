/**
 * A worker thread that copies the SQLite write-ahead log back into the database file (src/platform/db/walCheckpoint.ts
 * says why it is not done on the service's own thread). It opens a connection of its own and runs passive checkpoints,
 * which never wait for, nor block, the service's readers and writer.
 */
import { Database } from "bun:sqlite"

declare const self: Worker

export interface CheckpointerStart {
  readonly filename: string
  readonly intervalMs: number
}

let db: Database | undefined
let timer: ReturnType<typeof setInterval> | undefined

const checkpoint = () => {
  try {
    db?.query("PRAGMA wal_checkpoint(PASSIVE)").get()
  } catch {
    // Busy or briefly locked: the next tick tries again; the service's own backstop bounds the log meanwhile.
  }
}

self.onmessage = (event: MessageEvent<CheckpointerStart | "stop">) => {
  if (event.data === "stop") {
    if (timer !== undefined) clearInterval(timer)
    checkpoint()
    db?.close()
    db = undefined
    self.postMessage("stopped")
    return
  }
  try {
    db = new Database(event.data.filename, { readwrite: true, create: false })
    db.run("PRAGMA busy_timeout = 1000")
  } catch {
    self.postMessage("failed")
    return
  }
  timer = setInterval(checkpoint, event.data.intervalMs)
  self.postMessage("started")
}
