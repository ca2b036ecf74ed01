// The sandbox demo page: plain ES module, no build, no framework. It talks to the real API
// (/v1/categories) and to the admin API (/__sandbox/...) with the key typed in the page.
// @note Every value from the server is written with textContent, never as HTML.

const KEY_STORAGE = 'petstore-sandbox/demo-key'
const POLL_MS = 2000
const JOURNAL_ROWS = 50

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id))
/** @param {string} id */
const input = (id) => /** @type {HTMLInputElement} */ (document.getElementById(id))

let key = readKey()
let connected = false
/** The newest journal entry shown (id and count), so unchanged polls do not redraw. */
let journalShown = ''
let lastJournalId = 0
/** @type {ReturnType<typeof setTimeout> | undefined} */
let pollTimer

function readKey() {
  try {
    return sessionStorage.getItem(KEY_STORAGE) ?? ''
  } catch {
    return ''
  }
}

function storeKey(value) {
  try {
    if (value) sessionStorage.setItem(KEY_STORAGE, value)
    else sessionStorage.removeItem(KEY_STORAGE)
  } catch {
    // Storage blocked: the key lives for this page only.
  }
}

/**
 * Calls the sandbox; never throws. A network failure answers status 0 with an Error-shaped body.
 * @returns {Promise<{ status: number, body: any }>}
 */
async function call(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' }
  if (key) headers.authorization = `Bearer ${key}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  try {
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    })
    const text = await response.text()
    let parsed = text
    try {
      parsed = text ? JSON.parse(text) : undefined
    } catch {
      // Not JSON: keep the text.
    }
    return { status: response.status, body: parsed }
  } catch (error) {
    return { status: 0, body: { code: 'network_error', message: `The sandbox did not answer: ${error}`, status: 0 } }
  }
}

/** The Error body's message, or a fallback naming the status. */
function messageOf(result) {
  const body = result.body
  if (body && typeof body === 'object' && typeof body.message === 'string') return body.message
  return result.status === 0 ? 'The sandbox did not answer.' : `Unexpected answer: HTTP ${result.status}`
}

function announce(text) {
  $('status').textContent = text
}

/** Shows (or clears, with '') an error next to a field and marks the field invalid. */
function fieldError(fieldId, text) {
  $(`${fieldId}-error`).textContent = text
  const field = document.getElementById(fieldId)
  if (field) {
    if (text) field.setAttribute('aria-invalid', 'true')
    else field.removeAttribute('aria-invalid')
  }
}

/** Runs `task` with the form's buttons disabled, so one click sends one request. */
async function busy(form, task) {
  const buttons = [...form.querySelectorAll('button')]
  for (const button of buttons) button.disabled = true
  form.setAttribute('aria-busy', 'true')
  try {
    await task()
  } finally {
    for (const button of buttons) button.disabled = false
    form.removeAttribute('aria-busy')
  }
}

function cell(row, text, className) {
  const td = document.createElement('td')
  td.textContent = text
  if (className) td.className = className
  row.append(td)
  return td
}

// ---- reads ------------------------------------------------------------------------------------

async function loadHealth() {
  const result = await call('GET', '/__sandbox/health')
  $('health').textContent =
    result.status === 200
      ? `Sandbox ${result.body.version} up for ${result.body.uptimeSeconds} s`
      : `The sandbox is not healthy: ${messageOf(result)}`
}

async function loadState() {
  const result = await call('GET', '/__sandbox/state')
  const list = $('tenant')
  list.replaceChildren()
  if (result.status !== 200) return
  const facts = [
    // The id is 32 hex digits; its first 12 name it well enough on screen.
    ['Tenant', `${String(result.body.tenant).slice(0, 12)}…`],
    ['Scenario', result.body.scenario],
    ['Categories', result.body.categories],
    ['Pets', result.body.pets],
    ['Orders', result.body.orders],
    ['Journal entries', result.body.journalSize],
  ]
  for (const [term, value] of facts) {
    const dt = document.createElement('dt')
    dt.textContent = term
    const dd = document.createElement('dd')
    dd.textContent = Array.isArray(value)
      ? String(value.length)
      : typeof value === 'object' && value !== null
        ? `${value.name} ${value.version ?? ''}`.trim()
        : String(value)
    list.append(dt, dd)
  }
}

/** @type {{ name: string, version: string, description: string, active: boolean, switchable: boolean }[]} */
let scenarios = []

async function loadScenarios() {
  const result = await call('GET', '/__sandbox/scenarios')
  if (result.status !== 200) {
    fieldError('scenario', messageOf(result))
    return
  }
  scenarios = result.body
  const select = /** @type {HTMLSelectElement} */ ($('scenario'))
  select.replaceChildren()
  for (const scenario of scenarios) {
    const option = document.createElement('option')
    option.value = scenario.name
    option.textContent = scenario.active ? `${scenario.name} ${scenario.version} (in use)` : `${scenario.name} ${scenario.version}`
    option.selected = scenario.active
    // The operator may allow only some scenarios (--scenario-allow): the others are shown, not offered.
    option.disabled = !scenario.switchable && !scenario.active
    select.append(option)
  }
  describeScenario()
}

function describeScenario() {
  const select = /** @type {HTMLSelectElement} */ ($('scenario'))
  const chosen = scenarios.find((scenario) => scenario.name === select.value)
  $('scenario-description').textContent = chosen ? chosen.description : ''
}

async function loadCategories() {
  const result = await call('GET', '/v1/categories')
  const body = $('categories').querySelector('tbody')
  body.replaceChildren()
  if (result.status !== 200 || !Array.isArray(result.body)) {
    $('category-count').textContent = `(${messageOf(result)})`
    return
  }
  $('category-count').textContent = `(${result.body.length})`
  for (const category of result.body) {
    const row = document.createElement('tr')
    cell(row, String(category.id), 'number')
    cell(row, category.name)
    cell(row, category.description ?? '', 'muted')
    body.append(row)
  }
}

function formatBody(label, part) {
  const pre = document.createElement('pre')
  const text = part.body === undefined ? '(no body)' : typeof part.body === 'string' ? part.body : JSON.stringify(part.body, null, 2)
  pre.textContent = `${label}${part.truncated ? ` (truncated, ${part.truncated.size} characters)` : ''}\n${text}`
  return pre
}

async function loadJournal() {
  const result = await call('GET', '/__sandbox/requests')
  if (result.status !== 200 || !Array.isArray(result.body)) return
  const entries = result.body
  const newest = entries.at(-1)
  const shown = `${entries.length}:${newest ? newest.id : 0}`
  if (shown === journalShown) return
  journalShown = shown
  // Someone else (a test suite, curl) may have written: follow their creates.
  const wrote = entries.some((entry) => entry.id > lastJournalId && entry.method !== 'GET' && entry.response.status < 300)
  lastJournalId = newest ? newest.id : lastJournalId

  const body = $('journal').querySelector('tbody')
  const open = new Set([...body.querySelectorAll('details[open]')].map((details) => details.dataset.entry))
  body.replaceChildren()
  for (const entry of entries.slice(-JOURNAL_ROWS).reverse()) {
    const row = document.createElement('tr')
    cell(row, new Date(entry.time).toLocaleTimeString())
    cell(row, `${entry.method} ${entry.path}`, 'code')
    const status = cell(row, String(entry.response.status), 'number')
    status.classList.add(entry.response.status >= 400 ? 'bad' : 'good')
    cell(row, entry.operation ?? '—')
    cell(row, `${Math.round(entry.durationMs)} ms`, 'number')
    const details = document.createElement('details')
    details.dataset.entry = String(entry.id)
    details.open = open.has(String(entry.id))
    const summary = document.createElement('summary')
    summary.textContent = 'Show'
    details.append(summary, formatBody('Request', entry.request), formatBody('Response', entry.response))
    if (Array.isArray(entry.violations) && entry.violations.length > 0) {
      status.textContent += ` ⚠ ${entry.violations.length}`
      status.title = entry.violations.join('\n')
      const list = document.createElement('pre')
      list.textContent = `Contract violations\n${entry.violations.join('\n')}`
      details.append(list)
    }
    row.append(document.createElement('td'))
    row.lastElementChild.append(details)
    body.append(row)
  }
  await loadViolations()
  if (wrote) await Promise.all([loadCategories(), loadState()])
}

/** Proxy mode's summary of the journal's contract violations; the panel shows only in proxy mode. */
async function loadViolations() {
  const result = await call('GET', '/__sandbox/violations')
  const summary = result.body
  if (result.status !== 200 || !summary || typeof summary.proxy !== 'string') {
    $('violations-panel').hidden = true
    return
  }
  $('violations-panel').hidden = false
  $('violations-upstream').textContent = summary.proxy
  $('violations-count').textContent = `(${summary.violating} of ${summary.exchanges} requests)`
  const body = $('violations').querySelector('tbody')
  body.replaceChildren()
  for (const row of summary.violations) {
    const line = document.createElement('tr')
    cell(line, `${row.count}×`, 'number')
    cell(line, row.operation ?? '—')
    cell(line, row.violation, 'code').classList.add('bad')
    cell(line, new Date(row.lastSeen).toLocaleTimeString())
    body.append(line)
  }
}

async function refreshAll() {
  await Promise.all([loadState(), loadScenarios(), loadCategories()])
  await loadJournal()
}

// ---- polling ----------------------------------------------------------------------------------

function schedulePoll() {
  clearTimeout(pollTimer)
  pollTimer = setTimeout(poll, POLL_MS)
}

async function poll() {
  if (connected && document.visibilityState === 'visible') await loadJournal()
  schedulePoll()
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') void poll()
})

// ---- actions ----------------------------------------------------------------------------------

async function connect() {
  fieldError('key', '')
  if (!key) {
    connected = false
    $('workspace').hidden = true
    return
  }
  const result = await call('GET', '/__sandbox/state')
  if (result.status !== 200) {
    connected = false
    $('workspace').hidden = true
    $('tenant').replaceChildren()
    fieldError('key', messageOf(result))
    return
  }
  connected = true
  journalShown = ''
  $('workspace').hidden = false
  await refreshAll()
  announce('Connected.')
  schedulePoll()
}

$('key-form').addEventListener('submit', (event) => {
  event.preventDefault()
  const form = /** @type {HTMLFormElement} */ (event.currentTarget)
  void busy(form, async () => {
    key = input('key').value.trim()
    if (!key) {
      fieldError('key', 'Type the API key the sandbox printed when it started.')
      $('key').focus()
      return
    }
    storeKey(key)
    await connect()
  })
})

$('forget-key').addEventListener('click', () => {
  key = ''
  storeKey('')
  input('key').value = ''
  void connect()
  announce('Key forgotten.')
})

$('scenario').addEventListener('change', describeScenario)

$('scenario-form').addEventListener('submit', (event) => {
  event.preventDefault()
  const form = /** @type {HTMLFormElement} */ (event.currentTarget)
  void busy(form, async () => {
    fieldError('scenario', '')
    const name = input('scenario').value
    const result = await call('PUT', '/__sandbox/scenario', { name })
    if (result.status !== 200) {
      fieldError('scenario', messageOf(result))
      return
    }
    announce(`Scenario ${result.body.scenario.name} ${result.body.scenario.version} is in use.`)
    await refreshAll()
  })
})

$('reset').addEventListener('click', () => {
  const form = /** @type {HTMLFormElement} */ ($('scenario-form'))
  void busy(form, async () => {
    fieldError('scenario', '')
    const result = await call('POST', '/__sandbox/reset')
    if (result.status !== 200) {
      fieldError('scenario', messageOf(result))
      return
    }
    announce(`Reset to scenario ${result.body.scenario.name}: ${result.body.categories} categories.`)
    await refreshAll()
  })
})

$('clear-journal').addEventListener('click', async () => {
  const result = await call('DELETE', '/__sandbox/requests')
  announce(result.status === 204 ? 'Journal cleared.' : messageOf(result))
  await loadJournal()
})

$('create-form').addEventListener('submit', (event) => {
  event.preventDefault()
  const form = /** @type {HTMLFormElement} */ (event.currentTarget)
  void busy(form, async () => {
    for (const id of ['name', 'description', 'create']) fieldError(id, '')
    const name = input('name').value
    const description = input('description').value
    // The name goes as typed, even empty: the sandbox, not the page, judges it.
    const result = await call('POST', '/v1/categories', description ? { name, description } : { name })
    if (result.status === 201) {
      form.reset()
      announce(`Created category ${result.body.id}: ${result.body.name}.`)
      await Promise.all([loadCategories(), loadState()])
      await loadJournal()
      $('name').focus()
      return
    }
    const message = messageOf(result)
    // 400 messages name their field first ("name is required", "description must be a string").
    const field = result.status === 400 ? (message.startsWith('description') ? 'description' : 'name') : 'create'
    fieldError(field, message)
    if (field !== 'create') $(field).focus()
    await loadJournal()
  })
})

// ---- start ------------------------------------------------------------------------------------

input('key').value = key
void loadHealth()
void connect()
