'use client'
import dynamic from 'next/dynamic'
import type { ReactNode } from 'react'

// petstore-sandbox/browser imports msw/browser, which has no server build: never render it on
// the server (`ssr: false` is allowed in a client component only).
const PetstoreWorker = dynamic(() => import('./petstore-worker'), { ssr: false })

export function PetstoreMocks({ children }: { children: ReactNode }) {
  if (process.env.NEXT_PUBLIC_API_MOCKING !== 'enabled') return children
  return <PetstoreWorker>{children}</PetstoreWorker>
}
