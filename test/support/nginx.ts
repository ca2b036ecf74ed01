/**
 * A real nginx in front of sandbox replicas: a generated config in a temporary directory
 * (`daemon off`, pid, logs and temp paths inside it), plain round-robin over the upstreams with
 * no affinity, on a free loopback port. Stopped by the test that started it.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { onTestFinished } from 'vitest'
import { freePort } from './redis-server.js'

/** Where Debian installs nginx. */
export const NGINX = existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx'

export interface Nginx {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  /** nginx's error log so far (why it answered a 502, say). */
  errorLog(): string
}

/** Starts nginx balancing round-robin over `upstreams` (`127.0.0.1:port`) and waits until it answers. */
export async function startNginx(upstreams: readonly number[]): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-nginx-'))
  const port = await freePort()
  // @note Run as root, nginx's workers would switch to nobody and lose access to the 0700 temp dir.
  const user = process.getuid?.() === 0 ? 'user root;' : ''
  const config = `
${user}
worker_processes 1;
daemon off;
master_process on;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  # Round-robin (nginx's default), no ip_hash, no sticky cookie: any replica may serve any request.
  upstream sandbox {
${upstreams.map((upstream) => `    server 127.0.0.1:${upstream};`).join('\n')}
    keepalive 64;
    # Below the replicas' own idle timeout (Node's 5 s), as docs/replicas.md says: else nginx may reuse
    # a connection the replica is closing, and a POST on it is answered 502 (seen once in CI).
    keepalive_timeout 4s;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://sandbox;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
    }
  }
}
`
  writeFileSync(join(dir, 'nginx.conf'), config)
  const child = spawn(NGINX, ['-c', join(dir, 'nginx.conf'), '-p', dir, '-e', join(dir, 'error.log')], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }
    rmSync(dir, { recursive: true, force: true })
  })
  const origin = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}: ${stderr}`)
    try {
      await fetch(`${origin}/__sandbox/health`)
      break
    } catch {
      if (Date.now() > deadline) throw new Error(`nginx did not answer within 10 s: ${stderr}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  return {
    origin,
    errorLog: () => {
      try {
        return readFileSync(join(dir, 'error.log'), 'utf8')
      } catch {
        return ''
      }
    },
  }
}
