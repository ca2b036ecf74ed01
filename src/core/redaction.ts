/**
 * What the journal (and any line that shows a request's URL) never shows: credentials a client
 * sends along, in its headers or in the URL's query. One rule for every runtime and store; the
 * defaults are listed here, and the redaction section of docs/library.md is generated from them.
 */

/** What a redacted value reads as. */
export const REDACTED = '[redacted]'

/**
 * Request headers whose values are always redacted: ours (`Authorization`) and the well-known
 * credential headers of other services a client may send along.
 */
export const DEFAULT_REDACTED_HEADERS: readonly string[] = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'x-api-key',
  'api-key',
  'apikey',
  'x-auth-token',
  'x-access-token',
  'x-goog-api-key',
  'x-amz-security-token',
  'ocp-apim-subscription-key',
  'private-token',
  'job-token',
  'x-vault-token',
  'x-forwarded-authorization',
  'x-csrf-token',
  'x-xsrf-token',
  'dpop',
  'x-amzn-oidc-data',
  'x-goog-iap-jwt-assertion',
  'cf-access-jwt-assertion',
]

/** Query parameters whose values are always redacted in a journaled URL (names compared ignoring case). */
export const DEFAULT_REDACTED_QUERY_PARAMS: readonly string[] = [
  'api_key',
  'apikey',
  'api-key',
  'key',
  'access_token',
  'id_token',
  'refresh_token',
  'token',
  'auth',
  'password',
  'secret',
  'client_secret',
  'sig',
  'signature',
  'jwt',
  'x-amz-signature',
  'x-amz-credential',
  'x-amz-security-token',
  'x-goog-signature',
  'x-goog-credential',
]

/**
 * Any header or query parameter whose name holds one of these words is redacted too
 * (`x-hub-signature-256`, `x-session-id`, `x-hasura-admin-secret`, `?page_token=`): a name a
 * service invents for a credential nearly always says so.
 * @note Words, not whole names, so `content-type`, `accept`, `user-agent`, `prefer`,
 * `x-request-id` or `traceparent` stay readable; only an exemption keeps a harmless name that
 * holds one of the words readable.
 */
export const CREDENTIAL_WORDS: readonly string[] = ['token', 'secret', 'key', 'passw', 'passcode', 'pwd', 'auth', 'bearer', 'session', 'signature', 'credential', 'cookie', 'jwt', 'hmac', 'cert']

/** Words that redact a name only standing whole, between `-`, `_`, `.` or its ends (`x-sig`, not `x-signal`). */
export const CREDENTIAL_WHOLE_WORDS: readonly string[] = ['sig']

/** {@link CREDENTIAL_WORDS} and {@link CREDENTIAL_WHOLE_WORDS} as one test of a name (ignoring case). */
export const CREDENTIAL_NAME_PATTERN = new RegExp(`${CREDENTIAL_WORDS.join('|')}|(?:^|[-_.])(?:${CREDENTIAL_WHOLE_WORDS.join('|')})(?:$|[-_.])`, 'i')

/**
 * Names the pattern would catch that are not credentials, which someone reading the journal
 * wants to see: `Idempotency-Key` tells retries apart. A name in a redacted list wins over these.
 */
export const DEFAULT_READABLE_NAMES: readonly string[] = ['idempotency-key', 'x-idempotency-key']

/**
 * Headers whose value is a URL (or a path with its query): its query is redacted as the request's own is.
 * @note The request URI a proxy forwards (`X-Forwarded-Uri`, `X-Original-URI`, `X-Rewrite-URL`) was journaled whole:
 * the `?api_key=` the entry's `url` redacted was readable in the same entry (attack64 F2).
 */
export const URL_HEADERS: ReadonlySet<string> = new Set(['referer', 'content-location', 'x-forwarded-uri', 'x-forwarded-url', 'x-original-uri', 'x-original-url', 'x-rewrite-url', 'x-request-uri', 'x-envoy-original-path'])

/** Names to redact beyond the defaults (the `redactHeaders` and `redactQueryParams` options). */
export interface RedactionOptions {
  readonly headers?: readonly string[] | undefined
  readonly queryParams?: readonly string[] | undefined
}

/** The redaction rule in force: the defaults, the pattern, and the names an operator added. */
export class Redaction {
  readonly #headers: ReadonlySet<string>
  readonly #queryParams: ReadonlySet<string>
  readonly #readable = new Set(DEFAULT_READABLE_NAMES)

  constructor({ headers = [], queryParams = [] }: RedactionOptions = {}) {
    this.#headers = new Set([...DEFAULT_REDACTED_HEADERS, ...headers].map((name) => name.toLowerCase()))
    this.#queryParams = new Set([...DEFAULT_REDACTED_QUERY_PARAMS, ...queryParams].map((name) => name.toLowerCase()))
  }

  /** Whether the value of the header `name` is kept out of sight. */
  redactsHeader(name: string): boolean {
    const lower = name.toLowerCase()
    return this.#headers.has(lower) || (!this.#readable.has(lower) && CREDENTIAL_NAME_PATTERN.test(lower))
  }

  /** Whether the value of the query parameter `name` (decoded) is kept out of sight. */
  redactsQueryParam(name: string): boolean {
    const lower = name.toLowerCase()
    return this.#queryParams.has(lower) || (!this.#readable.has(lower) && CREDENTIAL_NAME_PATTERN.test(lower))
  }

  /** A header's value as a reader sees it. */
  headerValue(name: string, value: string): string {
    if (this.redactsHeader(name)) return REDACTED
    if (!URL_HEADERS.has(name.toLowerCase())) return value
    // @note Read twice, the second redacting what it reads as a credential in what the first left: a list cut before each
    // URL or path with a slash, then each URL of a special scheme with no slash after a comma read to its authority's end
    // (a password or a query value may hold `,def:` itself: cut there as a URL's start at once,
    // `https://user:p,w:secret@h/` journaled `p`, and `?access_token=abc,def:TAIL` its tail: review57 R1).
    return afterSpecialSchemes(this.#list(value))
  }

  /**
   * `value` as a list of URLs, each redacted ({@link #continued}), cut at each comma (with the blanks around it, each kept
   * as sent) before a URL's start with a slash ({@link urlStartsAt}).
   * @note One URL each, as Node.js joins a header sent more than once (`, `): read as one, the query of every URL but the
   * first went unread, a chain of proxies' `X-Forwarded-Uri` journaling `access_token=` whole (attack67 F1).
   * Cut only where a URL or a path begins after the ", ": one URL's query may hold ", " itself (review53 R3).
   * @note At any comma with white space or none around it (a list as RFC 9110 writes it, `OWS "," OWS`): cut at ", "
   * only, a proxy's own list (`/a,/b?token=S`) journaled the second URL's credentials (attack70 F2).
   * @note A piece without a query of its own may be the rest of the one before's, cut where its query held a comma
   * before a path (`/cb?paths=/a,/b&access_token=S`): its parameters after an `&` are read as a query's. Read as a
   * URL of its own only, its credentials were journaled (review55 R1).
   * @note Scanned once, not split by a regular expression: one with blanks around the comma and a look-ahead took time
   * in the square of a run of tabs after a comma (15 KB of them held the server 7.5 s: review57 R2).
   */
  #list(value: string): string {
    let out = ''
    let piece = 0
    for (let comma = value.indexOf(','); comma !== -1; comma = value.indexOf(',', comma + 1)) {
      const after = blanksEnd(value, comma + 1)
      if (!urlStartsAt(value, after)) continue
      let before = comma
      while (before > piece && (value[before - 1] === ' ' || value[before - 1] === '\t')) before--
      out += this.#continued(value.slice(piece, before)) + value.slice(before, after)
      piece = after
      comma = after - 1
    }
    return out + this.#continued(value.slice(piece))
  }

  /**
   * A URL as a reader sees it: the values of credential query parameters, and a password in
   * the URL itself, replaced by `[redacted]`; everything else exactly as it was.
   */
  url(url: string): string {
    return this.#withQueryAt(url, url.indexOf('?'))
  }

  /** {@link url}, its query beginning after `url[start]` (none when -1, or after the fragment's `#`). */
  #withQueryAt(url: string, start: number): string {
    const hashAt = url.indexOf('#')
    const end = hashAt === -1 ? url.length : hashAt
    const fragment = url.slice(end)
    if (start === -1 || start > end) return withoutPassword(url.slice(0, end)) + fragment
    const kept = url
      .slice(start + 1, end)
      .split('&')
      .map((part) => {
        const equals = part.indexOf('=')
        return equals !== -1 && this.redactsQueryParam(decodeName(part.slice(0, equals))) ? `${part.slice(0, equals)}=${REDACTED}` : part
      })
      .join('&')
    return `${withoutPassword(url.slice(0, start))}${url[start]}${kept}${fragment}`
  }

  /** A piece of a URL list: a URL, or without a `?` the rest of one whose query it continues from its first `&` (see {@link headerValue}). */
  #continued(piece: string): string {
    return this.#withQueryAt(piece, piece.includes('?') ? piece.indexOf('?') : piece.indexOf('&'))
  }
}

/** Where the spaces and tabs that begin at `text[at]` end (a list's blanks after a comma). */
function blanksEnd(text: string, at: number): number {
  while (text[at] === ' ' || text[at] === '\t') at++
  return at
}

/** Whether `text[at]` is a tab or line break: a URL parser drops them (see {@link withoutPassword}). */
const dropped = (text: string, at: number) => text[at] === '\t' || text[at] === '\n' || text[at] === '\r'

/**
 * Whether a URL or a path begins at `text[at]` as {@link withoutPassword} reads one (tabs and line breaks dropped): a
 * slash or backslash, or a scheme with one after its colon.
 * @note Before a scheme holding tabs too (`ht\ttps://`): cut only where none, such a list's second URL was journaled
 * with its password (attack76 F1).
 */
function urlStartsAt(text: string, at: number): boolean {
  while (dropped(text, at)) at++
  if (text[at] === '/' || text[at] === '\\') return true
  const colon = schemeEnd(text, at)
  if (colon === -1) return false
  at = colon + 1
  while (dropped(text, at)) at++
  return text[at] === '/' || text[at] === '\\'
}

/** The schemes a URL parser reads an authority after with no slash (`http:user:pw@host/`): its special schemes. */
const SPECIAL_SCHEMES: ReadonlySet<string> = new Set(['http', 'https', 'ws', 'wss', 'ftp', 'file'])

/**
 * Whether a special scheme and its colon begin at `text[at]` (tabs and line breaks dropped), with or without slashes
 * after: a URL parser reads `http:user:pw@host/` as `http://user:pw@host/`.
 * @note Not cut there, such a list's second URL was journaled with its password (attack76 F1: 55 of 82 generated).
 */
function specialSchemeAt(text: string, at: number): boolean {
  while (dropped(text, at)) at++
  const colon = schemeEnd(text, at)
  return colon !== -1 && SPECIAL_SCHEMES.has(text.slice(at, colon).replace(/[\t\n\r]/g, '').toLowerCase())
}

/**
 * `value` with the userinfo of each URL of a special scheme after a comma (and blanks) redacted as a URL parser reads
 * it ({@link withoutPassword}), read from its scheme to its authority's end; one found inside another's authority (a
 * password holding `,http:`) left to the first, whose reading takes in what the later one's would.
 * @note Cut into pieces there instead, `http:u:p,http:x:y@h` (a password `p,http:x:y`) journaled `p`, and `x` as a
 * user (review57 R1).
 */
function afterSpecialSchemes(value: string): string {
  let out = ''
  let done = 0
  for (let comma = value.indexOf(','); comma !== -1; comma = value.indexOf(',', comma + 1)) {
    const at = blanksEnd(value, comma + 1)
    if (!specialSchemeAt(value, at)) continue
    const end = authorityEnd(value, at)
    out += value.slice(done, at) + withoutPassword(value.slice(at, end))
    done = end
    comma = end - 1
  }
  return done === 0 ? value : out + value.slice(done)
}

/** Where the authority of a URL whose scheme begins at `text[at]` ends: past its scheme and any slashes (tabs and line breaks dropped), at the next `/`, `\`, `?` or `#`, or the end. */
function authorityEnd(text: string, at: number): number {
  let i = schemeEnd(text, at) + 1
  while (text[i] === '/' || text[i] === '\\' || dropped(text, i)) i++
  while (i < text.length && text[i] !== '/' && text[i] !== '\\' && text[i] !== '?' && text[i] !== '#') i++
  return i
}

/** Where the colon ending a scheme that begins at `text[at]` is (a letter, then letters, digits, `+`, `-`, `.`, tabs or line breaks), or -1. */
function schemeEnd(text: string, at: number): number {
  if (!/[a-z]/i.test(text[at] ?? '')) return -1
  for (let i = at + 1; i < text.length; i++) {
    if (text[i] === ':') return i
    if (!/[\w+.-]/.test(text[i]!) && !dropped(text, i)) return -1
  }
  return -1
}

/** The rule with the defaults alone. */
export const DEFAULT_REDACTION = new Redaction()

/** A query parameter's name as a server reads it (tabs and line breaks dropped, `+` a space); as sent when it does not decode. */
function decodeName(raw: string): string {
  // @note Tabs and line breaks dropped, as a URL parser drops them: `?t\token=S` is `?token=S`, journaled whole before
  // (attack80 F3, attack81 F3).
  const name = raw.replace(/[\t\n\r]/g, '').replace(/\+/g, ' ')
  try {
    return decodeURIComponent(name)
  } catch {
    return name
  }
}

/**
 * `http://user:pw@host/` → `http://user:[redacted]@host/`: the userinfo's password is a credential too. The userinfo
 * ends at the authority's last `@`, as a URL parser reads it (`\\` ends the authority as `/` does).
 * @note Cut at the first `@`, a password holding one (`user:p@ss@host`) was journaled in part (attack67 F1).
 * @note Also after a scheme and any slashes or backslashes (`https:/`, `https:\\`, as browsers read them), and in a
 * scheme-relative URL (`//user:pw@host`, a Referer may be one): only after `scheme://`, those were journaled whole
 * (attack72 F3).
 */
function withoutPassword(url: string): string {
  // @note A URL parser drops every tab and line break in a URL: `https:\t//u:pw@h` is `https://u:pw@h`. Read as sent, such
  // URLs' passwords were journaled (attack73 F1: 99 of 506 generated ones); one holding userinfo is journaled as read.
  if (/[\t\n\r]/.test(url)) {
    const read = url.replace(/[\t\n\r]/g, '')
    const redacted = withoutPasswordAsRead(read)
    return redacted === read ? url : redacted
  }
  return withoutPasswordAsRead(url)
}

/**
 * {@link withoutPassword} of a URL without tabs or line breaks. Its user too when it has no password: a userinfo of one
 * part is a token as often as a name (`https://<token>@host`; attack73 F1).
 * @note After any number of slashes or backslashes, scheme or none: `///u:pw@h` is `http://u:pw@h` to a URL parser
 * (attack73 F1).
 */
function withoutPasswordAsRead(url: string): string {
  const scheme = /^(?:[a-z][\w+.-]*:[\\/]*|[\\/]{2,})/i.exec(url)
  if (scheme === null) return url
  const rest = url.slice(scheme[0].length)
  const end = rest.search(/[/\\?#]/)
  const authority = end === -1 ? rest : rest.slice(0, end)
  const at = authority.lastIndexOf('@')
  if (at === -1) return url
  const colon = authority.indexOf(':')
  // @note A password empty (`https://<token>:@host`, how `curl -u <key>:` sends a key) is the user alone: its password
  // redacted, the token was journaled (attack78 F1).
  if (colon === -1 || colon > at) return `${scheme[0]}${REDACTED}${rest.slice(at)}`
  if (colon === at - 1) return `${scheme[0]}${REDACTED}${rest.slice(colon)}`
  return `${scheme[0]}${authority.slice(0, colon + 1)}${REDACTED}${rest.slice(at)}`
}
