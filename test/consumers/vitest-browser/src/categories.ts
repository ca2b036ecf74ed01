// The app's code: renders the API's categories into an element.
export const API = 'https://api.shop.test/v1'

interface Category {
  id: number
  name: string
}

export async function showCategories(into: HTMLElement): Promise<void> {
  const response = await fetch(`${API}/categories`, { headers: { authorization: 'Bearer t0ken' } })
  if (!response.ok) {
    into.innerHTML = `<p role="alert">The shop answered ${response.status}</p>`
    return
  }
  const categories = (await response.json()) as Category[]
  into.innerHTML = categories.length === 0 ? '<p>No categories yet</p>' : '<ul></ul>'
  for (const category of categories) {
    const item = document.createElement('li')
    item.textContent = category.name
    into.querySelector('ul')!.append(item)
  }
}
