/**
 * The journal's types, checked by `tsc` (npm test runs it over test/): filters take operation
 * ids, methods and numeric statuses only, and an entry's `operation` narrows its response body.
 */
import { describe, expectTypeOf, it } from 'vitest'
import { createPetstore, type ApiError, type Category, type JournalFilter, type Order, type Pet } from '../src/index.js'

const petstore = createPetstore()

describe('journal types', () => {
  it('filters take operation ids, methods and numeric statuses', () => {
    expectTypeOf<JournalFilter['operation']>().toEqualTypeOf<'listCategories' | 'createCategory' | 'getPetById' | 'listOrders' | undefined>()
    petstore.requests.all({ method: 'post', path: '/v1/categories', status: 201 })
    // @ts-expect-error -- not an operation of the interface
    expectTypeOf(() => petstore.requests.all({ operation: 'createCategories' })).toBeFunction()
    // @ts-expect-error -- not a method a client sends
    expectTypeOf(() => petstore.requests.all({ method: 'FETCH' })).toBeFunction()
    // @ts-expect-error -- a status is a number
    expectTypeOf(() => petstore.requests.all({ status: '201' })).toBeFunction()
  })

  it('narrows the response body by the operation filtered on', () => {
    // Functions, not calls: only their types are read.
    expectTypeOf(() => petstore.requests.all({ operation: 'createCategory' })[0]!.response.body).returns.toEqualTypeOf<Category | ApiError | string | undefined>()
    expectTypeOf(() => petstore.requests.all({ operation: 'listCategories' })[0]!.response.body).returns.toEqualTypeOf<Category[] | ApiError | string | undefined>()
    expectTypeOf(() => petstore.requests.all({ operation: 'listOrders', status: 200 })[0]!.operation).returns.toEqualTypeOf<'listOrders'>()
    expectTypeOf(async () => (await petstore.requests.waitFor({ operation: 'getPetById' })).response.body).returns.resolves.toEqualTypeOf<Pet | ApiError | string | undefined>()
    expectTypeOf(() => petstore.requests.all({ operation: 'createCategory' })[0]!.request.body).returns.toBeUnknown()
  })

  it('narrows by operation in a union of any entries', () => {
    const read = () => {
      const entry = petstore.requests.all()[0]!
      if (entry.operation === 'listOrders') expectTypeOf(entry.response.body).toEqualTypeOf<Order[] | ApiError | string | undefined>()
      if (entry.operation === null) expectTypeOf(entry.response.body).toBeUnknown()
    }
    expectTypeOf(read).toBeFunction()
  })
})
