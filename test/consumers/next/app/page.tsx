// Server side: the page's own fetch goes to the standalone sandbox, whose URL the environment gives
// (PETSTORE_API_URL, for example http://127.0.0.1:4010/v1 from `petstore-sandbox serve`).
import { ClientCategories } from './client-categories'
import { PetstoreMocks } from './petstore-mocks'

export const dynamic = 'force-dynamic' // read the API on every request, not at build time

interface Category {
  id: number
  name: string
}

export default async function Home() {
  const response = await fetch(`${process.env.PETSTORE_API_URL}/categories`, {
    headers: { authorization: `Bearer ${process.env.PETSTORE_API_KEY}` },
    cache: 'no-store',
  })
  const categories = (await response.json()) as Category[]
  return (
    <main>
      <section aria-label="Rendered on the server">
        {categories.length === 0 ? <p>No categories yet</p> : null}
        <ul>
          {categories.map((category) => (
            <li key={category.id}>{category.name}</li>
          ))}
        </ul>
      </section>
      <PetstoreMocks>
        <ClientCategories />
      </PetstoreMocks>
    </main>
  )
}
