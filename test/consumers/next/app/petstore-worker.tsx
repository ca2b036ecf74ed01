'use client'
import { setupPetstoreWorker } from 'petstore-sandbox/browser'
import { useEffect, useState, type ReactNode } from 'react'

const { worker } = setupPetstoreWorker({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
// Started once per page: StrictMode runs effects twice in development, and a second start rejects.
let started: Promise<unknown> | undefined

export default function PetstoreWorker({ children }: { children: ReactNode }) {
  const [ready, setReady] = useState(false)
  useEffect(() => {
    started ??= worker.start({ onUnhandledRequest: 'bypass', quiet: true })
    void started.then(() => setReady(true))
  }, [])
  return ready ? children : null
}
