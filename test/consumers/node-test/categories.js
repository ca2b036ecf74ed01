// The app's code under test: a small client of the shop's API.
export const API = 'https://api.shop.test/v1'
const headers = { authorization: 'Bearer t0ken', 'content-type': 'application/json' }

/** @returns {Promise<string[]>} the names of the shop's categories */
export async function categoryNames() {
  const response = await fetch(`${API}/categories`, { headers })
  if (!response.ok) throw new Error(`listing categories answered ${response.status}`)
  /** @type {{ id: number, name: string }[]} */
  const categories = await response.json()
  return categories.map((category) => category.name)
}

/** @param {string} name */
export async function addCategory(name) {
  const response = await fetch(`${API}/categories`, { method: 'POST', headers, body: JSON.stringify({ name }) })
  /** @type {{ id: number, name: string } & { message?: string }} */
  const body = await response.json()
  if (!response.ok) throw new Error(body.message ?? `adding a category answered ${response.status}`)
  return body
}
