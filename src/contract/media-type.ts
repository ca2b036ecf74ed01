/** The media types the interface's bodies are sent in: JSON, as requests, answers and the conformance check read it. */

/** `application/json`, with or without parameters, and any `application/*+json`. */
export function isJsonMediaType(contentType: string | null): boolean {
  if (contentType === null) return false
  if (contentType === 'application/json') return true
  const essence = contentType.split(';', 1)[0]!.trim().toLowerCase()
  return essence === 'application/json' || /^application\/[\w.!#$&^+-]+\+json$/.test(essence)
}
