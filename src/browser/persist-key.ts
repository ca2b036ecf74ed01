/** The sessionStorage key under which `persist: true` keeps the petstore's state. */
export const PERSIST_STORAGE_KEY = 'petstore-sandbox/state'
