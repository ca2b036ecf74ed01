/**
 * The server's request ids (`X-Request-Id`): v4 UUIDs as flat strings (a journal keeps 1,000 a
 * tenant; Node's own `randomUUID` builds a rope of ~450 bytes), drawn from `node:crypto` rather
 * than the global `crypto`, which a test running the server in-process may stub.
 */
import { randomFillSync } from 'node:crypto'
import { uuidMaker } from '../core/random-uuid.js'

export const newRequestId: () => string = uuidMaker((bytes) => {
  randomFillSync(bytes)
})
