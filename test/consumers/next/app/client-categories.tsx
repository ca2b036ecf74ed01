'use client'
// Client side: the browser's fetch, answered by the petstore in msw's Service Worker.
import { useEffect, useState } from 'react'

interface Category {
  id: number
  name: string
}

export function ClientCategories() {
  const [categories, setCategories] = useState<Category[]>()
  useEffect(() => {
    void fetch('https://api.shop.test/v1/categories', { headers: { authorization: 'Bearer t0ken' } })
      .then((response) => response.json() as Promise<Category[]>)
      .then(setCategories)
  }, [])
  return (
    <section aria-label="Fetched in the browser">
      {categories ? (
        <ul>
          {categories.map((category) => (
            <li key={category.id}>{category.name}</li>
          ))}
        </ul>
      ) : (
        <p>Loading…</p>
      )}
    </section>
  )
}
