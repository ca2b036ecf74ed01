// The app's component: lists the API's categories and adds one through a form.
import { useEffect, useState, type FormEvent } from 'react'

export const API = 'https://api.shop.test/v1'
const headers = { authorization: 'Bearer t0ken', 'content-type': 'application/json' }

interface Category {
  id: number
  name: string
}

export function Categories() {
  const [categories, setCategories] = useState<Category[] | undefined>()
  const [error, setError] = useState('')
  const [name, setName] = useState('')

  useEffect(() => {
    void fetch(`${API}/categories`, { headers })
      .then((response) => response.json() as Promise<Category[]>)
      .then(setCategories)
  }, [])

  async function add(event: FormEvent) {
    event.preventDefault()
    const response = await fetch(`${API}/categories`, { method: 'POST', headers, body: JSON.stringify({ name }) })
    const body = (await response.json()) as Category & { message?: string }
    if (response.ok) setCategories((list) => [...(list ?? []), body])
    else setError(body.message ?? 'failed')
  }

  if (!categories) return <p>Loading…</p>
  return (
    <form onSubmit={(event) => void add(event)}>
      {categories.length === 0 ? <p>No categories yet</p> : null}
      <ul>
        {categories.map((category) => (
          <li key={category.id}>{category.name}</li>
        ))}
      </ul>
      <label>
        Name <input value={name} onChange={(event) => setName(event.target.value)} />
      </label>
      <button type="submit">Add</button>
      {error ? <p role="alert">{error}</p> : null}
    </form>
  )
}
