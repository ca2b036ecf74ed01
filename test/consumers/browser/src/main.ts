// The app: lists the API's categories from its own origin (/v1). With ?worker it first starts the
// petstore in a Service Worker (src/mocks.ts); without, the API is whatever answers /v1
// (in the tests, @msw/playwright).
interface Category {
  id: number
  name: string
}

async function enableMocking(): Promise<void> {
  if (!new URLSearchParams(location.search).has('worker')) return
  const { worker } = await import('./mocks.js')
  await worker.start({ onUnhandledRequest: 'bypass', quiet: true })
}

async function render(): Promise<void> {
  const app = document.getElementById('app')!
  const response = await fetch('/v1/categories', { headers: { authorization: 'Bearer t0ken' } })
  const categories = (await response.json()) as Category[]
  app.innerHTML = categories.length === 0 ? '<p>No categories yet</p>' : '<ul></ul>'
  for (const category of categories) {
    const item = document.createElement('li')
    item.textContent = category.name
    app.querySelector('ul')!.append(item)
  }
  document.body.dataset['ready'] = 'true'
}

void enableMocking().then(render)
