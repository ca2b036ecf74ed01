// The app under test, as small as an app gets: it loads the categories, retries a failure once,
// and says what the user sees.
export async function showCategories(): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const response = await fetch('https://api.shop.test/v1/categories', { headers: { authorization: 'Bearer t0ken' } })
    if (response.ok) return ((await response.json()) as { name: string }[]).map((category) => category.name).join(', ')
    if (attempt === 2) return response.status === 401 ? 'Sign in again' : 'Something went wrong'
  }
}
