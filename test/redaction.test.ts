/** The journal's redaction rule: which header and query parameter values a reader never sees. */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { DEFAULT_REDACTION, Redaction } from '../src/core/redaction.js'

describe('journal redaction', () => {
  it.each([
    'content-type', 'content-length', 'accept', 'accept-encoding', 'accept-language', 'user-agent', 'host', 'origin', 'prefer',
    'x-request-id', 'x-correlation-id', 'traceparent', 'tracestate', 'idempotency-key', 'cache-control', 'connection', 'keep-alive',
    'if-none-match', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'sec-fetch-mode', 'expect', 'range', 'x-signal', 'accept-patch',
  ])('keeps the harmless header %s readable', (name) => {
    expect(DEFAULT_REDACTION.headerValue(name, 'value')).toBe('value')
  })

  it.each([
    // issue 20 F13, as found
    'apikey', 'x-goog-api-key', 'x-amz-security-token', 'ocp-apim-subscription-key', 'private-token', 'x-vault-token', 'x-forwarded-authorization', 'x-csrf-token',
    // the pattern's words, in names no list holds
    'X-Session-Id', 'stripe-signature', 'x-hub-signature-256', 'x-hasura-admin-secret', 'x-user-password', 'x-shopify-hmac-sha256', 'x-client-credential',
    // what issue 20's attack found the rule missed
    'x-bearer', 'x-passcode', 'x-client-cert', 'x-sig', 'ssl-client-cert',
  ])('redacts the credential header %s (issue 20 F13)', (name) => {
    expect(DEFAULT_REDACTION.headerValue(name, 'SECRET')).toBe('[redacted]')
  })

  it.each([
    { name: 'the finding’s parameters', url: 'http://h/v1/categories?api_key=S&access_token=S', kept: 'http://h/v1/categories?api_key=[redacted]&access_token=[redacted]' },
    { name: 'names ignoring case and percent-encoding', url: 'http://h/p?Api%5FKey=S&X-Amz-Signature=S&page=2', kept: 'http://h/p?Api%5FKey=[redacted]&X-Amz-Signature=[redacted]&page=2' },
    { name: 'pattern words', url: 'http://h/p?page_token=S&x+session=S&sort=name', kept: 'http://h/p?page_token=[redacted]&x+session=[redacted]&sort=name' },
    { name: 'a parameter without a value, an empty one and a repeated one', url: 'http://h/p?token&token=&token=S', kept: 'http://h/p?token&token=[redacted]&token=[redacted]' },
    { name: 'a password in the URL', url: 'http://user:pw@h:80/p?a=1', kept: 'http://user:[redacted]@h:80/p?a=1' },
    { name: 'a port without credentials, a fragment', url: 'http://h:8080/p@x?a=1#token=S', kept: 'http://h:8080/p@x?a=1#token=S' },
    { name: 'no query', url: 'http://h/v1/categories', kept: 'http://h/v1/categories' },
  ])('redacts the values of credential query parameters: $name (issue 20 F13)', ({ url, kept }) => {
    expect(DEFAULT_REDACTION.url(url)).toBe(kept)
  })

  it('redacts the query of a Referer header as the URL’s own', () => {
    expect(DEFAULT_REDACTION.headerValue('referer', 'https://app.test/cb?code=1&access_token=S')).toBe('https://app.test/cb?code=1&access_token=[redacted]')
  })

  it.each(['X-Forwarded-Uri', 'X-Original-URI', 'X-Original-Url', 'X-Rewrite-URL', 'X-Envoy-Original-Path'])('redacts the query of the request URI a proxy forwards in %s as the URL’s own (attack64 F2)', (name) => {
    expect(DEFAULT_REDACTION.headerValue(name, '/v1/categories?api_key=S&page=2')).toBe('/v1/categories?api_key=[redacted]&page=2')
  })

  it.each(['X-Forwarded-Uri', 'X-Original-URL', 'X-Envoy-Original-Path', 'Content-Location'])('redacts the query of every URL in %s sent more than once, as Node.js joins them (attack67 F1)', (name) => {
    expect(DEFAULT_REDACTION.headerValue(name, '/a?x=1, /b?access_token=S&page=2, /c?client_secret=C')).toBe('/a?x=1, /b?access_token=[redacted]&page=2, /c?client_secret=[redacted]')
  })

  it.each([
    ['/a?x=1,/b?token=S', '/a?x=1,/b?token=[redacted]'],
    ['/a?x=1,  /b?token=S', '/a?x=1,  /b?token=[redacted]'],
    ['/a?x=1 ,/b?token=S', '/a?x=1 ,/b?token=[redacted]'],
    ['/a?x=1,\t/b?token=S', '/a?x=1,\t/b?token=[redacted]'],
    ['/a?x=1,http://u:S@h/b', '/a?x=1,http://u:[redacted]@h/b'],
    ['http://h/a?x=1,http://u:S@h/b?api_key=K', 'http://h/a?x=1,http://u:[redacted]@h/b?api_key=[redacted]'],
  ])('redacts every URL of a list however its commas are spaced, each kept as sent: %s (attack70 F2)', (value, kept) => {
    expect(DEFAULT_REDACTION.headerValue('x-forwarded-uri', value)).toBe(kept)
    expect(DEFAULT_REDACTION.headerValue('referer', value)).toBe(kept)
  })

  it.each([
    ['/cb?note=a, b&access_token=S', '/cb?note=a, b&access_token=[redacted]'],
    ['/cb?filter=a, b, c&api_key=S, https://h/x?token=T', '/cb?filter=a, b, c&api_key=[redacted], https://h/x?token=[redacted]'],
  ])('keeps one URL whole whose query holds ", ": %s (review53 R3)', (value, kept) => {
    expect(DEFAULT_REDACTION.headerValue('x-original-url', value)).toBe(kept)
  })

  it.each([
    ['http://user:p@ss@host/p', 'http://user:[redacted]@host/p'],
    ['https://u:a@b@c@h:8080/?q=1', 'https://u:[redacted]@h:8080/?q=1'],
    // A userinfo of one part is redacted whole: a token as often as a name (attack73 F1).
    ['http://user@host/p', 'http://[redacted]@host/p'],
    ['http://host/p@q:r', 'http://host/p@q:r'],
    ['http://u:pw@h\\x@y', 'http://u:[redacted]@h\\x@y'],
  ])('redacts the whole password of %s, up to the authority’s last @ (attack67 F1)', (url, kept) => {
    expect(DEFAULT_REDACTION.headerValue('referer', url)).toBe(kept)
    expect(DEFAULT_REDACTION.url(url)).toBe(kept)
  })

  it.each([
    ['//user:S@host/x', '//user:[redacted]@host/x'],
    ['//u:S@h/p?q=1&token=T', '//u:[redacted]@h/p?q=1&token=[redacted]'],
    ['https:\\\\user:S@host/x', 'https:\\\\user:[redacted]@host/x'],
    ['https:/user:S@host/x', 'https:/user:[redacted]@host/x'],
    ['/a?x=1, //user:S@host/x', '/a?x=1, //user:[redacted]@host/x'],
    ['/path/with:colon@at', '/path/with:colon@at'],
  ])('redacts the password of a scheme-relative or loosely slashed URL: %s (attack72 F3)', (url, kept) => {
    expect(DEFAULT_REDACTION.headerValue('referer', url)).toBe(kept)
    expect(DEFAULT_REDACTION.headerValue('x-forwarded-uri', url)).toBe(kept)
  })

  it.each([
    // A URL parser drops tabs and line breaks: each of these is https://u:S@h (journaled as read).
    ['https:\t//u:S@h/x', 'https://u:[redacted]@h/x'],
    ['ht\ttps://u:S@h/x', 'https://u:[redacted]@h/x'],
    ['https:/\t/u:S@h/x', 'https://u:[redacted]@h/x'],
    ['https://u:S\n@h/x', 'https://u:[redacted]@h/x'],
    // Three slashes and no scheme: http://u:S@h to a URL parser.
    ['///u:S@h/x', '///u:[redacted]@h/x'],
    // A token as the user alone.
    ['https://TOKEN@h/x', 'https://[redacted]@h/x'],
    ['//TOKEN@h/x', '//[redacted]@h/x'],
    // No userinfo: as sent, tabs and all.
    ['https:\t//h/x?q=1', 'https:\t//h/x?q=1'],
    ['/path/with:colon@at', '/path/with:colon@at'],
  ])('redacts the userinfo of a URL a parser reads through tabs, three slashes, or a user alone: %s (attack73 F1)', (url, kept) => {
    expect(DEFAULT_REDACTION.headerValue('referer', url)).toBe(kept)
    expect(DEFAULT_REDACTION.headerValue('x-forwarded-uri', url)).toBe(kept)
    // As a URL parser reads what is journaled: no credential left.
    const read = new URL(kept.replace(/^\/+/, 'http://'), 'http://base/')
    expect([read.username, read.password]).not.toContain('S')
    expect([read.username, read.password]).not.toContain('TOKEN')
  })

  it.each([
    ['/cb?paths=/a,/b&access_token=S', '/cb?paths=/a,/b&access_token=[redacted]'],
    ['/cb?paths=/a, /b&api_key=S, /next?token=T', '/cb?paths=/a, /b&api_key=[redacted], /next?token=[redacted]'],
    ['https://x/a, https:/user:S@h/', 'https://x/a, https:/user:[redacted]@h/'],
    ['/a?x=1,\\\\user:S@h/b', '/a?x=1,\\\\user:[redacted]@h/b'],
  ])('redacts a URL whose query holds a comma before a path, and each URL of a list however loosely slashed: %s (review55 R1, R3)', (value, kept) => {
    expect(DEFAULT_REDACTION.headerValue('x-forwarded-uri', value)).toBe(kept)
  })

  it.each([
    ['https://TOKEN:@h/p', 'https://[redacted]:@h/p'],
    ['//TOKEN:@h/p', '//[redacted]:@h/p'],
    ['https:\t//TOKEN:@h', 'https://[redacted]:@h'],
    ['https://sk_test_TOKEN:@api.stripe.com/v1', 'https://[redacted]:@api.stripe.com/v1'],
  ])('redacts the user of a URL whose password is empty, a token as `curl -u <key>:` sends it: %s (attack78 F1)', (url, kept) => {
    expect(DEFAULT_REDACTION.headerValue('referer', url)).toBe(kept)
    expect(DEFAULT_REDACTION.url(url)).toBe(kept)
  })

  it.each([
    ['https://user:p,w:SECRET@host/', 'https://user:[redacted]@host/'],
    ['/cb?access_token=abc,def:SECRET', '/cb?access_token=[redacted]'],
    ['https://TO,KEN:@h/', 'https://[redacted]:@h/'],
    ['https://h/?q, note:x@y.com', 'https://h/?q, note:x@y.com'],
  ])('keeps whole a password or a query value holding a comma before a scheme of no slash, and cuts no list before a scheme that is not special: %s (review57 R1)', (value, kept) => {
    expect(DEFAULT_REDACTION.headerValue('referer', value)).toBe(kept)
    expect(DEFAULT_REDACTION.headerValue('x-forwarded-uri', value)).toBe(kept)
  })

  it.each([
    ['/a, http:user:S@h.test/', '/a, http:user:[redacted]@h.test/'],
    ['https://a.test/x, https:S@h.test/', 'https://a.test/x, https:[redacted]@h.test/'],
    ['/a, ht\ttps://user:S@h.test/', '/a, https://user:[redacted]@h.test/'],
    ['/cb?x=1,\t\thttps:\t//u:S@h/p', '/cb?x=1,\t\thttps://u:[redacted]@h/p'],
    // Not a URL's start to a URL parser: kept as sent.
    ['https://a.test/x?t=1, 2:30', 'https://a.test/x?t=1, 2:30'],
  ])('redacts a later URL of a list with no slash after its scheme, or tabs in it: %s (attack76 F1)', (value, kept) => {
    expect(DEFAULT_REDACTION.headerValue('referer', value)).toBe(kept)
    expect(DEFAULT_REDACTION.headerValue('x-forwarded-uri', value)).toBe(kept)
  })

  it('leaves no credential a URL parser reads in any URL of a list, however its scheme, slashes, tabs and commas come (attack76 F1, attack73 F1)', () => {
    const tabbed = (text: string, tabs: readonly boolean[]) => [...text].map((char, index) => (tabs[index % tabs.length] === true ? `\t${char}` : char)).join('')
    const listed = fc
      .record({
        scheme: fc.constantFrom('http', 'https', 'HTTP', 'Https', 'ws', 'wss', 'ftp'),
        slashes: fc.constantFrom('', '/', '//', '///', '\\\\', '/\\', '\\'),
        user: fc.option(fc.stringMatching(/^[a-z0-9_]{1,8}$/), { nil: undefined }),
        // A secret may hold a comma before what reads as a scheme (review57 R1).
        secret: fc.constantFrom('SECRET', 'QQX,ZZW', 'QQX,ZZW:JJY', 'QQX,http:JJY', 'QQX, https:JJY'),
        emptyPassword: fc.boolean(),
        tabs: fc.option(fc.array(fc.boolean(), { minLength: 1, maxLength: 12 }), { nil: undefined }),
        first: fc.constantFrom('/a', 'https://a.test/x', '/cb?x=1', 'http://a.test/', '/cb?paths=/a,/b'),
        separator: fc.constantFrom(', ', ',', ' , ', '\t,\t', ',\t'),
        header: fc.constantFrom('referer', 'x-forwarded-uri', 'x-original-url', 'content-location'),
      })
      .map(({ scheme, slashes, user, emptyPassword, tabs, secret, ...rest }) => {
        const userinfo = user === undefined ? secret : emptyPassword ? `${secret}:` : `${user}:${secret}`
        const url = `${scheme}:${slashes}${userinfo}@h.test/p?q=1`
        const sent = tabs === undefined ? url : tabbed(url, tabs)
        // What a URL parser reads as the credential: the password, or the user alone when the password is empty.
        let credential = ''
        try {
          const read = new URL(sent)
          credential = decodeURIComponent(read.password === '' ? read.username : read.password)
        } catch {
          // Not a URL to a parser: none.
        }
        return { ...rest, credential, url: sent }
      })
      // Those whose userinfo a URL parser reads (others have none to redact).
      .filter(({ credential }) => /SECRET|QQX|ZZW|JJY/.test(credential))
    fc.assert(
      fc.property(listed, ({ url, first, separator, header, credential }) => {
        // No part of the credential left (the tabs a URL parser drops taken out first).
        const parts = credential.split(/[,: ]|https?/).filter((part) => /SECRET|QQX|ZZW|JJY/.test(part))
        for (const value of [url, `${first}${separator}${url}`]) {
          const journaled = DEFAULT_REDACTION.headerValue(header, value).replace(/\t/g, '')
          for (const part of parts) expect(journaled).not.toContain(part)
        }
      }),
      { numRuns: 2000 },
    )
  })

  it.each([
    ['https://h/x?t\token=S', 'https://h/x?t\token=[redacted]'],
    ['/cb?x=1&client_se\tcret=S', '/cb?x=1&client_se\tcret=[redacted]'],
    ['/a?x=1, /b?api_k\ney=S', '/a?x=1, /b?api_k\ney=[redacted]'],
  ])('redacts a query parameter whose name a URL parser reads through tabs or line breaks: %s (attack80 F3, attack81 F3)', (value, kept) => {
    expect(DEFAULT_REDACTION.headerValue('referer', value)).toBe(kept)
    expect(DEFAULT_REDACTION.headerValue('x-forwarded-uri', value)).toBe(kept)
  })

  it('adds the names an operator gives to the defaults, ignoring case', () => {
    const redaction = new Redaction({ headers: ['X-Partner-Thing'], queryParams: ['SID'] })
    expect(redaction.headerValue('x-partner-thing', 'S')).toBe('[redacted]')
    expect(redaction.headerValue('apikey', 'S')).toBe('[redacted]')
    expect(redaction.url('http://h/p?sid=S&page=2')).toBe('http://h/p?sid=[redacted]&page=2')
    expect(DEFAULT_REDACTION.url('http://h/p?sid=S')).toBe('http://h/p?sid=S')
  })
})
