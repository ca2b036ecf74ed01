// Dredd sends one request per documented response, each as the document's examples make it (the
// create's example body, `petId` 1, the dev key), and checks the answer against that response.
// A real service answers each request one way, so the hooks make the request each response is
// about, and undo two readings of Dredd's own (its OpenAPI 3 support is experimental):
// - 401: the request without its key; 400: a blank name; 404: a pet id the scenario lacks.
// - Other error statuses (409, 410, 413) need a state a test cannot reach in a request (20,000
//   categories, a past sunset, a 1 MiB body): `Prefer: code=<status>` asks the sandbox for that
//   answer, as docs/library.md (Simulating trouble) describes.
// - `default`: Dredd reads it as 200. The document says it covers the simulated faults, so the
//   request asks for one (`Prefer: code=500`) and the expected status becomes 500.
// - Headers: Dredd expects every documented response header, but OpenAPI makes a header optional
//   unless it says `required: true` (`Link` comes only when the scenario names its pages). Only
//   the required ones stay expected.
const hooks = require('hooks')

/** The document's response key ('200', '401', 'default'…) of each transaction, in Dredd's order. */
const responseOf = new WeakMap()
/** The response headers the document marks required, by transaction. */
const requiredHeadersOf = new WeakMap()

hooks.beforeAll(async (transactions, done) => {
  try {
    const document = await (await fetch(process.env.OPENAPI_URL)).json()
    const byOperation = new Map()
    for (const transaction of transactions) {
      const key = `${transaction.request.method} ${transaction.origin.resourceName}`
      byOperation.set(key, [...(byOperation.get(key) ?? []), transaction])
    }
    for (const [key, list] of byOperation) {
      const [method, path] = key.split(' ')
      const responses = document.paths[path][method.toLowerCase()].responses
      const keys = Object.keys(responses)
      if (keys.length !== list.length) throw new Error(`${key}: ${list.length} transactions for ${keys.length} responses`)
      list.forEach((transaction, index) => {
        responseOf.set(transaction, keys[index])
        const headers = Object.entries(responses[keys[index]].headers ?? {})
        requiredHeadersOf.set(transaction, new Set(headers.filter(([, header]) => header.required).map(([name]) => name.toLowerCase())))
      })
    }
    done()
  } catch (error) {
    done(error)
  }
})

hooks.beforeEach((transaction, done) => {
  const response = responseOf.get(transaction)
  const { request, expected } = transaction
  if (response === undefined) {
    transaction.fail = `no documented response matches ${transaction.name}`
    return done()
  }
  for (const name of Object.keys(expected.headers ?? {})) {
    if (name.toLowerCase() !== 'content-type' && !requiredHeadersOf.get(transaction).has(name.toLowerCase())) delete expected.headers[name]
  }
  if (response === 'default') {
    expected.statusCode = '500'
    request.headers['Prefer'] = 'code=500'
  } else if (response === '401') {
    delete request.headers['Authorization']
  } else if (response === '400') {
    request.body = JSON.stringify({ name: ' ' })
  } else if (response === '404') {
    const unknown = (uri) => uri.replace(/\/\d+$/, '/999999')
    request.uri = unknown(request.uri)
    transaction.fullPath = unknown(transaction.fullPath)
  } else if (!response.startsWith('2')) {
    request.headers['Prefer'] = `code=${response}`
  }
  done()
})
