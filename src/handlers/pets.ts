/**
 * `GET /pets/{petId}`: behaviour not published, so it serves the scenario's pets by integer id.
 * The operation is deprecated: every authenticated answer says so, and says when it ends.
 */
import { failure, json, type Operation } from './operation.js'

export const getPetById: Operation = {
  id: 'getPetById',
  method: 'GET',
  path: '/pets/:petId',
  successStatus: 200,
  errorStatuses: [404, 410],
  hasBody: false,
  headers(tenant) {
    const headers: Record<string, string> = { deprecation: 'true' }
    if (tenant.sunset !== undefined) headers['sunset'] = new Date(tenant.sunset).toUTCString()
    return headers
  },
  async run({ params, tenant }) {
    if (tenant.afterSunset) {
      return failure('gone', { operation: 'GET /pets/{petId}', sunset: tenant.sunset ?? 'an earlier date' })
    }
    const raw = String(params['petId'] ?? '')
    const id = /^\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN
    const pet = Number.isSafeInteger(id) ? tenant.findPet(id) : undefined
    return pet ? json(200, pet) : failure('not_found', { what: `Pet ${JSON.stringify(raw)}` })
  },
}
