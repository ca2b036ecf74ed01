/** `GET /store/orders`: behaviour not published, so it lists the scenario's orders. */
import { json, type Operation } from './operation.js'

export const listOrders: Operation = {
  id: 'listOrders',
  method: 'GET',
  path: '/store/orders',
  successStatus: 200,
  hasBody: false,
  async run({ tenant }) {
    return json(200, tenant.listOrders())
  },
}
