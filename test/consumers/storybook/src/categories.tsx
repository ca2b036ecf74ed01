// The component under design: lists the API's categories (its own origin, /v1).
import { useEffect, useState } from 'react'

interface Category {
  id: number
  name: string
}

export function Categories() {
  const [categories, setCategories] = useState<Category[] | undefined>()
  const [error, setError] = useState('')
  useEffect(() => {
    void fetch('/v1/categories', { headers: { authorization: 'Bearer t0ken' } }).then(async (response) => {
      if (response.ok) setCategories((await response.json()) as Category[])
      else setError(`${response.status}`)
    })
  }, [])
  if (error) return <p role="alert">Error {error}</p>
  if (!categories) return <p>Loading…</p>
  if (categories.length === 0) return <p>No categories yet</p>
  return (
    <ul>
      {categories.map((category) => (
        <li key={category.id}>{category.name}</li>
      ))}
    </ul>
  )
}
