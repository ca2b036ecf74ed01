/** `GET /store/orders`: behaviour not published, so it lists the scenario's orders. */
import { contractOf } from '../contract/operations.js'
import { json, type Operation } from './operation.js'

export const listOrders: Operation = {
  ...contractOf('listOrders'),
  async run({ tenant }) {
    return json(200, tenant.listOrders())
  },
}
