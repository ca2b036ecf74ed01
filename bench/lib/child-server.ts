/** Starts a bench server in a process of its own (so the load generator never shares its core) and stops it. */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export interface ChildServer {
  readonly origin: string
  /** The child's process id, for reading its memory. */
  readonly pid: number
  stop(): Promise<void>
}

/** Runs `bench/servers/<file>` with tsx and waits for the port it prints. */
export async function startChildServer(file: string, args: readonly string[] = []): Promise<ChildServer> {
  const entry = fileURLToPath(new URL(`../servers/${file}`, import.meta.url))
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`${file} ${args.join(' ')} exited with ${code} before listening`)))
    child.stdout!.once('data', (data: Buffer) => resolve(Number(String(data).trim())))
  })
  return {
    origin: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    },
  }
}
