/**
 * `GET /pets/{petId}`: behaviour not published, so it serves the scenario's pets by integer id.
 * The operation is deprecated: every authenticated answer says so, and says when it ends.
 */
import { contractOf } from '../contract/operations.js'
import { DEFAULT_DEPRECATED_AT } from '../contract/scenario-format.js'
import { failure, json, type Operation } from './operation.js'

export const getPetById: Operation = {
  ...contractOf('getPetById'),
  headers(tenant) {
    const deprecation = tenant.scenario.deprecation
    const deprecatedAt = Date.parse(deprecation?.deprecatedAt ?? DEFAULT_DEPRECATED_AT)
    // RFC 9745: a structured-field date, seconds since the epoch.
    const headers: Record<string, string> = { deprecation: `@${Math.floor(deprecatedAt / 1000)}` }
    if (deprecation?.sunset !== undefined) headers['sunset'] = new Date(deprecation.sunset).toUTCString()
    const links: string[] = []
    // @note `href` percent-encodes what could end the <…> or the header (`>`, spaces, line breaks).
    if (deprecation?.link !== undefined) links.push(`<${new URL(deprecation.link).href}>; rel="deprecation"; type="text/html"`)
    if (deprecation?.sunsetLink !== undefined) links.push(`<${new URL(deprecation.sunsetLink).href}>; rel="sunset"; type="text/html"`)
    if (links.length > 0) headers['link'] = links.join(', ')
    return headers
  },
  async run({ params, tenant }) {
    if (tenant.afterSunset) {
      return failure('gone', { operation: `${getPetById.method} ${getPetById.path}`, sunset: tenant.sunset ?? 'an earlier date' })
    }
    const raw = String(params['petId'] ?? '')
    const id = /^\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN
    const pet = Number.isSafeInteger(id) ? tenant.findPet(id) : undefined
    return pet ? json(200, pet) : failure('not_found', { what: `Pet ${JSON.stringify(raw)}` })
  },
}
