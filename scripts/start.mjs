// `npm start`: builds dist/ first when src/ changed since the last build (a checkout someone
// edits), then runs the CLI in this same process. One Node start instead of two (a `prestart`
// script was one more process before the CLI's own), so `npm start` costs what the CLI costs plus
// npm's own start. Arguments go to the CLI: `npm start -- --port 4011` runs `serve --port 4011`.
import { buildIfStale } from './build.mjs'

await buildIfStale()
await import('../dist/cli.js')
