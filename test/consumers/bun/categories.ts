// The app's code under test: a small client of the shop's API.
export const API = 'https://api.shop.test/v1'
const headers = { authorization: 'Bearer t0ken', 'content-type': 'application/json' }

export async function categoryNames(): Promise<string[]> {
  const response = await fetch(`${API}/categories`, { headers })
  if (!response.ok) throw new Error(`listing categories answered ${response.status}`)
  const categories = (await response.json()) as { id: number; name: string }[]
  return categories.map((category) => category.name)
}

export async function addCategory(name: string): Promise<{ id: number; name: string }> {
  const response = await fetch(`${API}/categories`, { method: 'POST', headers, body: JSON.stringify({ name }) })
  const body = (await response.json()) as { id: number; name: string; message?: string }
  if (!response.ok) throw new Error(body.message ?? `adding a category answered ${response.status}`)
  return body
}
