/**
 * Journal entries typed by their operation, derived from the operations table: an entry's
 * `operation` narrows its response body to what that operation answers. The request body stays
 * `unknown`: it is whatever the client sent, checked or not.
 */
import type { OPERATION_CONTRACTS, OperationId, SchemaName } from '../contract/operations.js'
import type { ApiError, Category, NewCategory, Order, Pet } from '../contract/schemas.js'
import type { JournalBody, JournalEntry } from './journal.js'

interface SchemaTypes {
  Category: Category
  NewCategory: NewCategory
  Pet: Pet
  Order: Order
}

/** The type of a schema of the table (`Category`, `Category[]`). */
type SchemaType<S> = S extends `${infer N extends SchemaName}[]` ? SchemaTypes[N][] : S extends SchemaName ? SchemaTypes[S] : never

/**
 * What operation `O` answers on success, as its contract says.
 * @example type Listed = SuccessBodyOf<'listCategories'> // Category[]
 */
export type SuccessBodyOf<O extends OperationId> = SchemaType<Extract<(typeof OPERATION_CONTRACTS)[number], { id: O }>['success']['schema']>

/**
 * A journal entry of operation `O`. Its response body is the operation's success body or an
 * Error body (tell them apart by `response.status`), text when the journal kept it as text
 * (`truncated`, or JSON that would weigh too much parsed), and undefined for a HEAD request or a
 * dropped connection (status 0).
 * @example
 * const [created] = petstore.requests.all({ operation: 'createCategory', status: 201 })
 * const body = created?.response.body // Category | ApiError | string | undefined
 */
export interface OperationJournalEntry<O extends OperationId> extends JournalEntry {
  readonly operation: O
  readonly response: JournalBody & { readonly status: number; readonly body: SuccessBodyOf<O> | ApiError | string | undefined }
}

/**
 * Any journal entry, a union discriminated by `operation`: `null` for a request no operation
 * answered (404, 405), whose body is an Error body as far as the sandbox goes.
 * @example
 * for (const entry of petstore.requests.all()) if (entry.operation === 'listCategories') entry.response.body // Category[] | ApiError | string | undefined
 */
export type TypedJournalEntry = { [O in OperationId]: OperationJournalEntry<O> }[OperationId] | (JournalEntry & { readonly operation: null })

/**
 * The entries a filter or match on `operation` gives: that operation's, or any.
 * @example type Created = JournalEntryOf<'createCategory'> // OperationJournalEntry<'createCategory'>
 */
export type JournalEntryOf<O extends OperationId | undefined> = [O] extends [OperationId] ? OperationJournalEntry<O> : TypedJournalEntry
