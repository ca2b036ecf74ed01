/**
 * Writes the files derived from the sources of truth: the embedded built-in scenarios, the
 * scenario JSON Schema and the OpenAPI document. `test/generated.test.ts` fails when they drift.
 * Run: npm run generate
 */
import { writeFile } from 'node:fs/promises'
import { generatedFiles } from './generated-files.js'

for (const [file, content] of Object.entries(await generatedFiles())) {
  await writeFile(file, content)
  console.log(`wrote ${file}`)
}
